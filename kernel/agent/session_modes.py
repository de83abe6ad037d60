"""Sessions' modes (issue 38): ``act``, ``plan`` or ``read_only``
(kernel/core/session_modes.py), who switches them, and the model's control tools.

A session keeps its mode in its row (``sessions.mode``). A channel's conversation
(``telegram:<chat>``, ``console:default``) also keeps the mode the owner chose with
``/mode`` as a setting ``chat.session_mode:<conversation>``, which a new session starts
in (``/new``, or the first message after a restart): the owner's choice holds until it
is changed. The model's and the confirm's switches are the session's only. A
conversation named by its session (``session:<id>``, the sidecar's chats) has only the
session's own.

The owner switches with ``/mode act|plan|read_only``. The model asks with its control
tools, always offered: ``enter_plan_mode`` (at once) and ``exit_plan_mode`` (with the
plan, which the owner confirms through the approval buttons; only then is the session
back in ``act``). ``read_only`` is the owner's: only the owner lifts it. Every change is
an audit event (``mode.changed``).

:meth:`SessionModes.check` is the one question "may this tool run in this session's
mode" for callers outside a turn (the sidecar's ``POST /agent/tools/{name}``).
"""

from __future__ import annotations

import logging
from typing import Any

from kernel.agent.sessions import SESSION_PREFIX, Sessions
from kernel.audit import AuditLog
from kernel.audit.kinds import MODE_CHANGED
from kernel.config import Config
from kernel.core.asks import AskOutcome
from kernel.core.errors import CodedError
from kernel.core.i18n import t
from kernel.core.session_modes import (
    ACT,
    CONTROL,
    PLAN,
    READ_ONLY,
    REFUSED_CODE,
    SESSION_MODES,
    mode_of,
)
from kernel.store.db import Store
from kernel.tools.registry import ToolContext, ToolRegistry, refused_in_mode

log = logging.getLogger(__name__)

ENTER_TOOL = "enter_plan_mode"
EXIT_TOOL = "exit_plan_mode"
CONFIRM_SECONDS = 600.0  # how long exit_plan_mode waits for the owner, unless [tools.*] says
ENTER_RULES = "For a task that needs a plan: explore, then call exit_plan_mode with it."
LASTING = "command"  # the owner's /mode: the chat's new sessions start in it too
MAX_PLAN = 20_000  # characters of a plan shown with the question


def _setting(conversation: str) -> str:
    return f"chat.session_mode:{conversation}"


