"""Sub-agents (issue 18): ``agents/<name>.md`` beside config.toml and the
``delegate_task(agent, task)`` tool that hands one of them a small job.

A run is a turn of its own (:class:`~kernel.agent.turn.TurnRun` with an
:class:`~kernel.agent.scope.Outlook` naming the agent): a child session (channel
``agent``, meta ``parent_session`` and ``agent``), the agent's body as the system prompt,
only its allow-listed tools (never ``delegate_task``: depth one), its model. It is awaited
inside the tool call, so the parent's /cancel cancels it (its history is closed like any
cancelled turn's) and no task outlives the call. Its events become one progress line of
the parent's tool call; its model calls count into the parent turn's usage; its final
text is the tool's result. ``[agents] max_seconds`` and ``max_tool_calls`` bound it.

The tool is offered only while a usable agent exists. The offer is asked synchronously
each time the tools are listed, so it reads the last scan (:attr:`SubAgents.names`),
never the disk: a scan runs when the agent is built, on :meth:`SubAgents.usable` (and a
call naming no usable agent), and in the background when the offer is asked and the last
scan is older than :data:`RESCAN_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kernel.agent.scope import SUBAGENT_TOOL, ChatScope, Outlook
from kernel.agent.sessions import SUBAGENT_CHANNEL, Conversation
from kernel.agent.turn import TurnRun
from kernel.agent.turn_parts import TurnParts, UserInput
from kernel.core.errors import ProfileError, ToolError
from kernel.core.events import (
    Completed,
    ErrorEvent,
    PlanUpdated,
    StepStarted,
    ToolCall,
    TurnEvent,
)
from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.core.turns import Turn
from kernel.core.untrusted import untrusted
from kernel.core.usage import Usage
from kernel.profiles import Profile, ProfileLibrary
from kernel.tools.registry import CONTEXT_ARG, ToolContext

log = logging.getLogger(__name__)

NAME = SUBAGENT_TOOL
CHANNEL = SUBAGENT_CHANNEL  # the child session's channel, and its UserInput's
RESCAN_SECONDS = 5.0  # an offer older than this starts a background rescan
MAX_TITLE = 60
OUTSIDE_TOOLS = ("web_", "mcp_")  # tools whose results are outside content
DESCRIPTION = (
    "Hand a small, self-contained job (research with web search, summarising a page, "
    "checking facts) to one of the sub-agents listed in the system prompt. It works "
    "alone with its own instructions and tools, sees nothing of this conversation, and "
    "its final answer is this tool's result: check it, then answer the owner in your "
    "words. Real work on files, code or the shell goes to delegate_to_cli instead. An "
    "error result says why it failed; do not retry the same task unchanged."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "agent": {"type": "string", "description": "the sub-agent's name, from the list"},
        "task": {
            "type": "string",
            "description": (
                "the whole instruction, self-contained (the sub-agent sees nothing of "
                "this conversation): goal, what is known, what to report back"
            ),
        },
    },
    "required": ["agent", "task"],
}


SEND = "send_message"
SEND_DESCRIPTION = (
    "Send a follow-up to a sub-agent this chat already gave a job (delegate_task or a "
    "background task): it continues that conversation, remembering its earlier work, "
    "and its next answer is this tool's result. Name the agent (its latest run from "
    "this chat) or the child session's id."
)
SEND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "what to tell or ask it, in full"},
        "agent": {"type": "string", "description": "the sub-agent's name"},
        "session_id": {"type": "integer", "description": "the child session's id"},
    },
    "required": ["message"],
}
CHILDREN_SCANNED = 200  # the newest child sessions searched for the agent named


class ChildTurn(Turn):
    """A sub-agent's turn. Nobody iterates it: each event goes to ``seen`` as it is
    emitted, and each model call counts into ``parent`` too (its /status, its final
    usage). Its id extends the parent's, so the ledger's rows name the parent turn."""

    def __init__(
        self, conversation: str, parent: Turn | None, seen: Callable[[TurnEvent], None]
    ) -> None:
        super().__init__(conversation)
        self.parent = parent
        self.seen = seen
        if parent is not None:
            self.id = f"{parent.id}.{self.id.removeprefix('turn-')[:8]}"

    def count(self, usage: Usage, cost: float | None) -> None:
        super().count(usage, cost)
        if self.parent is not None:
            self.parent.count(usage, cost)

    def deliver(self, event: TurnEvent) -> None:
        self.seen(event)


class SubAgents:
    """The sub-agents of one Agent and its ``delegate_task`` tool: a run is a turn with
    the agent's ``parts``; ``background`` runs the rescans."""

    def __init__(self, parts: TurnParts, library: ProfileLibrary, background: TaskSet) -> None:
        self.parts = parts
        self.background = background
        self.library = library
        self.names: tuple[str, ...] = ()  # usable agents at the last scan
        self._scanned = float("-inf")  # monotonic time of the last scan
        self._rescan: asyncio.Task[Any] | None = None
        self.rescan_seconds = RESCAN_SECONDS
        # At construction, like reading config.toml: the first turn already knows.
        self._remember(self.library.scan())
        parts.tools.register(NAME, DESCRIPTION, PARAMETERS, self._tool, with_context=True)
        parts.tools.offer_when(NAME, self.offered)
        parts.tools.register(
            SEND, SEND_DESCRIPTION, SEND_PARAMETERS, self._send_tool, with_context=True
        )
        parts.tools.offer_when(SEND, self.offered)

    # ----- the offer ----------------------------------------------------------------

    def offered(self) -> bool:
        """Whether a usable agent existed at the last scan; a stale scan is redone in
        the background (this runs on the event loop: no disk here)."""
        stale = time.monotonic() - self._scanned > self.rescan_seconds
        if stale and not self.rescanning and _loop_running():
            self._rescan = self.background.spawn(self.usable(), "agents-rescan")
        return bool(self.names)

    @property
    def rescanning(self) -> asyncio.Task[Any] | None:
        """The background rescan running now, if one is."""
        return self._rescan if self._rescan is not None and not self._rescan.done() else None

    async def usable(self) -> list[Profile]:
        """The usable agents now (read in a worker thread); the offer follows."""
        found = await self.library.all()
        self._remember(found)
        return [profile for profile in found if profile.usable]

    def _remember(self, found: list[Profile]) -> None:
        self.names = tuple(profile.name for profile in found if profile.usable)
        self._scanned = time.monotonic()

    # ----- the tool -----------------------------------------------------------------

    async def _tool(self, agent: str, task: str, **extra: Any) -> str:
        context = extra.get(CONTEXT_ARG)
        ctx = context if isinstance(context, ToolContext) else ToolContext()
        return await self.run(agent, task, ctx)

    async def _send_tool(
        self, message: str, agent: str = "", session_id: int = 0, **extra: Any
    ) -> str:
        context = extra.get(CONTEXT_ARG)
        ctx = context if isinstance(context, ToolContext) else ToolContext()
        if not session_id:
            session_id = await self._latest_child(agent, ctx.session_id)
        return await self.follow_up(session_id, message, ctx)

    async def _latest_child(self, agent: str, parent: int | None) -> int:
        """The newest child session of ``parent`` run by ``agent``; ToolError if none."""
        if parent is not None and agent.strip():
            rows = await self.parts.store.list_sessions(limit=CHILDREN_SCANNED, channel=CHANNEL)
            for row in rows:
                if row.meta.get("parent_session") == parent and row.meta.get("agent") == agent:
                    return row.id
        raise ToolError(t("subagent.no_child", agent=agent[:64] or "-"))

    async def run(self, name: str, task: str, ctx: ToolContext) -> str:
        """Run sub-agent ``name`` on ``task`` for the tool call ``ctx``; its final text.
        Raises ToolError (the model reads it) when it cannot run or does not finish."""
        if ctx.depth >= 1:
            raise ToolError(t("subagent.no_depth"))
        if not task.strip():
            raise ToolError(t("subagent.empty_task"))
        try:
            profile = await self.library.get(name)
        except ProfileError as exc:
            await self.usable()  # the offer follows what the refusal listed
            raise ToolError(str(exc)) from exc
        problem = self.parts.scopes.model_problem(profile)
        if problem:  # its model is not configured: refused before anything is stored
            raise ToolError(problem)
        try:
            # The chat's persona and project hold in the child too: its tools are what
            # both lists allow, its memories and folder the project's.
            chat = await self.parts.scopes.outlook(ChatScope(ctx.persona, ctx.project))
        except ProfileError as exc:
            raise ToolError(str(exc)) from exc
        meta: dict[str, object] = {"parent_session": ctx.session_id, "agent": profile.name}
        if ctx.tool_call_id:
            meta["tool_call_id"] = ctx.tool_call_id
        job = await self._job_of(ctx.session_id)
        if job:  # the child's calls count against the parent's cron job's budget
            meta["cron_job_id"] = job
        title = f"{profile.name}: {' '.join(task.split())}"[:MAX_TITLE]
        row = await self.parts.store.create_session(CHANNEL, title=title, meta=meta)
        return await self._drive(profile, chat, row.id, task, ctx)

    async def follow_up(self, session_id: int, message: str, ctx: ToolContext) -> str:
        """``send_message``: ``message`` into child session ``session_id``, which this
        chat's session started; its next answer. Limits as for :meth:`run`."""
        if ctx.depth >= 1:
            raise ToolError(t("subagent.no_depth"))
        if not message.strip():
            raise ToolError(t("subagent.empty_message"))
        row = await self.parts.store.get_session(session_id)
        parent = row.meta.get("parent_session") if row is not None else None
        if row is None or row.channel != CHANNEL or parent is None or parent != ctx.session_id:
            raise ToolError(t("subagent.not_child", id=session_id))
        name = str(row.meta.get("agent") or "")
        try:
            profile = await self.library.get(name)
            chat = await self.parts.scopes.outlook(ChatScope(ctx.persona, ctx.project))
        except ProfileError as exc:
            raise ToolError(str(exc)) from exc
        problem = self.parts.scopes.model_problem(profile)
        if problem:
            raise ToolError(problem)
        return await self._drive(profile, chat, row.id, message, ctx)

    async def _drive(
        self, profile: Profile, chat: Outlook, session_id: int, task: str, ctx: ToolContext
    ) -> str:
        """One turn of sub-agent ``profile`` in its session: its final text (marked as
        outside content when it read any), or ToolError."""
        limits = self.parts.config.agents
        outside = [False]  # whether the child read outside content (web_*, mcp_* tools)
        shown = self._progress(profile.name, ctx)

        def seen(event: TurnEvent) -> None:
            if isinstance(event, ToolCall) and event.name.startswith(OUTSIDE_TOOLS):
                outside[0] = True
            shown(event)

        turn = ChildTurn(f"{CHANNEL}:{session_id}", ctx.turn, seen)
        outlook = Outlook(
            persona=chat.persona,
            project=chat.project,
            agent=profile,
            depth=ctx.depth + 1,
            max_tool_calls=limits.max_tool_calls,
        )
        child = TurnRun(self.parts, turn, Conversation(session_id=session_id), outlook=outlook)
        given = UserInput(
            task,
            channel=CHANNEL,
            interactive=False,
            budget_ask=False,
            # A guest's sub-agent is that guest's: no memories, only the guest's tools.
            guest=ctx.guest_tools is not None,
            guest_tools=ctx.guest_tools or (),
        )
        parent = ctx.session_id
        log.info("sub-agent %s: session %d for session %s", profile.name, session_id, parent)
        try:
            async with asyncio.timeout(limits.max_seconds):
                await child.run(given)
        except TimeoutError:
            log.info("sub-agent %s: stopped after %g s", profile.name, limits.max_seconds)
            message = t("subagent.timeout", agent=profile.name, seconds=f"{limits.max_seconds:g}")
            partial = turn.final.reply if isinstance(turn.final, Completed) else ""
            if partial.strip():
                shown_text = partial.strip()
                if outside[0]:
                    shown_text = untrusted(f"sub-agent {profile.name}", shown_text)
                message += "\n" + t("subagent.partial", text=shown_text)
            raise ToolError(message) from None
        final = turn.final
        if isinstance(final, ErrorEvent):
            log.info("sub-agent %s: ended with %s", profile.name, final.code)
            # The model reads a model failure's raw detail, not the owner's words.
            detail = final.meta.get("detail") or final.message
            raise ToolError(t("subagent.failed", agent=profile.name, detail=detail))
        reply = final.reply.strip() if isinstance(final, Completed) else ""
        if not reply:
            raise ToolError(t("subagent.no_answer", agent=profile.name))
        if outside[0]:
            # Drawn from pages or outside servers: it may repeat what they planted.
            return untrusted(f"sub-agent {profile.name}", reply)
        return reply

    async def _job_of(self, session_id: int | None) -> str:
        if session_id is None:
            return ""
        row = await self.parts.store.get_session(session_id)
        job = row.meta.get("cron_job_id") if row is not None else None
        return job if isinstance(job, str) else ""

    @staticmethod
    def _progress(agent: str, ctx: ToolContext) -> Callable[[TurnEvent], None]:
        """The child's steps and tool calls as the parent call's one progress line."""

        def seen(event: TurnEvent) -> None:
            if ctx.progress is None:
                return
            if isinstance(event, ToolCall):
                ctx.progress(t("subagent.progress_tool", agent=agent, tool=event.name))
            elif isinstance(event, StepStarted):
                ctx.progress(t("subagent.progress_step", agent=agent, step=event.step))
            elif isinstance(event, PlanUpdated) and event.items:
                ctx.progress(_plan_line(agent, event.items))

        return seen


def _plan_line(agent: str, items: list[dict[str, str]]) -> str:
    """A sub-agent's plan (its own session's) as the parent call's progress line: the
    counts and the item in progress."""
    done = sum(item.get("status") == "completed" for item in items)
    running = next((i.get("content", "") for i in items if i.get("status") == "in_progress"), "")
    current = f"▶ {running[:60]}" if running else ""
    line = t("subagent.progress_plan", agent=agent, done=done, total=len(items), current=current)
    return line.strip()


def _loop_running() -> bool:
    """False where the tools are listed outside the event loop (start-up, a check)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
