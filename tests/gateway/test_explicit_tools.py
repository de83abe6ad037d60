"""seed 000's explicit tool calls on /agent/process (the top-level view / edit / find /
search / browser / shell arrays) and POST /agent/tools/{name}, against a real sidecar:
what the caller gets back, what changed on disk, what the owner was asked, and seed
000's error codes (tool_invoke_failed, tool_invalid_result, provider_request_failed)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kernel.core.events import AskUser
from tests.conftest import free_port
from tests.gateway.conftest import SidecarFactory, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.search_sims import Hit, SearchSim
from tests.waiting import wait_until

NOTES = "alpha\nbeta\ngamma\ndelta\n"


class Owner:
    """Telegram's side of the owner's approval: the questions shown outside any turn."""

    def __init__(self) -> None:
        self.shown: list[tuple[AskUser, str]] = []

    async def show(self, event: AskUser, label: str, where: str = "") -> None:
        self.shown.append((event, label))

    async def settle(self, tool_call_id: str) -> None:
        return None


class Gone(AnthropicSim):
    """A Messages API address where nothing listens (a port bound, then let go)."""

    def __init__(self) -> None:
        super().__init__()
        self.address = f"http://127.0.0.1:{free_port()}"

    @property
    def base_url(self) -> str:
        return self.address


async def post(sc: Any, body: dict[str, Any]) -> tuple[int, Any]:
    status, data, _ = await sc.call("POST", "/agent/process", body)
    return status, data


async def test_view_edit_and_find_work_on_the_workspace_files(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text(NOTES, encoding="utf-8")
    # A single object is one item.
    status, data = await post(sc, {"view": {"path": "docs/notes.txt", "start": 2, "end": 3}})
    assert status == 200, data
    assert [e["type"] for e in data["events"]] == ["tool_call", "tool_result", "completed"]
    assert data["events"][0]["tool_call"]["name"] == "view"
    result = data["events"][1]["tool_result"]
    assert (result["name"], result["ok"]) == ("view", True)
    assert json.loads(result["summary"])["total_lines"] == 4
    assert data["reply"].splitlines()[1:] == ["2: beta", "3: gamma"]
    status, data = await post(
        sc,
        {
            "edit": [
                {"path": "docs/notes.txt", "start": 2, "end": 3, "content": "BETA\nGAMMA\nmore"}
            ]
        },
    )
    assert status == 200, data
    disk = (tmp_path / "docs" / "notes.txt").read_text(encoding="utf-8")
    assert disk == "alpha\nBETA\nGAMMA\nmore\ndelta\n"
    status, data = await post(
        sc,
        {"find": [{"pattern": "gamma", "ignore_case": True}, {"path": "docs", "pattern": "zzz"}]},
    )
    assert status == 200, data
    assert [e["type"] for e in data["events"]] == ["tool_call", "tool_result"] * 2 + ["completed"]
    assert "docs/notes.txt:3: GAMMA" in data["reply"]
    assert anthropic_sim.requests == []  # no model call for any of them


async def test_workspace_paths_are_refused_by_the_workspaces_own_rules(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    (tmp_path / "outside.txt").write_text("x", encoding="utf-8")
    (tmp_path / "ws").mkdir()
    status, data = await post(sc, {"view": [{"path": "../outside.txt"}]})
    assert status == 400 and data["error"]["code"] == "path_invalid"
    status, data = await post(sc, {"view": [{"path": "config.toml"}]})
    assert status == 403 and data["error"]["code"] == "path_denied"
    status, data = await post(
        sc, {"edit": [{"path": "config.toml", "start": 1, "end": 1, "content": ""}]}
    )
    assert status == 403 and data["error"]["code"] == "path_denied"
    status, data = await post(sc, {"view": [{"path": "missing.txt"}]})
    assert status == 404 and data["error"]["code"] == "not_found"
    assert data["error"]["details"]["events"][-1]["type"] == "error"


async def test_the_arrays_are_validated_with_clear_400s(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"view": []}, "view", "is empty"),
        ({"view": [{"start": 1}]}, "view[0].path", "is missing"),
        ({"view": [{"path": "a", "start": "1"}]}, "view[0].start", "integer"),
        ({"view": [{"path": "a", "start": 5, "end": 2}]}, "view[0].end", "before start"),
        ({"edit": [{"path": "a", "start": 1, "end": 1}]}, "edit[0].content", "is missing"),
        ({"shell": "ls"}, "shell", "array"),
        ({"view": [{"path": "a"}], "find": [{"pattern": "x"}]}, "find", "one tool per request"),
        ({"view": [{"path": "a"}] * 21}, "view", "more than 20"),
    ]
    for body, field, words in cases:
        status, data = await post(sc, body)
        assert status == 400, (body, data)
        assert data["error"]["code"] == "invalid_request"
        assert data["error"]["details"]["field"] == field, (body, data)
        assert words in data["error"]["message"], (body, data)


async def test_search_is_web_search_and_a_browser_that_is_off_is_named(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    search = SearchSim("searxng")
    search.hits = [Hit("Kernel 2.0 released", "https://example.org/k2", "new")]
    await search.start()
    try:
        extra = f'\n[web.search]\nprovider = "searxng"\nbase_url = "{search.base_url}"\n'
        sc = await sidecar(anthropic_sim, extra=extra)
        status, data = await post(sc, {"search": {"query": "kernel release", "count": 3}})
        assert status == 200, data
        assert data["events"][0]["tool_call"]["name"] == "search"
        assert "Kernel 2.0 released" in data["reply"]
        status, data = await post(sc, {"browser": [{"action": "open", "url": "http://x.test/"}]})
        assert status == 400 and data["error"]["code"] == "tool_not_supported"
        assert "browser tool is not on" in data["error"]["message"]
    finally:
        await search.stop()


async def test_a_browser_item_maps_onto_the_browser_tools_and_a_bad_one_is_named(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    # The browser on: an item with no action it knows is refused before any page opens
    # (no Chromium starts: the mapping is kernel.browser.tool_call's).
    sc = await sidecar(anthropic_sim, extra="\n[browser]\nenabled = true\n")
    status, data = await post(sc, {"browser": {"action": "jump", "url": "http://x.test/"}})
    assert status == 400 and data["error"]["code"] == "invalid_request", data
    assert "open, click, fill, screenshot, find" in data["error"]["message"]


async def test_shell_runs_only_after_the_owner_approved_it(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    body = {"shell": {"command": "echo ran > proof.txt; echo done"}}
    # Nobody to ask (no Telegram): refused, and nothing ran.
    status, data = await post(sc, body)
    assert status == 422 and data["error"]["code"] == "tool_invoke_failed"
    assert data["error"]["details"]["cause"] == "undelivered"
    assert "Telegram" in data["error"]["message"]
    assert not (tmp_path / "proof.txt").exists()
    owner = Owner()
    sc.kernel.channel_registry.asker = owner
    asks = sc.kernel.agent.asks
    # Denied by the owner: still nothing ran.
    waiting = asyncio.ensure_future(post(sc, body))
    await wait_until(lambda: bool(asks.waiting()))
    [question] = asks.waiting()
    assert "echo ran > proof.txt" in question.text and question.kind == "permission"
    _, listed, _ = await sc.call("GET", "/agent/asks")
    assert listed["asks"] == []  # the caller can neither see nor answer it
    asks.answer(question.id, 1)
    status, data = await waiting
    assert status == 422 and data["error"]["details"]["cause"] == "owner"
    assert not (tmp_path / "proof.txt").exists()
    # Allowed: it runs in the workspace and its result is seed 000's tool_result.
    waiting = asyncio.ensure_future(post(sc, body))
    await wait_until(lambda: bool(asks.waiting()))
    asks.answer(asks.waiting()[0].id, 0)
    status, data = await waiting
    assert status == 200, data
    assert (tmp_path / "proof.txt").read_text() == "ran\n"
    result = data["events"][1]["tool_result"]
    assert result["name"] == "shell" and result["ok"] is True
    assert json.loads(result["summary"])["exit_code"] == 0
    assert data["reply"] == "done\n"
    assert len(owner.shown) == 2
    decisions = [(r.tool, r.decision, r.conversation) for r in await sc.kernel.approvals.recent()]
    assert decisions[:2] == [("Bash", "allow", "api"), ("Bash", "deny", "api")]


async def test_a_disabled_explicit_tool_is_403(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, disabled_tools=["shell", "edit"])
    status, data = await post(sc, {"shell": [{"command": "ls"}]})
    assert status == 403 and data["error"]["code"] == "tool_disabled"
    assert "shell" in data["error"]["message"]


async def test_post_agent_tools_invokes_one_tool_and_names_its_failures(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    tools = sc.kernel.tools

    @tools.tool
    def score(value: int) -> dict[str, Any]:
        """A structured result; 13 is no number JSON can carry.

        Args:
            value: the value
        """
        if value == 7:
            raise RuntimeError("seven is unlucky")
        return {"score": float("nan") if value == 13 else value * 2}

    status, data, _ = await sc.call("POST", "/agent/tools/score", {"input": {"value": 4}})
    assert status == 200, data
    assert data["ok"] is True and data["output"] == {"score": 8}
    assert data["session_id"] == "session-default"
    status, data, _ = await sc.call(
        "POST", "/agent/tools/memory_add", {"input": {"text": "likes tea"}, "session_id": "s9"}
    )
    assert status == 200 and data["output"] == {"id": 1}
    assert [m.text for m in await sc.kernel.store.list_memories()] == ["likes tea"]
    status, data, _ = await sc.call("POST", "/agent/tools/score", {"input": {"value": 7}})
    assert status == 422 and data["error"]["code"] == "tool_invoke_failed"
    assert "seven is unlucky" in data["error"]["message"]
    status, data, _ = await sc.call("POST", "/agent/tools/score", {"input": {"value": 13}})
    assert status == 502 and data["error"]["code"] == "tool_invalid_result"
    assert "NaN" in data["error"]["message"] or "ValueError" in data["error"]["message"]
    status, data, _ = await sc.call("POST", "/agent/tools/score", {"input": {"value": "x"}})
    assert status == 400 and data["error"]["code"] == "invalid_request"
    status, data, _ = await sc.call("POST", "/agent/tools/no_such_tool", {})
    assert status == 404 and data["error"]["code"] == "not_found"


async def test_an_unreachable_provider_is_provider_request_failed(
    sidecar: SidecarFactory,
) -> None:
    sc = await sidecar(Gone())
    status, data = await sc.process("hi", session_id="s-gone")
    assert status == 502, data
    assert data["error"]["code"] == "provider_request_failed"
    assert data["error"]["details"]["cause"] == "connection_error"
    body = {"input": [{"role": "user", "content": "hi"}], "session_id": "s-gone2", "stream": True}
    async with sc.http.post(sc.url + "/agent/process", json=body) as response:
        payloads = [p async for p in sse_events(response)]
    assert payloads[-1] == "[DONE]"
    assert payloads[-2]["meta"]["code"] == "provider_request_failed"
