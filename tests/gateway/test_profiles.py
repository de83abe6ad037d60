"""``/agent/personas`` and ``/agent/projects`` over a live sidecar: the files they write
beside config.toml, what the library reads back, and the refusals by code (hostile
names, bodies too large, a taken name, a broken file)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from kernel.profiles.library import MAX_PROFILE_BYTES
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim

PERSONA = {
    "name": "tutor",
    "description": "patient maths tutor",
    "body": "Explain step by step.",
    "tools": ["memory_*", "web_search"],
    "reasoning": "low",
}


async def test_persona_crud_writes_the_file_the_library_reads(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    folder = sc.config_path.parent / "personas"
    status, data, _ = await sc.call("GET", "/agent/personas")
    assert status == 200 and data == {"personas": []}

    status, data, _ = await sc.call("POST", "/agent/personas", PERSONA)
    assert status == 201, data
    assert data["name"] == "tutor" and data["usable"] is True and data["problem"] is None
    assert data["tools"] == ["memory_*", "web_search"] and data["reasoning"] == "low"
    assert data["source"] == "personas/tutor.md"
    text = (folder / "tutor.md").read_text()
    assert text.startswith("---\nname: tutor\ndescription: patient maths tutor\n")
    assert "Explain step by step." in text

    status, data, _ = await sc.call("POST", "/agent/personas", PERSONA)
    assert status == 409 and data["error"]["code"] == "profile_exists"

    change = {"description": "a stricter tutor", "tools": []}
    status, data, _ = await sc.call("PUT", "/agent/personas/tutor", change)
    assert status == 200, data
    assert data["description"] == "a stricter tutor" and data["tools"] == []
    assert data["body"] == "Explain step by step." and data["reasoning"] == "low"

    status, data, _ = await sc.call("GET", "/agent/personas/tutor")
    assert status == 200 and data["description"] == "a stricter tutor"
    status, data, _ = await sc.call("GET", "/agent/personas")
    assert [p["name"] for p in data["personas"]] == ["tutor"]

    status, data, _ = await sc.call("DELETE", "/agent/personas/tutor")
    assert status == 200 and data == {"deleted": True, "name": "tutor"}
    assert not (folder / "tutor.md").exists()
    status, data, _ = await sc.call("DELETE", "/agent/personas/tutor")
    assert status == 404 and data["error"]["code"] == "profile_not_found"


async def test_projects_have_a_folder_and_no_tools(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    body = {"name": "site", "description": "the web site", "folder": "~/src/site", "tools": ["x"]}
    status, data, _ = await sc.call("POST", "/agent/projects", body)
    assert status == 201, data
    assert data["folder"] == "~/src/site" and "tools" not in data
    status, data, _ = await sc.call("PUT", "/agent/projects/site", {"folder": ""})
    assert status == 200 and data["folder"] == ""
    text = (sc.config_path.parent / "projects" / "site.md").read_text()
    assert "folder" not in text
    bad = {"folder": "/tmp\ndescription: x"}
    status, data, _ = await sc.call("PUT", "/agent/projects/site", bad)
    assert status == 400 and data["error"]["details"]["field"] == "folder"
    status, data, _ = await sc.call("GET", "/agent/projects")
    assert [p["name"] for p in data["projects"]] == ["site"]
    # A persona of the same name is another file.
    status, data, _ = await sc.call("GET", "/agent/personas/site")
    assert status == 404


async def test_an_unknown_name_is_refused_naming_the_usable_ones(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    await sc.call("POST", "/agent/personas", PERSONA)
    status, data, _ = await sc.call("GET", "/agent/personas/nobody")
    assert status == 404
    assert data["error"]["code"] == "profile_not_found"
    assert data["error"]["details"]["available"] == ["tutor"]
    assert "tutor" in data["error"]["message"]
    status, data, _ = await sc.call("PUT", "/agent/personas/nobody", {"description": "x"})
    assert status == 404 and data["error"]["code"] == "profile_not_found"
    assert not (sc.config_path.parent / "personas" / "nobody.md").exists()


@pytest.mark.parametrize("name", ["../x", "a/b", "x" * 65, "café", ".hidden", "-x", "a b"])
async def test_hostile_names_write_nothing(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, name: str
) -> None:
    sc = await sidecar(anthropic_sim)
    base = sc.config_path.parent
    before = sorted(p.name for p in base.rglob("*"))
    status, data, _ = await sc.call("POST", "/agent/personas", {**PERSONA, "name": name})
    assert status == 400, data
    assert data["error"]["code"] in ("profile_invalid_name", "invalid_request")
    for method in ("GET", "PUT", "DELETE"):
        body = {"description": "x"} if method == "PUT" else None
        status, data, _ = await sc.call(method, f"/agent/personas/{quote(name, safe='')}", body)
        assert status == 404, (method, data)
        assert data["error"]["code"] in ("profile_not_found", "not_found")
    assert sorted(p.name for p in base.rglob("*")) == before
    assert not (base / "x").exists() and not (base.parent / "x.md").exists()


async def test_bad_bodies_are_refused_by_field(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    cases: list[tuple[dict[str, object], str]] = [
        ({"name": "a"}, "description"),
        ({"name": "a", "description": "   "}, "description"),
        ({"name": "a", "description": "d", "tools": "memory_*"}, "tools"),
        ({"name": "a", "description": "d", "reasoning": True}, "reasoning"),
        ({"name": "a", "description": "d\nmodel: x:y"}, "description"),
        ({"name": "a", "description": "d", "model": "m:x\ntools: [*]"}, "model"),
    ]
    for body, field in cases:
        status, data, _ = await sc.call("POST", "/agent/personas", body)
        assert status == 400, (body, data)
        if field:
            assert data["error"]["details"]["field"] == field, data
    for body in (
        {"name": "a", "description": "d", "tools": ["web search"]},
        {"name": "a", "description": "d", "reasoning": "huge"},
        {"name": "a", "description": "d", "reasoning": 10},
    ):
        status, data, _ = await sc.call("POST", "/agent/personas", body)
        assert status == 400 and data["error"]["code"] == "invalid_request", (body, data)
    assert not (sc.config_path.parent / "personas").exists()


async def test_a_body_larger_than_a_profile_may_be_is_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"max_body_bytes": 4 * MAX_PROFILE_BYTES})
    body = {**PERSONA, "body": "x" * (MAX_PROFILE_BYTES - 10)}
    status, data, _ = await sc.call("POST", "/agent/personas", body)
    assert status == 413 and data["error"]["code"] == "profile_too_large"
    body = {**PERSONA, "body": "x" * (MAX_PROFILE_BYTES + 10)}
    status, data, _ = await sc.call("POST", "/agent/personas", body)
    assert status == 400 and data["error"]["details"]["field"] == "body"
    assert not (sc.config_path.parent / "personas").exists()


def write_typo(folder: Path) -> None:
    folder.mkdir()
    (folder / "typo.md").write_text("---\ndescription: d\ntool: web_search\n---\nBe brief.\n")


async def test_a_broken_file_is_listed_with_its_problem_and_never_rewritten_in_part(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    folder = sc.config_path.parent / "personas"
    write_typo(folder)
    before = (folder / "typo.md").read_bytes()
    status, data, _ = await sc.call("GET", "/agent/personas")
    [listed] = data["personas"]
    assert listed["usable"] is False and "tool" in listed["problem"]
    # What could be read of it stops at the typo: a partial rewrite would drop the rest
    # (an allow-list after the bad line, say). Refused, naming the problem and the fix.
    fix = {"description": "d"}
    status, data, _ = await sc.call("PUT", "/agent/personas/typo", fix)
    assert status == 409 and data["error"]["code"] == "profile_invalid", data
    assert "tool" in data["error"]["message"] and "delete" in data["error"]["message"]
    assert (folder / "typo.md").read_bytes() == before
    # Deleted and made again, it is usable.
    status, _, _ = await sc.call("DELETE", "/agent/personas/typo")
    assert status == 200
    again = {"name": "typo", "description": "d", "tools": ["web_search"], "body": "Be brief."}
    status, data, _ = await sc.call("POST", "/agent/personas", again)
    assert status == 201 and data["usable"] is True and data["tools"] == ["web_search"]


async def test_a_chats_scope_is_set_over_http_both_names_checked_first(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    await sc.call("POST", "/agent/personas", PERSONA)
    await sc.call("POST", "/agent/projects", {"name": "site", "description": "the site"})
    status, chat, _ = await sc.call("POST", "/chats", {"session_id": "s1"})
    assert status == 201
    path = f"/chats/{chat['id']}/scope"

    status, data, _ = await sc.call("PUT", path, {"persona": "tutor"})
    assert status == 200 and data == {"id": chat["id"], "persona": "tutor", "project": ""}
    status, data, _ = await sc.call("PUT", path, {"project": "site"})
    assert data == {"id": chat["id"], "persona": "tutor", "project": "site"}
    status, data, _ = await sc.call("GET", f"/chats/{chat['id']}")
    assert data["meta"]["persona"] == "tutor" and data["meta"]["project"] == "site"
    # The other chats are untouched.
    status, data, _ = await sc.call("GET", "/chats/chat-default/scope")
    assert status == 200 and data == {"id": "chat-default", "persona": "", "project": ""}

    # One name unknown: nothing changes, the refusal names the ones there are.
    status, data, _ = await sc.call("PUT", path, {"persona": "", "project": "nope"})
    assert status == 404 and data["error"]["code"] == "profile_not_found"
    assert data["error"]["details"]["available"] == ["site"]
    status, data, _ = await sc.call("GET", path)
    assert (data["persona"], data["project"]) == ("tutor", "site")

    status, data, _ = await sc.call("PUT", path, {"persona": ""})
    assert data == {"id": chat["id"], "persona": "", "project": "site"}
    status, data, _ = await sc.call("PUT", path, {"persona": "../x"})
    assert status == 404 and data["error"]["code"] == "profile_not_found"
    status, data, _ = await sc.call("PUT", "/chats/chat-999/scope", {"persona": "tutor"})
    assert status == 404
    status, data, _ = await sc.call("PUT", path, {"persona": 5})
    assert status == 400 and data["error"]["details"]["field"] == "persona"


async def test_a_persona_naming_an_unconfigured_model_is_refused_at_switch_time(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    body = {**PERSONA, "model": "nowhere:model-z"}
    status, data, _ = await sc.call("POST", "/agent/personas", body)
    assert status == 201  # the file is fine; the model is this config's matter
    assert data["usable"] is False and "nowhere" in data["problem"]
    status, data, _ = await sc.call("PUT", "/chats/chat-default/scope", {"persona": "tutor"})
    assert status == 409 and data["error"]["code"] == "profile_invalid"
    assert "nowhere" in data["error"]["message"]


async def test_a_tool_called_directly_works_in_the_chats_project(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    await sc.call("POST", "/agent/projects", {"name": "site", "description": "the site"})
    status, chat, _ = await sc.call("POST", "/chats", {"session_id": "s1"})
    await sc.call("PUT", f"/chats/{chat['id']}/scope", {"project": "site"})
    tool = {"name": "memory_add", "input": {"text": "the site ships friday", "scope": "project"}}
    body = {
        "session_id": "s1",
        "input": [{"role": "user", "content": [{"type": "text", "text": ""}]}],
        "biz_params": {"tool": tool},
    }
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 200 and data["events"][1]["tool_result"]["ok"] is True, data
    [memory] = await sc.kernel.store.list_memories()
    assert memory.scope == "project:site"
    body["biz_params"] = {"tool": {"name": "memory_list", "input": {}}}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert "the site ships friday" in data["events"][-1]["reply"], data