class SessionModes:
    """Reads and switches sessions' modes; registers the control tools."""

    def __init__(self, config: Config, store: Store, sessions: Sessions, audit: AuditLog):
        self.config = config
        self.store = store
        self.sessions = sessions
        self.audit = audit
        # Bumped at every change: a running turn reads its session's mode again only
        # when this moved since it last read it.
        self.changes = 0

    # ----- reading -------------------------------------------------------------------

    async def inherited(self, conversation: str) -> str:
        """The mode a new session of this conversation starts in."""
        if conversation.startswith(SESSION_PREFIX):
            return ACT
        return mode_of(await self.store.get_setting(_setting(conversation)))

    async def of_session(self, session_id: int) -> str:
        row = await self.store.get_session(session_id)
        return row.mode if row is not None else ACT

    async def current(self, conversation: str) -> str:
        """The mode of the conversation's session, or what a new one would start in."""
        session_id = self.sessions.current_session(conversation)
        row = await self.store.get_session(session_id) if session_id is not None else None
        return row.mode if row is not None else await self.inherited(conversation)

    async def check(
        self, session_id: int, name: str, tools: ToolRegistry, arguments: dict[str, Any] | None
    ) -> None:
        """Raise CodedError ``tool_forbidden_in_mode`` (HTTP 403; its text says why and how
        to switch) when the session's mode holds ``name`` back for these arguments."""
        mode = await self.of_session(session_id)
        if not tools.allowed_in(name, mode, arguments):
            details: dict[str, object] = {"tool": name, "mode": mode}
            raise CodedError(REFUSED_CODE, refused_in_mode(name, mode), details)

    # ----- switching -----------------------------------------------------------------

    async def set(
        self,
        conversation: str,
        mode: str,
        *,
        actor: str,
        how: str,
        session_id: int | None = None,
    ) -> str:
        """Switch the session (``session_id``, else the conversation's current one, if
        it has one) to ``mode`` and, for the owner's /mode (``how`` ``command``), the
        conversation too (what its new sessions start in); returns the mode it was in.
        Takes effect at the session's next tool call, even mid-turn."""
        if mode not in SESSION_MODES:
            raise ValueError(f"unknown session mode {mode!r}")
        if session_id is None:
            session_id = self.sessions.current_session(conversation)
        before = await self.inherited(conversation)
        if how == LASTING and not conversation.startswith(SESSION_PREFIX):
            key = _setting(conversation)
            if mode == ACT:
                await self.store.delete_setting(key)
            else:
                await self.store.set_setting(key, mode)
        if session_id is not None:
            before = await self.store.set_mode(session_id, mode)
        self.changes += 1
        log.info("session %s: mode %s -> %s (%s)", session_id, before, mode, how)
        self.audit.note(
            MODE_CHANGED, session_id=session_id, actor=actor, mode=mode, before=before, how=how
        )
        return before

    # ----- the model's control tools -------------------------------------------------

    def register(self, tools: ToolRegistry) -> None:
        modes = self

        @tools.tool(name=ENTER_TOOL, effect=CONTROL)
        async def enter_plan_mode(context: ToolContext) -> str:
            """Switch to plan mode: the tools that write or act are put away until
            the owner approves a plan (exit_plan_mode)."""
            return await modes._enter(context)

        @tools.tool(name=EXIT_TOOL, effect=CONTROL)
        async def exit_plan_mode(plan: str, context: ToolContext) -> str:
            """Show the owner your plan to approve; the tools that write or act come
            back only if they do.

            Args:
                plan: Markdown: the steps and what they change
            """
            return await modes._exit(plan, context)

        # When to plan: Kernel's wording, left out where SOUL.md has a section about it.
        tools.add_rules(ENTER_TOOL, ENTER_RULES)

    async def _enter(self, context: ToolContext) -> str:
        mode = context.session_mode
        if mode == PLAN:
            return t("mode.tool_already_plan")
        if mode == READ_ONLY:
            return t("mode.tool_read_only")
        await self.set(
            context.conversation, PLAN, actor="model", how="tool", session_id=context.session_id
        )
        return t("mode.tool_entered")

    async def _exit(self, plan: str, context: ToolContext) -> str:
        mode = context.session_mode
        if mode == ACT:
            return t("mode.tool_not_in_plan")
        if mode == READ_ONLY:
            return t("mode.tool_read_only")
        if context.ask is None:
            return t("mode.tool_no_confirm")
        text = plan.strip()[:MAX_PLAN] or t("mode.no_plan")
        answer = await context.ask(
            f"{t('mode.confirm_question')}\n\n{text}",
            [t("mode.confirm_approve"), t("mode.confirm_keep")],
            kind="approval",
            seconds=self._confirm_seconds(),
            markdown=True,
        )
        if answer.option == 0:
            await self.set(
                context.conversation,
                ACT,
                actor="owner",
                how="confirm",
                session_id=context.session_id,
            )
            return t("mode.tool_approved")
        if answer.text is not None:
            return t("mode.tool_owner_said", reply=answer.text)
        if answer.outcome is AskOutcome.ANSWERED:
            return t("mode.tool_kept")
        return t("mode.tool_unanswered")

    def _confirm_seconds(self) -> float:
        policy = self.config.tools.get(EXIT_TOOL)
        return policy.approval_timeout if policy is not None else CONFIRM_SECONDS
