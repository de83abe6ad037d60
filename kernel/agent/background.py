"""Background tasks (issue 38; seed 001 ``TaskCreate`` / ``TaskList`` / ``TaskStop`` /
``TaskUpdate``): a sub-agent's job (``delegate_task``) or a coding CLI's delegation
(``delegate_to_cli``) run as its own asyncio task beside the chat, which stays free.

A task is that tool call made outside any turn, through the same :class:`ToolRegistry`
(so the tool's approval and the model budget apply as in a turn; its questions reach the
owner through the channels' asker, as a cron job's do), with the chat's persona, project
and memory scopes. It is stored (``agent_tasks``, :class:`TaskStore`) with its status,
its last progress line and its result. When it ends its result goes to the owner once,
through the :class:`Teller` a channel attaches (Telegram: the durable outbox, the row
marked told in the same transaction). At start, tasks a stopped process left running are
marked ``interrupted``, and the owner is offered, once, to run them again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kernel.core.asks import Answer, AskOutcome, AskRegistry, Question
from kernel.core.delivery import ChannelRegistry, ask_owner
from kernel.core.errors import TaskError
from kernel.core.i18n import t
from kernel.core.oneline import one_line
from kernel.core.tasks import TaskSet
from kernel.store.db import Store
from kernel.store.tasks import TaskRow, TaskStore
from kernel.tools.registry import ToolContext, ToolRegistry

log = logging.getLogger(__name__)

MAX_RUNNING = 4  # tasks running at once; one more is refused until one ends
MAX_TITLE = 60
TOOLS = {"agent": "delegate_task", "cli": "delegate_to_cli"}  # a task's kind → its tool
CONVERSATION = "task:"  # a task's tool calls run in conversation "task:<id>"


class Teller(Protocol):
    """Tells the owner (a channel attaches one): each must mark what it told with the
    store's :func:`~kernel.store.tasks.claim`, in the same transaction."""

    async def report(self, row: TaskRow) -> None:
        """A task's result, once."""
        ...

    async def offer(self, rows: list[TaskRow]) -> None:
        """Tasks a restart cut, with one way to run them all again, once."""
        ...


@dataclass(frozen=True, slots=True)
class NewTask:
    """What a task runs: ``kind`` agent (``agent``: the sub-agent's name) or cli
    (``cli``: which one, "" the default; ``cwd``: where)."""

    kind: str
    task: str
    agent: str = ""
    cli: str = ""
    cwd: str = ""
    title: str = ""

    def arguments(self) -> dict[str, Any]:
        if self.kind == "agent":
            return {"agent": self.agent, "task": self.task}
        args: dict[str, Any] = {"task": self.task}
        if self.cli:
            args["cli"] = self.cli
        if self.cwd:
            args["cwd"] = self.cwd
        return args

    def heading(self) -> str:
        words = one_line(self.title or self.task, MAX_TITLE)
        label = self.agent if self.kind == "agent" else one_line(self.cli or "cli", 20)
        return f"{label}: {words}"[:MAX_TITLE]


