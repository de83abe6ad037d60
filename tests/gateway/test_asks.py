"""Questions over HTTP: an approval-gated tool in an /agent/process turn is answered
through GET /agent/asks and POST /agent/asks/{id}/answer; SSE carries ask_user."""

from __future__ import annotations

import asyncio
import json

from tests.gateway.conftest import SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply
from tests.waiting import wait_until

APPROVAL = "\n[tools.memory_add]\napproval = true\napproval_timeout = 30\n"


async def test_a_json_turn_waits_for_the_answer_given_over_http(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, extra=APPROVAL)
    anthropic_sim.enqueue(tool_reply("memory_add", {"text": "likes jazz"}), text_reply("Saved."))
    turn = asyncio.ensure_future(sc.process("remember jazz"))

    asks: list[dict[str, object]] = []

    async def asked() -> bool:
        _, data, _ = await sc.call("GET", "/agent/asks")
        asks.extend(data["asks"])
        return bool(asks)

    await wait_until(asked, what="an ask listed")
    [ask] = asks
    assert ask["kind"] == "approval" and ask["options"] == ["✅ Approve", "❌ Deny"]
    assert str(ask["question"]).endswith("Remember something\ntext=likes jazz")
    assert json.loads(str(ask["details"])) == {"text": "likes jazz"}

    status, data, _ = await sc.call("POST", f"/agent/asks/{ask['id']}/answer", {"choice": 7})
    assert status == 400 and data["error"]["code"] == "invalid_request"
    assert "0 to 1" in data["error"]["message"]
    status, data, _ = await sc.call("POST", f"/agent/asks/{ask['id']}/answer", {"choice": 0})
    assert (status, data) == (200, {"resolved": True, "option": "✅ Approve"})

    status, reply = await asyncio.wait_for(turn, 30)
    assert (status, reply["reply"]) == (200, "Saved.")
    assert [m.text for m in await sc.kernel.store.list_memories()] == ["likes jazz"]
    status, data, _ = await sc.call("POST", f"/agent/asks/{ask['id']}/answer", {"choice": 0})
    assert status == 404 and data["error"]["code"] == "not_found"  # already answered


async def test_sse_shows_the_question_and_a_denial_reaches_the_model(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, extra=APPROVAL)
    anthropic_sim.enqueue(tool_reply("memory_add", {"text": "x"}), text_reply("Skipped."))
    body = {"input": [message("remember x")], "stream": True}
    seen: list[str] = []
    async with sc.http.post(sc.url + "/agent/process", json=body) as response:
        async for event in sse_events(response):
            if event == "[DONE]":
                break
            seen.append(event["type"])
            if event["type"] == "ask_user":
                ask = event["ask"]
                assert ask["kind"] == "approval" and len(ask["options"]) == 2
                status, _, _ = await sc.call(
                    "POST", f"/agent/asks/{ask['id']}/answer", {"choice": 1}
                )
                assert status == 200
    assert seen.index("tool_call") < seen.index("ask_user") < seen.index("tool_result")
    assert seen[-1] == "completed"
    assert await sc.kernel.store.list_memories() == []
    result = anthropic_sim.requests[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True and "denied" in result["content"]
    await wait_until(lambda: not sc.kernel.agent.asks.waiting())
