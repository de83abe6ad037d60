"""Turn events' one wire form: every event type written by ``event_to_dict`` reads back
through ``event_from_dict`` as the same event, and is what the declared ``Event`` says."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from kernel.core.event_wire import EVENT_TYPES, Event, event_from_dict, event_to_dict
from kernel.core.events import (
    AskUser,
    AssistantDelta,
    Completed,
    ErrorEvent,
    ModelRetrying,
    ModelSwitched,
    PlanUpdated,
    StepStarted,
    ToolCall,
    ToolProgress,
    ToolResult,
    TurnEvent,
)

USAGE = {
    "input_tokens": 12,
    "output_tokens": 3,
    "cache_read_tokens": 0,
    "cache_write_tokens": 0,
    "calls": 1,
    "cost": 0.5,
    "unpriced_calls": 0,
}
SAMPLES: list[TurnEvent] = [
    StepStarted(1),
    AssistantDelta(1, "Hel"),
    ToolCall(1, "call_1", "memory_add", {"text": "likes jazz", "tags": ["a", None]}),
    ToolProgress(1, "call_1", "index", "3/10 indexing"),
    ToolResult(1, "call_1", "memory_add", True, "saved"),
    ToolResult(1, "call_2", "shell", False, "exit 1"),
    AskUser(2, "ask-1", "call_3", "Run it?", ["Yes", "No"], "approval", True, "rm -rf x"),
    AskUser(2, "ask-2", "", "Tea or coffee?", ["Tea", "Coffee"]),
    ModelSwitched(2, "main:model-a", "backup:model-b", "overloaded_error"),
    ModelRetrying(2, "main:model-a", 2, 4, "timeout"),
    PlanUpdated(3, [{"content": "Book", "status": "in_progress", "active_form": "Booking"}]),
    Completed(3, "Done.", usage=USAGE),
    Completed(0, "", cancelled=True),
    ErrorEvent(3, "budget_exceeded", "Over budget", {"scope": "day", "spent": 1.5}),
    ErrorEvent(1, "internal_error", "boom"),
]


def test_every_event_type_has_a_sample_and_a_declared_type() -> None:
    classes = set(get_args(TurnEvent))
    assert {type(event) for event in SAMPLES} == classes
    assert {cls.__dataclass_fields__["type"].default for cls in classes} == EVENT_TYPES


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_each_event_round_trips_through_the_one_wire_form(event: TurnEvent) -> None:
    wire = json.loads(json.dumps(event_to_dict(event)))  # as the SSE carries it
    Event.model_validate(wire)  # what the document says an event is
    back = event_from_dict(wire)
    assert back == event
    assert event_to_dict(back) == wire
    if isinstance(event, Completed):
        assert isinstance(back, Completed) and back.usage == event.usage


def test_the_wire_shape_is_seed_000s() -> None:
    call = ToolCall(1, "c", "shell", {"cmd": "ls"})
    assert event_to_dict(call) == {
        "type": "tool_call",
        "step": 1,
        "tool_call": {"id": "c", "name": "shell", "arguments": {"cmd": "ls"}},
    }
    error = ErrorEvent(2, "timeout", "too slow", {"detail": "x"})
    assert event_to_dict(error) == {
        "type": "error",
        "step": 2,
        "meta": {"code": "timeout", "message": "too slow", "detail": "x"},
    }
    assert event_to_dict(Completed(1, "hi")) == {"type": "completed", "step": 1, "reply": "hi"}


def test_an_absent_step_reads_as_zero() -> None:
    assert event_from_dict({"type": "assistant_delta", "delta": "hi"}) == AssistantDelta(0, "hi")


@pytest.mark.parametrize(
    "data",
    [
        {"type": "command", "command": {}},  # another stream's event
        {"type": "tool_call", "step": 1},  # its part missing
        {"type": "tool_result", "step": 1, "tool_result": {"id": "c", "name": "x"}},
        {"type": "assistant_delta", "step": "one", "delta": "x"},
        {"step": 1},
        [1, 2],
        "completed",
    ],
)
def test_what_is_no_turn_event_is_refused(data: Any) -> None:
    with pytest.raises(ValueError):
        event_from_dict(data)
