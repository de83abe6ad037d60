"""``/agent/process``'s SSE reads back, frame by frame, through the one parser of turn
events (``event_from_dict``, what the TUI reads it with) as the events the turn emitted."""

from __future__ import annotations

from typing import Any

from kernel.core.event_wire import event_from_dict, event_to_dict
from kernel.core.events import (
    AssistantDelta,
    Completed,
    PlanUpdated,
    StepStarted,
    ToolCall,
    ToolResult,
    TurnEvent,
)
from tests.gateway.conftest import Sidecar, SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply, tool_reply

PLAN = [{"content": "Look up the train times", "status": "in_progress"}]


async def _stream(sc: Sidecar, text: str, session: str) -> list[Any]:
    body = {"input": [message(text)], "stream": True, "session_id": session}
    frames: list[Any] = []
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as resp:
        assert resp.status == 200
        async for data in sse_events(resp):
            frames.append(data)
    assert frames.pop() == "[DONE]"
    return frames


async def test_the_stream_parses_back_to_the_turns_events(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim
) -> None:
    sc = await sidecar(sim)
    sim.enqueue(tool_reply("todo_write", {"items": PLAN}), text_reply("Booked."))
    frames = await _stream(sc, "book a train", "wire")
    events: list[TurnEvent] = [event_from_dict(frame) for frame in frames]
    assert [event_to_dict(event) for event in events] == frames  # nothing lost or added

    [call] = [e for e in events if isinstance(e, ToolCall)]
    [result] = [e for e in events if isinstance(e, ToolResult)]
    deltas = [e for e in events if isinstance(e, AssistantDelta)]
    done = events[-1]
    assert isinstance(done, Completed)
    assert events[:4] == [
        StepStarted(1),
        ToolCall(1, call.id, "todo_write", {"items": PLAN}),
        PlanUpdated(1, PLAN),
        ToolResult(1, call.id, "todo_write", True, result.summary),
    ]
    assert result.summary.startswith("plan set: 0/1")
    assert events[4] == StepStarted(2)
    assert deltas and all(d.step == 2 for d in deltas)
    assert "".join(d.delta for d in deltas) == "Booked."
    assert done == Completed(2, "Booked.")
    assert done.usage["calls"] == 2 and done.usage["output_tokens"] > 0

    # The JSON form of the same turn carries the same events.
    sim.enqueue(tool_reply("todo_write", {"items": PLAN}), text_reply("Booked."))
    status, data = await sc.process("book a train", session_id="wire-json")
    assert status == 200
    again = [event_from_dict(e) for e in data["events"]]
    assert [type(e) for e in again if not isinstance(e, AssistantDelta)] == [
        type(e) for e in events if not isinstance(e, AssistantDelta)
    ]
    assert again[-1] == done
