"""``POST /chats/{id}/retry`` and ``/rewind`` (issue 20) against the strict Anthropic
simulator: what is cut stays in the history and never reaches the model again."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.gateway.conftest import SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, ToolUse, text_reply


def texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        out += [b.get("text", "") for b in content if b.get("type") == "text"]
    return out


async def test_retry_answers_again_without_the_old_answer(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(
        text_reply("first answer"),
        Reply(Text("checking"), ToolUse("memory_add", {"text": "likes tea"})),
        text_reply("bad answer"),
        text_reply("better answer"),
        text_reply("after"),
    )
    _, first = await sc.process("q1", session_id="c1")
    _, second = await sc.process("q2", session_id="c1")
    chat = first["chat_id"]
    assert second["reply"].endswith("bad answer")
    status, data, _ = await sc.call("POST", f"/chats/{chat}/retry")
    assert status == 200, data
    assert data["reply"] == "better answer" and data["chat_id"] == chat
    sent = anthropic_sim.requests[-1].body["messages"]
    joined = "\n".join(texts(sent))
    assert "bad answer" not in joined and "checking" not in joined
    assert "first answer" in joined
    assert sum("q2" in text for text in texts(sent)) == 1  # asked once, not twice
    # The next turn sees the new answer only; the strict simulator accepts the history.
    _, after = await sc.process("q3", session_id="c1")
    assert after["reply"] == "after"
    joined = "\n".join(texts(anthropic_sim.requests[-1].body["messages"]))
    assert "better answer" in joined and "bad answer" not in joined
    # Nothing was deleted: the old exchange is in the chat's history, marked cut.
    status, got, _ = await sc.call("GET", f"/chats/{chat}?rounds=100")
    cut = [m for m in got["messages"] if m.get("cut")]
    assert {m["role"] for m in cut} == {"user", "assistant"} and len(cut) == 4


async def test_rewind_cuts_after_an_answer(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("a1"), text_reply("a2"), text_reply("a3"), text_reply("a4"))
    for q in ("q1", "q2", "q3"):
        _, data = await sc.process(q, session_id="c2")
    chat = data["chat_id"]
    _, got, _ = await sc.call("GET", f"/chats/{chat}?rounds=100")
    a1 = next(m["sequence"] for m in got["messages"] if texts([m]) == ["a1"])
    q1 = next(m["sequence"] for m in got["messages"] if texts([m]) == ["q1"])
    # A user message is no answer to rewind to; nor is an unknown sequence.
    for bad in (q1, 999999):
        status, err, _ = await sc.call("POST", f"/chats/{chat}/rewind", {"after_sequence": bad})
        assert status == 404 and err["error"]["code"] == "rewind_target_not_found", err
    status, err, _ = await sc.call("POST", f"/chats/{chat}/rewind", {"after_sequence": 0})
    assert status == 400
    status, data, _ = await sc.call("POST", f"/chats/{chat}/rewind", {"after_sequence": a1})
    assert status == 200 and data["cut"] == 4 and data["branch"] == 1
    _, after = await sc.process("q4", session_id="c2")
    assert after["reply"] == "a4"
    assert texts(anthropic_sim.requests[-1].body["messages"])[:2] == ["q1", "a1"]
    joined = "\n".join(texts(anthropic_sim.requests[-1].body["messages"]))
    assert "q2" not in joined and "a3" not in joined
    # The cut answer is no target any more.
    a2 = next(m["sequence"] for m in got["messages"] if texts([m]) == ["a2"])
    status, err, _ = await sc.call("POST", f"/chats/{chat}/rewind", {"after_sequence": a2})
    assert status == 404


async def test_retry_with_nothing_to_retry_and_unknown_chat(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, err, _ = await sc.call("POST", "/chats/chat-default/retry")
    assert status == 409 and err["error"]["code"] == "nothing_to_retry"
    status, err, _ = await sc.call("POST", "/chats/chat-999/retry")
    assert status == 404
    assert anthropic_sim.requests == []


async def test_retry_and_rewind_are_refused_while_a_turn_runs(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("a1"), Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3))
    _, first = await sc.process("q1", session_id="busy")
    chat = first["chat_id"]
    _, got, _ = await sc.call("GET", f"/chats/{chat}?rounds=100")
    a1 = next(m["sequence"] for m in got["messages"] if texts([m]) == ["a1"])
    body = {"input": [message("q2")], "stream": True, "session_id": "busy"}
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as resp:
        events = sse_events(resp)
        await anext(events)
        async with asyncio.timeout(30):
            await anthropic_sim.wait_for_requests(2)  # the second turn is at the model
        status, err, _ = await sc.call("POST", f"/chats/{chat}/retry")
        assert status == 409 and err["error"]["code"] == "session_busy"
        status, err, _ = await sc.call("POST", f"/chats/{chat}/rewind", {"after_sequence": a1})
        assert status == 409 and err["error"]["code"] == "session_busy"
        await sc.call("POST", f"/agent/turns/{resp.headers['X-Turn-Id']}/cancel")
        assert [e async for e in events][-1] == "[DONE]"
    # Nothing was cut by the refused requests.
    _, got, _ = await sc.call("GET", f"/chats/{chat}?rounds=100")
    assert not [m for m in got["messages"] if m.get("cut")]
    assert len(anthropic_sim.requests) == 2
