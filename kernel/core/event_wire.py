"""Turn events on the wire: the one JSON form of :data:`~kernel.core.events.TurnEvent`.

seed 000's ``/agent/process`` shape: ``{"type", "step", …}`` with a tool call, result or
progress nested under its own key, a question under ``ask``, an error's code and words
in ``meta``. :class:`Event` declares it (the sidecar's OpenAPI document shows it, and
parsing goes through it); :func:`event_to_dict` writes it (the sidecar's JSON and SSE,
the in-process TUI); :func:`event_from_dict` reads it back (the TUI over HTTP).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field

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

EventType = Literal[
    "step_started",
    "assistant_delta",
    "tool_call",
    "tool_progress",
    "tool_result",
    "completed",
    "error",
    "ask_user",
    "model_switch",
    "model_retry",
    "plan",
]
EVENT_TYPES: frozenset[str] = frozenset(get_args(EventType))

_T = TypeVar("_T")


class _Part(BaseModel):
    """A JSON object of the wire; fields beyond those named may appear."""

    model_config = ConfigDict(extra="allow")


class Ask(_Part):
    id: str
    tool_call_id: str | None = None
    kind: Literal["question", "approval", "budget", "permission"] | None = None
    question: str
    options: list[str]
    format: Literal["text", "markdown"] = "text"
    details: str | None = None  # the full matter (an approval's arguments), when there is one


class EventToolCall(_Part):
    id: str
    name: str
    arguments: dict[str, Any]


class EventToolResult(_Part):
    id: str
    name: str
    ok: bool
    summary: str


class EventToolProgress(_Part):
    id: str
    name: str
    text: str


class EventSwitch(_Part):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    from_: str = Field(alias="from", description="provider:model")
    to: str = Field(description="provider:model")
    reason: str


class EventRetry(_Part):
    model: str = Field(description="provider:model")
    attempt: int
    of: int
    reason: str


class EventError(_Part):
    """An error's code and words, and its details (a budget refusal's scope, …)."""

    code: str
    message: str


class TurnPlanItem(_Part):
    content: str
    status: Literal["pending", "in_progress", "completed"]
    active_form: str | None = Field(default=None, description="the item while it runs")


class TurnPlan(_Part):
    """The todo_write tool's plan as it stands: the whole list, in order."""

    items: list[TurnPlanItem]


