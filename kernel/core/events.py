"""Turn events: the one stream every channel receives (SPEC §4).

Their one JSON form (seed 000's ``/agent/process`` events) is declared, written and read
in :mod:`kernel.core.event_wire`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kernel.core.failures import display_name
from kernel.core.i18n import t, t_or


@dataclass(slots=True)
class StepStarted:
    step: int
    type: Literal["step_started"] = "step_started"


@dataclass(slots=True)
class AssistantDelta:
    step: int
    delta: str
    type: Literal["assistant_delta"] = "assistant_delta"


@dataclass(slots=True)
class ToolCall:
    step: int
    id: str
    name: str
    arguments: dict[str, Any]
    type: Literal["tool_call"] = "tool_call"


@dataclass(slots=True)
class ToolResult:
    step: int
    id: str
    name: str
    ok: bool
    summary: str
    type: Literal["tool_result"] = "tool_result"


@dataclass(slots=True)
class ToolProgress:
    """A running tool reported progress (an MCP progress notification, say)."""

    step: int
    id: str  # the tool call's id
    name: str
    text: str  # "3/10 indexing"
    type: Literal["tool_progress"] = "tool_progress"


@dataclass(slots=True)
class AskUser:
    """The turn waits for the owner to pick one of ``options`` (SPEC §9)."""

    step: int
    id: str
    tool_call_id: str
    question: str
    options: list[str]
    kind: str = "question"  # "approval" when it gates a tool call; "permission": a CLI's
    markdown: bool = False  # the question is Markdown (channels that can, render it)
    details: str = ""  # the full matter one tap away (an approval's arguments), plain text
    type: Literal["ask_user"] = "ask_user"


@dataclass(slots=True)
class ModelSwitched:
    """The model answering failed after its retries with a cause another model may
    answer through (issue 17): ``to_model`` answers from now on. Channels show the one
    line :meth:`describe` words; nothing the failed model wrote had been shown."""

    step: int
    from_model: str  # "provider:model"
    to_model: str
    reason: str  # the failover cause: a provider error code ("overloaded_error", "timeout", …)
    type: Literal["model_switch"] = "model_switch"

    def describe(self) -> str:
        why = t_or(f"routing.cause.{self.reason}", self.reason)
        return t("routing.switched", old=self.from_model, new=self.to_model, why=why)


@dataclass(slots=True)
class ModelRetrying:
    """The model's call failed with a cause worth retrying and Kernel waits to try it
    again (issue 34): ``attempt`` of ``of`` retries. Channels show :meth:`describe` in
    the turn's progress ("Claude 过载，正在重试 (2/4)…"); nothing of it stays."""

    step: int
    model: str  # "provider:model"
    attempt: int
    of: int
    reason: str  # the provider error code ("overloaded_error", "timeout", …)
    type: Literal["model_retry"] = "model_retry"

    def describe(self) -> str:
        provider, _, model = self.model.partition(":")
        why = t_or(f"routing.cause.{self.reason}", t("routing.cause.transient"))
        name = display_name(provider, model)
        return t("routing.retrying", name=name, why=why, attempt=self.attempt, of=self.of)


@dataclass(slots=True)
class PlanUpdated:
    """The turn's plan (the todo_write tool, seed 001's TodoWrite) as it now stands:
    each item ``{"content": str, "status": "pending" | "in_progress" | "completed"}``.
    Channels show the whole list and replace it in place at each update."""

    step: int
    items: list[dict[str, str]]
    type: Literal["plan"] = "plan"


@dataclass(slots=True)
class Completed:
    step: int
    reply: str
    cancelled: bool = False
    # The turn's model calls: tokens (fresh, output, cache read/write), cost, calls.
    # Not compared: two endings with the same reply are the same ending.
    usage: dict[str, Any] = field(default_factory=dict, compare=False)
    type: Literal["completed"] = "completed"


@dataclass(slots=True)
class ErrorEvent:
    step: int
    code: str
    message: str
    meta: dict[str, Any] = field(default_factory=dict)
    type: Literal["error"] = "error"


TurnEvent = (
    StepStarted
    | AssistantDelta
    | ToolCall
    | ToolProgress
    | ToolResult
    | AskUser
    | ModelSwitched
    | ModelRetrying
    | PlanUpdated
    | Completed
    | ErrorEvent
)
