"""The plan (todo_write) over ``/agent/process``: ``plan`` events in the SSE stream, in
order, and the final plan in the JSON answer, as the document says (both providers)."""

from __future__ import annotations

from typing import Any

from kernel.gateway.routes.agent import Event, ProcessResult
from tests.gateway.conftest import SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply, tool_reply

FIRST = [
    {"content": "Look up the train times", "status": "in_progress", "active_form": "Looking"},
    {"content": "Book the seats", "status": "pending"},
]
SECOND = [
    {"content": "Look up the train times", "status": "completed", "active_form": "Looking"},
    {"content": "Book the seats", "status": "in_progress"},
]


def script(sim: AnthropicSim | OpenAISim) -> None:
    sim.enqueue(
        tool_reply("todo_write", {"items": FIRST}),
        tool_reply("todo_write", {"items": SECOND}),
        text_reply("Booked."),
    )


async def test_the_stream_carries_each_plan_in_order(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim
) -> None:
    sc = await sidecar(sim)
    script(sim)
    body = {"input": [message("book a train")], "stream": True}
    events: list[Any] = []
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as resp:
        assert resp.status == 200
        async for data in sse_events(resp):
            if data == "[DONE]":
                break
            events.append(data)
    plans = [e for e in events if e["type"] == "plan"]
    assert [e["plan"]["items"] for e in plans] == [FIRST, SECOND]
    assert [e["step"] for e in plans] == [1, 2]
    kinds = [e["type"] for e in events]
    # Each plan comes while its call runs: after the call, before its result.
    for index in (i for i, kind in enumerate(kinds) if kind == "plan"):
        assert kinds[index - 1] == "tool_call" and kinds[index + 1] == "tool_result"
    assert events[-1] == {**events[-1], "type": "completed", "reply": "Booked."}
    for event in events:
        Event.model_validate(event)  # each is what the document says an event is


async def test_the_json_answer_holds_the_final_plan(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim
) -> None:
    sc = await sidecar(sim)
    script(sim)
    status, data = await sc.process("book a train", session_id="trip")
    assert status == 200 and data["reply"] == "Booked."
    assert data["plan"] == {"items": SECOND}
    ProcessResult.model_validate(data)
    # The tool's reply (what the model read) followed the session's plan.
    results = [e["tool_result"] for e in data["events"] if e["type"] == "tool_result"]
    assert [r["summary"][:12] for r in results] == ["plan set: 0/", "plan updated"]

    sim.enqueue(text_reply("No plan needed."))
    status, data = await sc.process("thanks", session_id="trip")
    assert status == 200 and data["plan"] is None  # this turn wrote none


async def test_the_document_names_the_plan(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    _, doc, _ = await sc.call("GET", "/openapi.json")
    schemas = doc["components"]["schemas"]
    ok = doc["paths"]["/agent/process"]["post"]["responses"]["200"]["content"]
    answer = ok["application/json"]["schema"]["properties"]["plan"]
    assert answer["nullable"] is True and answer["allOf"] == [
        {"$ref": "#/components/schemas/TurnPlan"}
    ]
    assert "plan" in schemas["Event"]["properties"]["type"]["enum"]
    item = schemas["TurnPlanItem"]["properties"]
    assert item["status"]["enum"] == ["pending", "in_progress", "completed"]


async def test_a_direct_call_shows_its_plan_too(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    tool = {"name": "todo_write", "input": {"items": FIRST}}
    body = {"biz_params": {"tool": tool}, "session_id": "direct"}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 200 and data["plan"] == {"items": FIRST}
    assert [e["type"] for e in data["events"]] == ["tool_call", "plan", "tool_result", "completed"]
    assert data["reply"].startswith("plan set: 0/2 done")
    assert anthropic_sim.requests == []  # no model call
