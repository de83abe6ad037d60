"""``GET /agent/tools`` (issue 38): the tools a session's mode leaves, and a tool the mode
holds back refused over HTTP (403 ``tool_forbidden_in_mode``); the mode is kept in the
database across a restart."""

from __future__ import annotations

from typing import Any

from tests.gateway.conftest import Sidecar, SidecarFactory, message
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply


async def tools_of(sc: Sidecar, query: str = "") -> tuple[int, Any]:
    status, data, _ = await sc.call("GET", f"/agent/tools{query}")
    return status, data


def direct(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """``biz_params.tool`` in the chat ``s1``: one tool run without the model."""
    tool = {"name": name, "input": arguments or {}}
    return {"input": [message("")], "session_id": "s1", "biz_params": {"tool": tool}}


async def test_tools_follow_the_session_mode_across_a_restart(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, data = await tools_of(sc, "?session_id=s1")
    assert status == 404 and data["error"]["code"] == "session_not_found"
    assert "s1" in data["error"]["message"] and "/agent/process" in data["error"]["message"]

    status, data, _ = await sc.call("POST", "/agent/process", direct("enter_plan_mode"))
    assert status == 200 and data["events"][1]["tool_result"]["ok"] is True
    status, data = await tools_of(sc, "?session_id=s1")
    assert status == 200 and data["mode"] == "plan" and data["session_id"] == "s1"
    listed = {item["name"]: item for item in data["items"]}
    assert "memory_add" not in listed and "memory_delete" not in listed
    assert listed["memory_search"]["read_only"] is True
    assert listed["exit_plan_mode"]["effect"] == "control"
    assert listed["memory_search"]["parameters"]["type"] == "object"

    status, data, _ = await sc.call("POST", "/agent/process", direct("memory_add", {"text": "x"}))
    assert status == 403 and data["error"]["code"] == "tool_forbidden_in_mode"
    assert "plan mode" in data["error"]["message"]
    assert "exit_plan_mode" in data["error"]["message"]
    assert await sc.kernel.store.list_memories() == []
    _, chats, _ = await sc.call("GET", "/chats")
    assert [c["mode"] for c in chats["chats"] if c["session_id"] == "s1"] == ["plan"]

    await sc.stop()  # the database closes; a new Kernel opens it again
    again = await sidecar(anthropic_sim, keep_config=True)
    status, data = await tools_of(again, f"?session_id={chats['chats'][0]['id']}")
    assert status == 200 and data["mode"] == "plan"
    assert "memory_add" not in {item["name"] for item in data["items"]}
    anthropic_sim.enqueue(text_reply("planning"))
    assert (await again.process("hi", session_id="s1"))[0] == 200
    sent = {tool["name"] for tool in anthropic_sim.requests[-1].body["tools"]}
    assert "memory_add" not in sent and {"memory_search", "exit_plan_mode"} <= sent

    status, data = await tools_of(again)  # no session: what a new chat starts with
    assert status == 200 and data["mode"] == "act"
    assert {"memory_add", "memory_search"} <= {item["name"] for item in data["items"]}


async def test_plan_mode_holds_back_the_arrays_that_write_and_the_tool_route(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    (tmp_path / "notes.txt").write_text("alpha\n", encoding="utf-8")
    status, _, _ = await sc.call("POST", "/agent/process", direct("enter_plan_mode"))
    assert status == 200
    # edit writes: refused before anything changes; view reads: answered
    edit = {"session_id": "s1", "edit": {"path": "notes.txt", "start": 1, "end": 1,
                                         "content": "omega"}}  # fmt: skip
    status, data, _ = await sc.call("POST", "/agent/process", edit)
    assert status == 403 and data["error"]["code"] == "tool_forbidden_in_mode", data
    assert "exit_plan_mode" in data["error"]["message"]
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "alpha\n"
    view = {"session_id": "s1", "view": {"path": "notes.txt"}}
    status, data, _ = await sc.call("POST", "/agent/process", view)
    assert status == 200 and "alpha" in data["reply"], data
    # the one-tool route asks the same rule
    body = {"session_id": "s1", "input": {"text": "likes tea"}}
    status, data, _ = await sc.call("POST", "/agent/tools/memory_add", body)
    assert status == 403 and data["error"]["code"] == "tool_forbidden_in_mode", data
    status, data, _ = await sc.call("POST", "/agent/tools/memory_list", {"session_id": "s1"})
    assert status == 200 and data["ok"] is True, data
    assert await sc.kernel.store.list_memories() == []