class BackgroundTasks:
    """The tasks of one Agent: started by its tools, the sidecar or a button; each runs
    in this part's :class:`TaskSet`, closed when the agent stops."""

    def __init__(self, store: Store, tools: ToolRegistry, asks: AskRegistry) -> None:
        self.rows = TaskStore(store)
        self.tools = tools
        self.asks = asks
        self.channels: ChannelRegistry | None = None  # set by the composition root
        self.teller: Teller | None = None
        # The usable sub-agents' names at the last scan (set by the Agent): a task for
        # one that is not there is refused at once, not failed later.
        self.agents: Callable[[], tuple[str, ...]] = tuple
        self._tasks = TaskSet("background-tasks")
        self._running: dict[int, asyncio.Task[None]] = {}  # bounded by MAX_RUNNING
        self._stopping: set[int] = set()  # ids the owner stopped (vs. a shutdown)
        self._progress: dict[int, str] = {}  # the line to write, while one is written
        self._telling = asyncio.Lock()

    # ----- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Tasks a stopped process left running are interrupted (offered again once a
        teller is attached)."""
        count = await self.rows.interrupt_running()
        if count:
            log.info("background tasks: %d interrupted by a restart", count)

    async def stop(self, seconds: float | None = None) -> None:
        """Shutdown: running tasks are cancelled and recorded as interrupted."""
        await self._tasks.close(seconds)

    def attach(self, teller: Teller) -> None:
        """A channel can tell the owner now: what waited to be told is told."""
        self.teller = teller
        self._tasks.spawn(self._flush(), "tasks-flush")

    def detach(self, teller: Teller) -> None:
        if self.teller is teller:
            self.teller = None

    def running(self, task_id: int) -> bool:
        return task_id in self._running

    # ----- the owner's and the model's verbs --------------------------------------------

    async def create(self, new: NewTask, context: ToolContext) -> TaskRow:
        """Store a task and start it beside the chat; TaskError when it cannot run."""
        if context.depth >= 1:
            raise TaskError("task_refused", t("task.no_depth"))
        if context.guest_tools is not None:
            raise TaskError("task_refused", t("task.guest"))
        if not new.task.strip():
            raise TaskError("invalid_request", t("task.empty"))
        tool = TOOLS.get(new.kind)
        if tool is None:
            raise TaskError("invalid_request", t("task.bad_kind", kind=new.kind[:20]))
        if tool not in self.tools:
            raise TaskError("task_refused", t(f"task.no_{new.kind}"))
        if new.kind == "agent" and new.agent not in self.agents():
            if not new.agent.strip():
                raise TaskError("invalid_request", t("task.no_agent_named"))
            names = ", ".join(self.agents()) or "-"
            raise TaskError(
                "task_refused", t("task.unknown_agent", name=new.agent[:64], names=names)
            )
        self._check_room()
        spec = {"tool": tool, "arguments": new.arguments(), "context": _context_spec(context)}
        row = await self.rows.create(
            new.kind, context.session_id, context.conversation, new.heading(), spec
        )
        await self._launch(row)
        log.info("background task %d started (%s)", row.id, new.kind)
        return await self._get(row.id)

    async def listed(self, session_id: int | None = None, limit: int = 100) -> list[TaskRow]:
        return await self.rows.listed(session_id, limit)

    async def stop_task(self, task_id: int) -> TaskRow:
        """The owner (or the model) stops a running task: recorded as ``stopped``."""
        row = await self._get(task_id)
        running = self._running.get(task_id)
        if running is None:
            raise TaskError(
                "task_not_running",
                t("task.not_running", id=task_id, status=t(f"task.status_{row.status}")),
            )
        self._stopping.add(task_id)
        running.cancel()
        await asyncio.wait({running})
        return await self._get(task_id)

    async def note(self, task_id: int, progress: str) -> TaskRow:
        """``task_update``: the model notes a running task's progress."""
        row = await self._get(task_id)
        if task_id not in self._running:
            raise TaskError(
                "task_not_running",
                t("task.not_running", id=task_id, status=t(f"task.status_{row.status}")),
            )
        await self.rows.progressed(task_id, one_line(progress, 300))
        return await self._get(task_id)

    async def rerun(self, ids: list[int]) -> list[TaskRow]:
        """Run interrupted, failed or stopped tasks again, as they were created."""
        started: list[TaskRow] = []
        for task_id in ids:
            row = await self._get(task_id)
            if task_id in self._running or row.status not in ("interrupted", "failed", "stopped"):
                continue
            self._check_room()
            await self._launch(row)
            started.append(await self._get(task_id))
        return started

    async def _get(self, task_id: int) -> TaskRow:
        row = await self.rows.get(task_id)
        if row is None:
            raise TaskError("task_not_found", t("task.not_found", id=task_id))
        return row

    def _check_room(self) -> None:
        if len(self._running) >= MAX_RUNNING:
            raise TaskError("task_refused", t("task.too_many", limit=MAX_RUNNING))

    # ----- running ----------------------------------------------------------------------

    async def _launch(self, row: TaskRow) -> None:
        await self.rows.started(row.id)
        task = self._tasks.spawn(self._run(row), f"task-{row.id}")
        self._running[row.id] = task

    async def _run(self, row: TaskRow) -> None:
        spec = row.spec
        context = self._context(row)
        status = "failed"
        result = ""
        try:
            outcome = await self.tools.call(
                str(spec.get("tool", "")), dict(spec.get("arguments") or {}), context
            )
            status, result = ("done" if outcome.ok else "failed"), outcome.content
        except asyncio.CancelledError:
            stopped = row.id in self._stopping
            status = "stopped" if stopped else "interrupted"
            await asyncio.shield(self._end(row.id, status, ""))
            if not stopped:
                raise
            return
        except Exception as exc:  # the registry turns failures into outcomes; kept safe
            log.warning("background task %d failed: %s", row.id, type(exc).__name__)
            result = t("task.crashed", kind=type(exc).__name__)
        await self._end(row.id, status, result)
        ended = await self._get(row.id)
        log.info("background task %d ended: %s", row.id, status)
        await self._tell(ended)

    async def _end(self, task_id: int, status: Any, result: str) -> None:
        try:
            await self.rows.ended(task_id, status, result)
        finally:
            self._running.pop(task_id, None)
            self._stopping.discard(task_id)
            self._progress.pop(task_id, None)

    def _context(self, row: TaskRow) -> ToolContext:
        saved = row.spec.get("context") or {}
        scopes = saved.get("memory_scopes") or ["global"]
        return ToolContext(
            session_id=row.session_id,
            conversation=f"{CONVERSATION}{row.id}",
            progress=lambda line: self._progressed(row.id, line),
            tool_call_id=f"task-{row.id}",
            ask=self._asker(row),
            persona=str(saved.get("persona") or ""),
            project=str(saved.get("project") or ""),
            folder=str(saved.get("folder") or ""),
            memory_scopes=tuple(str(s) for s in scopes),
            memory_scope=str(saved.get("memory_scope") or "global"),
        )

    def _asker(self, row: TaskRow) -> Callable[..., Awaitable[Answer]]:
        """Questions (an approval, a CLI's permission) go to the owner through the
        channels' asker, headed by the task: nobody watches a task's turn."""

        async def ask(text: str, options: list[str], **how: Any) -> Answer:
            if self.channels is None:
                return Answer(AskOutcome.UNDELIVERED)
            question = Question(
                f"{CONVERSATION}{row.id}",
                text,
                list(options),
                kind=str(how.get("kind", "question")),
                markdown=bool(how.get("markdown", False)),
                details=str(how.get("details", "")),
            )
            seconds = float(how.get("seconds", 600.0))
            label = t("task.ask_label", id=row.id, title=row.title)
            return await ask_owner(self.asks, self.channels, question, seconds, label)

        return ask

    def _progressed(self, task_id: int, line: str) -> None:
        """A progress line: the newest is written, one write at a time."""
        writing = task_id in self._progress
        self._progress[task_id] = line
        if not writing and task_id in self._running:
            self._tasks.spawn(self._write_progress(task_id), f"task-{task_id}-progress")

    async def _write_progress(self, task_id: int) -> None:
        while (line := self._progress.get(task_id)) is not None:
            await self.rows.progressed(task_id, line)
            if self._progress.get(task_id) == line:
                self._progress.pop(task_id, None)

    # ----- telling the owner ------------------------------------------------------------

    async def _tell(self, row: TaskRow) -> None:
        teller = self.teller
        if teller is None:  # told when a channel attaches
            return
        async with self._telling:
            fresh = await self._get(row.id)
            if fresh.reported_at is None:
                await teller.report(fresh)

    async def _flush(self) -> None:
        teller = self.teller
        if teller is None:
            return
        async with self._telling:
            for row in await self.rows.untold():
                await teller.report(row)
            cut = [row for row in await self.rows.unoffered() if row.id not in self._running]
            if cut:
                await teller.offer(cut)


def _context_spec(context: ToolContext) -> dict[str, Any]:
    """What a task keeps of the chat's context, to run (again) as it would have there."""
    return {
        "persona": context.persona,
        "project": context.project,
        "folder": context.folder,
        "memory_scopes": list(context.memory_scopes),
        "memory_scope": context.memory_scope,
    }
