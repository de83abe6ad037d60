"""The model's tools for background tasks (issue 38; seed 001 ``TaskCreate``,
``TaskList``, ``TaskStop``, ``TaskUpdate``): ``task_create``, ``task_list``,
``task_stop``, ``task_update``, over :class:`~kernel.agent.background.BackgroundTasks`.

``task_list``, ``task_stop`` and ``task_update`` see the calling chat's session's tasks
only. A refusal is a ToolError the model reads (the catalogue's words).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel.agent.background import BackgroundTasks, NewTask
from kernel.core.errors import TaskError, ToolError
from kernel.core.i18n import t
from kernel.core.session_modes import ACTS, READS, Effect
from kernel.store.tasks import TaskRow
from kernel.tools.registry import CONTEXT_ARG, ToolContext, ToolRegistry

# What each does (kernel/core/session_modes.py): starting and stopping work acts, so
# plan mode and read_only hold it back; listing, and the task's own progress line, read.
EFFECTS: dict[str, Effect] = {
    "task_create": ACTS,
    "task_list": READS,
    "task_stop": ACTS,
    "task_update": READS,
}

CREATE = (
    "Start work in the background: a sub-agent's job (kind agent, with its name) or a "
    "coding CLI's (kind cli). It runs beside this chat, which stays free; its result "
    "reaches the owner's chat by itself when it ends. Returns the task's id at once."
)
# When to use it: Kernel's wording, left out where SOUL.md has a task_create section.
CREATE_RULES = (
    "Use it when the owner asks for it ('in the background', 'tell me when done', a long "
    "job they need not wait for); tell the owner it started, do not wait for it."
)
LIST = "The background tasks of this chat: id, status, progress, result (newest first)."
STOP = "Stop a running background task of this chat (the owner asked to)."
UPDATE = "Note the progress of a running background task of this chat, in one line."
CREATE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["agent", "cli"]},
        "task": {
            "type": "string",
            "description": "the whole instruction, self-contained: goal, what is known, "
            "what to report back",
        },
        "agent": {"type": "string", "description": "kind agent: the sub-agent's name"},
        "cli": {"type": "string", "description": "kind cli: which CLI, if the owner named one"},
        "cwd": {"type": "string", "description": "kind cli: the working directory, if named"},
        "title": {"type": "string", "description": "a short title the owner knows it by"},
    },
    "required": ["kind", "task"],
}
ID = {"task_id": {"type": "integer", "description": "the task's id"}}
STOP_PARAMETERS: dict[str, Any] = {"type": "object", "properties": ID, "required": ["task_id"]}
UPDATE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {**ID, "progress": {"type": "string"}},
    "required": ["task_id", "progress"],
}
LIST_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def register(registry: ToolRegistry, tasks: BackgroundTasks, offered: Callable[[], bool]) -> None:
    """The four tools, offered while ``offered()`` (something can run as a task)."""

    def context_of(extra: dict[str, Any]) -> ToolContext:
        context = extra.get(CONTEXT_ARG)
        return context if isinstance(context, ToolContext) else ToolContext()

    async def own(task_id: int, context: ToolContext) -> None:
        """Refused unless the task is this chat's session's."""
        row = await tasks.rows.get(task_id)
        if row is None or row.session_id is None or row.session_id != context.session_id:
            raise ToolError(t("task.not_found", id=task_id))

    async def task_create(
        kind: str,
        task: str,
        agent: str = "",
        cli: str = "",
        cwd: str = "",
        title: str = "",
        **extra: Any,
    ) -> str:
        new = NewTask(kind, task, agent=agent, cli=cli, cwd=cwd, title=title)
        try:
            row = await tasks.create(new, context_of(extra))
        except TaskError as exc:
            raise ToolError(str(exc)) from None
        return t("task.started_tool", id=row.id, title=row.title)

    async def task_list(**extra: Any) -> str:
        context = context_of(extra)
        if context.session_id is None:
            return t("task.none")
        rows = await tasks.listed(context.session_id, 20)
        return "\n".join(_line(row) for row in rows) if rows else t("task.none")

    async def task_stop(task_id: int, **extra: Any) -> str:
        await own(task_id, context_of(extra))
        try:
            row = await tasks.stop_task(task_id)
        except TaskError as exc:
            raise ToolError(str(exc)) from None
        return t("task.stopped", id=row.id, title=row.title)

    async def task_update(task_id: int, progress: str, **extra: Any) -> str:
        await own(task_id, context_of(extra))
        try:
            row = await tasks.note(task_id, progress)
        except TaskError as exc:
            raise ToolError(str(exc)) from None
        return _line(row)

    for name, description, parameters, handler in (
        ("task_create", CREATE, CREATE_PARAMETERS, task_create),
        ("task_list", LIST, LIST_PARAMETERS, task_list),
        ("task_stop", STOP, STOP_PARAMETERS, task_stop),
        ("task_update", UPDATE, UPDATE_PARAMETERS, task_update),
    ):
        registry.register(
            name,
            description,
            parameters,
            handler,
            with_context=True,
            offered=offered,
            effect=EFFECTS[name],
        )
    registry.add_rules("task_create", CREATE_RULES)


def _line(row: TaskRow) -> str:
    """One task as the model reads it."""
    parts = [f"#{row.id} [{row.status}] {row.title}"]
    if row.progress:
        parts.append(f"progress: {row.progress}")
    if row.result:
        parts.append(f"result: {row.result[:2000]}")
    return " | ".join(parts)