class TurnUsage(_Part):
    """What a turn's model calls used: tokens as the provider counted them (``input``
    is the fresh input; cache reads and writes apart), the known cost in
    ``budget.currency``, and how many calls had no known price."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    calls: int
    cost: float
    unpriced_calls: int


class Event(_Part):
    """One turn event (as JSON, and as each SSE event's data). ``completed`` carries
    ``usage`` when the turn called a model."""

    type: EventType
    step: int | None = None
    delta: str | None = None
    reply: str | None = None
    cancelled: bool | None = Field(default=None, description="completed: the turn was cancelled")
    tool_call: EventToolCall | None = None
    tool_progress: EventToolProgress | None = None
    tool_result: EventToolResult | None = None
    ask: Ask | None = None
    meta: EventError | None = None
    usage: TurnUsage | None = None
    switch: EventSwitch | None = Field(
        default=None, description="model_switch: from, to (provider:model) and the reason"
    )
    retry: EventRetry | None = Field(
        default=None, description="model_retry: model (provider:model), attempt, of, reason"
    )
    plan: TurnPlan | None = Field(
        default=None, description="plan: the whole plan as it now stands (replaces the last)"
    )


def event_to_dict(event: TurnEvent) -> dict[str, Any]:
    """``event`` in the wire shape :class:`Event` declares (only the fields it has)."""
    head: dict[str, Any] = {"type": event.type, "step": event.step}
    if isinstance(event, StepStarted):
        return head
    if isinstance(event, AssistantDelta):
        return {**head, "delta": event.delta}
    if isinstance(event, ToolCall):
        call = {"id": event.id, "name": event.name, "arguments": event.arguments}
        return {**head, "tool_call": call}
    if isinstance(event, ToolResult):
        result = {"id": event.id, "name": event.name, "ok": event.ok, "summary": event.summary}
        return {**head, "tool_result": result}
    if isinstance(event, ToolProgress):
        return {**head, "tool_progress": {"id": event.id, "name": event.name, "text": event.text}}
    if isinstance(event, AskUser):
        return {**head, "ask": _ask_of(event)}
    if isinstance(event, ModelSwitched):
        switch = {"from": event.from_model, "to": event.to_model, "reason": event.reason}
        return {**head, "switch": switch}
    if isinstance(event, ModelRetrying):
        retry = {"model": event.model, "attempt": event.attempt, "of": event.of}
        return {**head, "retry": {**retry, "reason": event.reason}}
    if isinstance(event, PlanUpdated):
        return {**head, "plan": {"items": [dict(item) for item in event.items]}}
    if isinstance(event, Completed):
        out = {**head, "reply": event.reply}
        if event.cancelled:
            out["cancelled"] = True
        if event.usage:
            out["usage"] = dict(event.usage)
        return out
    return {**head, "meta": {"code": event.code, "message": event.message, **event.meta}}


def _ask_of(event: AskUser) -> dict[str, Any]:
    return {
        "id": event.id,
        "tool_call_id": event.tool_call_id,
        "kind": event.kind,
        "question": event.question,
        "options": list(event.options),
        "format": "markdown" if event.markdown else "text",
        **({"details": event.details} if event.details else {}),
    }


def event_from_dict(data: object) -> TurnEvent:
    """The turn event ``data`` (decoded JSON) is; :class:`ValueError` when it is none
    (an unknown ``type``, a field missing or of the wrong type). An absent ``step`` is 0."""
    wire = Event.model_validate(data)
    step = wire.step or 0
    match wire.type:
        case "step_started":
            return StepStarted(step)
        case "assistant_delta":
            return AssistantDelta(step, _required(wire.delta, "delta"))
        case "tool_call":
            call = _required(wire.tool_call, "tool_call")
            return ToolCall(step, call.id, call.name, call.arguments)
        case "tool_result":
            result = _required(wire.tool_result, "tool_result")
            return ToolResult(step, result.id, result.name, result.ok, result.summary)
        case "tool_progress":
            progress = _required(wire.tool_progress, "tool_progress")
            return ToolProgress(step, progress.id, progress.name, progress.text)
        case "ask_user":
            return _ask_user(step, _required(wire.ask, "ask"))
        case "model_switch":
            switch = _required(wire.switch, "switch")
            return ModelSwitched(step, switch.from_, switch.to, switch.reason)
        case "model_retry":
            retry = _required(wire.retry, "retry")
            return ModelRetrying(step, retry.model, retry.attempt, retry.of, retry.reason)
        case "plan":
            plan = _required(wire.plan, "plan")
            return PlanUpdated(step, [item.model_dump(exclude_unset=True) for item in plan.items])
        case "completed":
            usage = wire.usage.model_dump(exclude_unset=True) if wire.usage else {}
            return Completed(step, wire.reply or "", bool(wire.cancelled), usage)
        case _:  # "error"
            meta = _required(wire.meta, "meta").model_dump(exclude_unset=True)
            code, message = meta.pop("code"), meta.pop("message")
            return ErrorEvent(step, code, message, meta)


def _ask_user(step: int, ask: Ask) -> AskUser:
    kind, markdown = ask.kind or "question", ask.format == "markdown"
    return AskUser(
        step,
        ask.id,
        ask.tool_call_id or "",
        ask.question,
        ask.options,
        kind,
        markdown,
        ask.details or "",
    )


def _required(value: _T | None, name: str) -> _T:
    if value is None:
        raise ValueError(f"the event has no {name}")
    return value
