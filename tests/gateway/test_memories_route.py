"""``/memories`` on a live sidecar (real Kernel, SQLite on disk): list, search, filter,
add (the memory_add tool's checks), edit in place, delete, and the refusals."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kernel.core.i18n import get_language, section, set_language
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim


async def add(sc: Sidecar, text: str, **fields: Any) -> dict[str, Any]:
    status, data, _ = await sc.call("POST", "/memories", {"text": text, **fields})
    assert status == 201, data
    assert data["created"] is True
    return dict(data)


async def listed(sc: Sidecar, query: str = "") -> tuple[list[str], bool]:
    status, data, _ = await sc.call("GET", "/memories" + query)
    assert status == 200, data
    return [m["text"] for m in data["memories"]], data["more"]


async def refused(sc: Sidecar, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    status, data, _ = await sc.call(method, path, body)
    assert status >= 400, data
    return status, data["error"]


async def test_add_list_filter_and_page(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    first = await add(sc, "The owner lives in Hangzhou", category="user")
    assert first["scope"] == "global" and first["category"] == "user"
    await add(sc, "Kernel is written in Python", category="project", scope="project:kernel")
    await add(sc, "Answer briefly", category="feedback", scope="persona:coach")
    await add(sc, "Docs live in docs/", category="reference")

    texts, more = await listed(sc)
    assert texts == [
        "Docs live in docs/",
        "Answer briefly",
        "Kernel is written in Python",
        "The owner lives in Hangzhou",
    ]
    assert more is False
    assert await listed(sc, "?category=user") == (["The owner lives in Hangzhou"], False)
    assert await listed(sc, "?scope=project:kernel") == (["Kernel is written in Python"], False)
    assert await listed(sc, "?scope=global&category=project") == ([], False)
    assert await listed(sc, "?limit=2") == (["Docs live in docs/", "Answer briefly"], True)
    assert await listed(sc, "?limit=2&offset=2") == (
        ["Kernel is written in Python", "The owner lives in Hangzhou"],
        False,
    )
    status, one, _ = await sc.call("GET", f"/memories/{first['id']}")
    assert status == 200 and one["text"] == "The owner lives in Hangzhou"

    # null is absent: no category, the global scope.
    status, plain, _ = await sc.call(
        "POST", "/memories", {"text": "Tea at four", "category": None, "scope": None}
    )
    assert status == 201 and (plain["category"], plain["scope"]) == (None, "global")
    await sc.call("DELETE", f"/memories/{plain['id']}")

    # The same fact again (case and spaces aside) is not stored twice: 200, that memory.
    status, again, _ = await sc.call("POST", "/memories", {"text": "the owner  lives in HANGZHOU"})
    assert status == 200 and again["created"] is False and again["id"] == first["id"]


async def test_search_uses_the_memory_search_within_filters(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    await add(sc, "The owner prefers neovim over emacs", category="user")
    await add(sc, "The project uses neovim plugins", category="project", scope="project:kernel")
    await add(sc, "The owner drinks green tea", category="user")
    await add(sc, "主人喜欢喝绿茶", category="user")

    texts, _ = await listed(sc, "?q=neovim")
    assert sorted(texts) == [
        "The owner prefers neovim over emacs",
        "The project uses neovim plugins",
    ]
    assert await listed(sc, "?q=neovim&scope=project:kernel") == (
        ["The project uses neovim plugins"],
        False,
    )
    assert await listed(sc, "?q=neovim&category=user") == (
        ["The owner prefers neovim over emacs"],
        False,
    )
    assert await listed(sc, "?q=绿茶") == (["主人喜欢喝绿茶"], False)
    assert await listed(sc, "?q=vim") != ([], False)  # substrings find what tokens miss
    assert await listed(sc, "?q=kayaking") == ([], False)


async def test_edit_in_place_and_delete(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    memory = await add(sc, "The owner drinks coffee", category="user", scope="project:kernel")
    other = await add(sc, "The owner runs on Sundays")
    path = f"/memories/{memory['id']}"

    status, changed, _ = await sc.call("PATCH", path, {"text": "The owner drinks oolong tea"})
    assert status == 200, changed
    assert (changed["id"], changed["text"], changed["category"], changed["scope"]) == (
        memory["id"],
        "The owner drinks oolong tea",
        "user",
        "project:kernel",
    )
    # The search index follows the edit: the new words find it, the old ones do not.
    assert await listed(sc, "?q=oolong") == (["The owner drinks oolong tea"], False)
    assert await listed(sc, "?q=coffee") == ([], False)

    status, changed, _ = await sc.call("PATCH", path, {"category": "feedback"})
    assert status == 200 and changed["category"] == "feedback"
    assert changed["text"] == "The owner drinks oolong tea"

    # An edit that would duplicate a memory visible with it (global) is refused.
    status, error = await refused(sc, "PATCH", path, {"text": "the owner runs on sundays"})
    assert status == 409 and error["code"] == "memory_exists"
    assert error["details"]["id"] == other["id"]
    _, kept, _ = await sc.call("GET", path)
    assert kept["text"] == "The owner drinks oolong tea" and kept["category"] == "feedback"

    status, deleted, _ = await sc.call("DELETE", path)
    assert status == 200 and deleted == {"deleted": True, "id": memory["id"]}
    assert await listed(sc, "?q=oolong") == ([], False)
    for method, body in (("GET", None), ("PATCH", {"text": "x"}), ("DELETE", None)):
        status, error = await refused(sc, method, path, body)
        assert status == 404 and error["code"] == "not_found", method

    # Undo, as the console does it: the same text, category and scope, created again.
    status, back, _ = await sc.call(
        "POST",
        "/memories",
        {"text": memory["text"], "category": "user", "scope": "project:kernel"},
    )
    assert status == 201 and back["id"] != memory["id"] and back["scope"] == "project:kernel"


async def test_move_versions_and_every_change_in_the_audit_trail(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    memory = await add(sc, "The owner drinks coffee", category="user", scope="project:kernel")
    path = f"/memories/{memory['id']}"
    status, changed, _ = await sc.call("PATCH", path, {"text": "The owner drinks oolong tea"})
    assert status == 200, changed
    status, moved, _ = await sc.call("PATCH", path, {"scope": "global"})
    assert status == 200 and (moved["scope"], moved["text"]) == (
        "global",
        "The owner drinks oolong tea",
    )
    # The same fact in other words (punctuation, case): that memory, updated.
    status, again, _ = await sc.call("POST", "/memories", {"text": "the owner drinks Oolong tea!"})
    assert status == 200 and (again["id"], again["created"], again["updated"]) == (
        memory["id"],
        False,
        True,
    )
    status, history, _ = await sc.call("GET", f"{path}/versions")
    assert status == 200, history
    assert [(v["text"], v["how"], v["scope"]) for v in history["versions"]] == [
        ("The owner drinks oolong tea", "restated", "global"),
        ("The owner drinks coffee", "edited", "project:kernel"),
    ]
    status, error = await refused(sc, "PATCH", path, {"scope": "team:a"})
    assert status == 400 and error["details"]["field"] == "scope"
    status, _, _ = await sc.call("DELETE", path)
    assert status == 200
    status, error = await refused(sc, "GET", f"{path}/versions")
    assert status == 404 and error["code"] == "not_found"

    await sc.kernel.audit.settled()
    rows = await sc.kernel.audit.rows.events(limit=50, kinds=("memory.changed",))
    assert [(r.actor, r.data and r.data["action"]) for r in rows] == [
        ("api", "edited"),
        ("api", "moved"),
        ("api", "restated"),
        ("api", "forgotten"),
    ]
    assert all(r.data and r.data["memory"] == memory["id"] for r in rows)
    assert "oolong" not in str([r.raw_data for r in rows])  # facts only, never the text


async def test_refusals_name_the_parameter(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    for query, field in (
        ("?category=secret", "category"),
        ("?scope=everywhere", "scope"),
        ("?scope=project:", "scope"),
        ("?scope=project:../etc", "scope"),
        ("?limit=0", "limit"),
        ("?limit=501", "limit"),
        ("?limit=abc", "limit"),
        ("?offset=-1", "offset"),
        ("?q=" + "x" * 501, "q"),
    ):
        status, error = await refused(sc, "GET", "/memories" + query)
        assert status == 400 and error["details"]["field"] == field, query
        assert field in error["message"], query

    for body, field in (
        ({}, "text"),
        ({"text": "   "}, "text"),
        ({"text": 5}, "text"),
        ({"text": "x" * 4001}, "text"),
        ({"text": "fine", "category": "secret"}, "category"),
        ({"text": "fine", "scope": "team:a"}, "scope"),
        ({"text": "fine", "scope": "persona:"}, "scope"),
    ):
        status, error = await refused(sc, "POST", "/memories", body)
        assert status == 400 and error["details"]["field"] == field, body

    memory = await add(sc, "The owner is left-handed")
    path = f"/memories/{memory['id']}"
    for body, field in (({}, "text"), ({"text": ""}, "text"), ({"category": "x"}, "category")):
        status, error = await refused(sc, "PATCH", path, body)
        assert status == 400 and error["details"]["field"] == field, body
    for bad in ("abc", "-1", "1.5", "9" * 40, "０"):
        status, error = await refused(sc, "GET", f"/memories/{bad}")
        assert status == 404 and error["code"] == "not_found", bad
    assert await listed(sc) == (["The owner is left-handed"], False)

    # Without the API key nothing is read or written.
    status, data, _ = await sc.call("GET", "/memories", headers={})
    assert status == 401, data
    status, data, _ = await sc.call("DELETE", path, headers={})
    assert status == 401, data
    assert await listed(sc) == (["The owner is left-handed"], False)


def test_the_console_words_cover_the_pages() -> None:
    """Every word the memories, jobs, usage and skills pages ask for is in the
    catalogue, in both languages."""
    static = Path(__file__).parents[2] / "kernel/gateway/console/static"
    wanted: set[str] = set()
    for page in ("memories", "jobs", "usage", "skills"):
        source = (static / f"page-{page}.js").read_text()
        wanted |= set(re.findall(r"""t\(["`](web\.[\w.]+)["`]""", source))
        for prefix, names in (
            ("web.memories.category.", ("user", "feedback", "project", "reference")),
            ("web.memories.scope.", ("global", "project", "persona")),
            (
                "web.jobs.outcome.",
                ("running", "succeeded", "failed", "skipped", "missed", "interrupted"),
            ),
            ("web.jobs.done.", ("pause", "resume", "run")),
            ("web.skills.done.", ("enable", "disable")),
            ("web.usage.col.", ("model", "calls", "input", "output", "cache", "cost")),
            ("web.usage.period.", ("today", "week", "month")),
        ):
            if f"`{prefix}$" in source:
                wanted |= {prefix + n for n in names}
    assert len(wanted) > 60
    before = get_language()
    for language in ("zh", "en"):
        set_language(language)
        try:
            words = section("web.")
        finally:
            set_language(before)
        assert sorted(wanted - set(words)) == [], language
