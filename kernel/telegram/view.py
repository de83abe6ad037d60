"""How one turn looks in the chat: typing, drafts, then the final reply.

Progress is silent, the answer notifies (issue 34: the owner's lock screen shows the
answer's first words), and a plain exchange costs the chat's rate budget one token,
its answer (issue 37: back to back, about one exchange a second, Telegram's limit).
Progress is shown by what costs no token: the typing action (once a turn has run half
a second: an answer sooner needs none) and the draft
(``drafts.py``: the reply as it forms and, below it or alone, the status line: the
tool that runs, its progress, "retrying (2/3)…"). With drafts off (``stream = false``,
or the turn's first draft error) a silent placeholder is sent once a status line needs
one (a tool runs: ``tool_progress.py``; a retry: ``_set_progress``); it is on the
inbox row's record for crash recovery (``set_placeholder``), and a plain exchange still
sends no placeholder. The reply (or an error notice) comes as a new message, the only
one of the turn that notifies (a long reply's later chunks are silent); a placeholder
is deleted right after it, never left dangling. The first plan of the turn
(todo_write) takes the placeholder if one stands, else comes in a silent message of its
own, and stays above the reply (``plan.py``). A finished delegate_to_cli call is folded
into the reply: its outcome line in italics below the answer, its progress message
deleted. The reply carries the chat's only 🔁: the one before loses it through a tidy
outbox row that goes once the chat's budget has a token to spare
(``outbox.live_retry``), so it never costs an answer its turn.
/cancel keeps what was streamed, marked cancelled (in the placeholder's place when one
stands, else as a silent message of its own). Drafts, typing, the placeholder and
intermediate edits go straight to the Bot API (best effort); the outcome (the reply,
an error or interrupted notice, the cancelled partial) goes through the durable outbox,
which settles the turn's inbox row in the same transaction. The view does not wait for
delivery: the next turn can start. A turn cut by a kill leaves its inbox row open (and
no message of its own, unless a placeholder stood): the next start tells the owner.
When the store refuses the outcome, the owner is told directly (the placeholder, if
one stands, becomes the error notice naming a full disk or a read-only database, and
the fix) and the row stays open: the next start tells the owner again, with 🔁.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from telegram.constants import ChatAction
from telegram.error import TelegramError

from kernel.core.events import (
    AskUser,
    AssistantDelta,
    Completed,
    ErrorEvent,
    ModelRetrying,
    ModelSwitched,
    PlanUpdated,
    ToolCall,
    ToolProgress,
    ToolResult,
)
from kernel.core.i18n import t
from kernel.core.rows import RowId
from kernel.core.turns import Turn
from kernel.delegate.delegator import Delegator
from kernel.store.mailbox import InboxState, OutboxItem
from kernel.telegram.asks import AskBoard
from kernel.telegram.budget import Bot
from kernel.telegram.drafts import DraftLine
from kernel.telegram.items import Markup, retry_later
from kernel.telegram.outbox import (
    Outbox,
    Ticket,
    again_markup,
    delete_item,
    plain_items,
    reply_items,
)
from kernel.telegram.plan import PlanMessage
from kernel.telegram.progress import TOOL_NAME, DelegationProgress
from kernel.telegram.tool_progress import ToolProgressLine
from kernel.tools.todo import NAME as PLAN_TOOL

log = logging.getLogger(__name__)

# A turn shows typing once it has run this long: an answer in hand sooner needs none
# (the Bot API's advice: the action is for a response that takes noticeable time). The
# instant answer then costs one call, the answer, not two (issue 37).
TYPING_AFTER = 0.5


@dataclass(frozen=True)
class Chat:
    """Where a turn is shown: the bot, the chat's durable outbox, the chat and the
    agent's conversation of it."""

    bot: Bot
    outbox: Outbox
    chat_id: int
    conversation: str = ""


def _never() -> bool:
    return False


def _no_approval(name: str) -> bool:
    return False


@dataclass(frozen=True)
class Looks:
    """How the channel shows every turn: drafts (``draft_interval`` apart), typing and
    progress intervals, whether it is shutting down (``interrupted``), where questions
    go (``board``), the delegations to follow and which tools wait for approval."""

    drafts: bool
    draft_interval: float = 0.3
    typing_interval: float = 4.0
    progress_interval: float = 3.0
    interrupted: Callable[[], bool] = _never
    board: AskBoard | None = None
    delegator: Delegator | None = None
    needs_approval: Callable[[str], bool] = _no_approval


class TurnView:
    def __init__(
        self,
        chat: Chat,
        looks: Looks,
        *,
        inbox_id: int | None = None,
        reply_to: int | None = None,
        footer: str | None = None,
    ) -> None:
        bot, outbox, chat_id = chat.bot, chat.outbox, chat.chat_id
        progress_interval = looks.progress_interval
        self.bot = bot
        self.reply_to = reply_to  # the owner's message a late answer quotes
        self.footer = footer  # a line under the answer (the restart hint)
        self.outbox = outbox
        self.inbox_id = inbox_id  # the owner's message this turn answers, when recorded
        self._settled = False  # the outcome is queued (and the inbox row closed)
        self.unqueued = False  # the store refused the outcome: the row stays open
        self.board = looks.board
        self.chat_id = chat_id
        self.typing_interval = looks.typing_interval
        self.interrupted = looks.interrupted  # true when the channel is shutting down
        self.delegator = looks.delegator
        self.conversation = chat.conversation
        self.progress_interval = progress_interval
        self.needs_approval = looks.needs_approval
        self._progress: DelegationProgress | None = None
        self._ran: list[DelegationProgress] = []  # finished calls, folded into the answer
        self._tool_line = ToolProgressLine(
            bot, outbox, chat_id, interval=progress_interval, record=self._record
        )
        # todo_write's plan: a message of its own (or the placeholder, when one stands);
        # it stays when the turn ends.
        self._plan = PlanMessage(bot, chat_id, interval=progress_interval, record=self._record)
        # The reply as it forms and the status line (tools, retries), at no token's cost.
        self._draft = DraftLine(bot, chat_id, on=looks.drafts, interval=looks.draft_interval)
        self._running: set[str] = set()  # tool calls whose line the draft shows
        self.reply: str | None = None  # the final reply, once completed (not cancelled)
        self.delivery: Ticket | None = None  # the queued outcome (wait() = delivered)
        self._asked: set[str] = set()  # the questions this turn showed

    @property
    def settled(self) -> bool:
        """The turn's outcome is queued, its inbox row closed in the same transaction."""
        return self._settled

    async def show(self, turn: Turn) -> None:
        # The silent placeholder: none while drafts show the progress (issue 37: the
        # answer is the turn's one token); without drafts, sent once a line needs it.
        pending: int | None = None
        self._draft.whole = lambda: turn.reply_whole
        typing = asyncio.get_running_loop().create_task(self._keep_typing())
        try:
            async for event in turn:
                if isinstance(event, AssistantDelta):
                    if not self._running:
                        self._draft.status = ""  # the model answers: a retry line is done
                    self._draft.add(event.delta)
                elif isinstance(event, ToolCall):
                    if event.name == TOOL_NAME and self._watch_delegation(event):
                        assert self._progress is not None
                        if self.needs_approval(TOOL_NAME):
                            self._progress.begin_when_running()
                        else:  # the placeholder becomes the progress; the reply comes anew
                            reuse, pending = pending, None
                            await self._progress.begin(reuse)
                    elif event.name == PLAN_TOOL:
                        pass  # its plan event shows what it did
                    elif pending is not None:
                        await self._tool_line.running(event.id, event.name, pending)
                    elif self._plan.holds:
                        await self._plan.note(t("tg.working_tool", name=event.name))
                    else:
                        pending = await self._tool_started(event)
                elif isinstance(event, PlanUpdated):
                    backlog = bool(self.outbox.backlog(self.chat_id))
                    if await self._plan.update(event.items, pending, backlog=backlog):
                        pending = None  # the plan message now; the reply comes anew
                        await self._tool_line.placeholder_gone()
                elif isinstance(event, ToolProgress):
                    if self._progress is not None and event.id == self._progress.call_id:
                        pass  # the delegation's own message follows it
                    elif pending is None and event.id in self._running and self._draft.on:
                        self._draft.say(t("tg.tool_progress", name=event.name, progress=event.text))
                    else:
                        await self._tool_line.report(event, pending)
                elif isinstance(event, AskUser) and self.board is not None:
                    # The reply must come below the question, so the placeholder goes
                    # (a later line sends a new one).
                    if pending is not None:
                        await self.outbox.put(self.chat_id, [delete_item(pending)])
                        await self._tool_line.placeholder_gone()
                        pending = None
                    self._asked.add(event.id)
                    await self.board.show(self.chat_id, event)
                elif isinstance(event, ModelSwitched):
                    await self._note_switch(event, pending)
                    pending = None
                elif isinstance(event, ModelRetrying):  # "Claude 过载，正在重试 (2/3)…"
                    pending = await self._say(event.describe(), pending)
                elif isinstance(event, ToolResult):
                    await self._tool_line.ended(event.id)
                    self._tool_ended(event.id)
                    if self._progress is not None and event.id == self._progress.call_id:
                        progress, self._progress = self._progress, None
                        await progress.finish(event)
                        self._ran.append(progress)
                    if self.board is not None:
                        await self.board.close_for_tool(event.id, "unanswered", self._asked)
                elif isinstance(event, Completed):
                    typing.cancel()
                    await self._tool_line.stop()
                    await self._draft.settle()
                    if self._progress is not None:
                        await self._progress.cancelled()
                    if event.cancelled and self.interrupted():
                        notice = plain_items(t("tg.interrupted"), markup=self._again())
                        first, pending = pending, None
                        await self._finish(_outcome(notice, first), "interrupted")
                    elif not event.cancelled:
                        first, pending = pending, None  # the reply comes anew; it goes
                        self.reply = event.reply
                        await self._answer(event.reply, turn.answer_id, first)
                elif isinstance(event, ErrorEvent):
                    typing.cancel()
                    await self._tool_line.stop()
                    await self._draft.settle()
                    if self._progress is not None:
                        await self._progress.cancelled()
                    if self.board is not None:  # a budget question left unanswered
                        await self.board.close_asks(self._asked, "unanswered")
                    first, pending = pending, None
                    text = t("tg.turn_error", message=event.message)
                    await self._fail(text, first, reply_to=self.reply_to)
        except Exception as exc:  # the view itself failed: the owner still hears of it
            if not self._settled and not self.unqueued:
                log.error("showing a turn failed: %s", type(exc).__name__)
                text = t("turn.internal_error", kind=type(exc).__name__)
                first, pending = pending, None
                with contextlib.suppress(Exception):
                    await self._fail(text, first)
            raise
        finally:
            await self._tool_line.stop()
            await self._plan.halt()
            await self._draft.settle()
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
            if self._progress is not None:
                await self._progress.close()
            if self.board is not None:  # a question the turn no longer waits for
                await self.board.close_asks(self._asked, "cancelled")
            # Cut off by a stop before any outcome, the row stays open: the next start
            # finds it (with its placeholder) and tells the owner.
            cut_off = (not self._settled and self.interrupted()) or self.unqueued
            if not cut_off and (pending is not None or not self._settled):
                # /cancel: what was written stays, marked; else the placeholder goes.
                # The owner's message is closed cancelled.
                await self._finish(self._cancelled(pending), "cancelled")

    def _watch_delegation(self, event: ToolCall) -> bool:
        """Follow this delegate_to_cli call, unless one is already followed (a second
        call in the same step is refused as busy and shows in the model's reply)."""
        if self.delegator is None or self._progress is not None:
            return False
        cli = event.arguments.get("cli")
        self._progress = DelegationProgress(
            self.bot,
            self.outbox,
            self.chat_id,
            self.delegator,
            self.conversation,
            event.id,
            cli if isinstance(cli, str) else None,
            interval=self.progress_interval,
            record=self._record,
            asks=self.board.asks if self.board is not None else None,
        )
        return True

    async def _tool_started(self, event: ToolCall) -> int | None:
        """A tool's line where nothing shows one yet: in the draft while drafts work,
        else in a silent placeholder sent for it. Returns the placeholder (or None)."""
        line = t("tg.working_tool", name=event.name)
        if self._draft.on:
            self._running.add(event.id)
            self._draft.say(line)
            return None
        placeholder = await self._placeholder(line)
        if placeholder is not None:
            await self._tool_line.running(event.id, event.name, placeholder, shown=True)
        return placeholder

    def _tool_ended(self, call_id: str) -> None:
        """A tool returned: once none of the draft's runs, its line goes from the draft."""
        if call_id in self._running:
            self._running.discard(call_id)
            if not self._running:
                self._draft.say("")

    async def _say(self, line: str, pending: int | None) -> int | None:
        """A status line (a retry): in the placeholder if one stands, else in the draft
        while drafts work, else in a silent placeholder sent for it. Best effort: the
        answer still comes. Returns the placeholder (or None)."""
        if pending is not None:
            await self._set_progress(pending, line)
            return pending
        if self._draft.on:
            self._draft.say(line)
            return None
        return await self._placeholder(line)

    async def _placeholder(self, text: str) -> int | None:
        """A silent message saying ``text`` (what runs, a retry) for a turn whose
        drafts are off; it goes when the answer comes. Sent directly, best effort, and
        only when nothing of this chat waits in the outbox (a placeholder must not jump
        ahead of earlier messages)."""
        if self.outbox.backlog(self.chat_id):
            return None
        try:
            # Silent: the answer is the message that notifies (issue 34).
            placeholder = await self.bot.send_message(self.chat_id, text, disable_notification=True)
        except TelegramError as exc:  # no placeholder; the reply still comes
            log.warning("placeholder failed: %s", type(exc).__name__)
            return None
        if self.inbox_id is not None:  # so a crash can find it and say what happened
            try:
                await self.outbox.mailbox.set_placeholder(self.inbox_id, placeholder.message_id)
            except Exception as exc:
                log.warning("recording the placeholder failed: %s", type(exc).__name__)
        return placeholder.message_id

    async def _record(self, message_id: int) -> None:
        """A message of this turn that a crash must not leave standing. Best effort: the
        message still shows; only a crash would leave it."""
        if self.inbox_id is None:
            return
        try:
            await self.outbox.mailbox.add_cleanup(self.inbox_id, message_id)
        except Exception as exc:
            log.warning("recording a progress message failed: %s", type(exc).__name__)

    def _again(self) -> dict[str, Any] | None:
        return again_markup(self.inbox_id) if self.inbox_id is not None else None

    async def _answer(
        self, reply: str, answer_id: int | RowId | None, placeholder: int | None
    ) -> None:
        """The answer as a new message, the one that notifies (the placeholder goes after
        it); a finished delegation's line folded into it; the 🔁 moves onto it (naming
        the answer being stored, a RowId: made in the hop that stores it, issue 37)."""
        footer, gone = [], []
        for progress in self._ran:
            line, items = progress.folded()
            footer += [line] if line else []
            gone += items
        retry = retry_later(answer_id) if answer_id is not None else None
        shown = f"{reply}\n\n{self.footer}" if self.footer else reply  # the restart hint
        items = reply_items(shown, markup=retry, footer=footer, reply_to=self.reply_to)
        after = [*gone, *(self.outbox.live_retry.supersede(self.chat_id) if retry else [])]
        await self._finish(_outcome(items, placeholder) + after, "answered", retry=retry)

    async def _fail(self, text: str, placeholder: int | None, reply_to: int | None = None) -> None:
        """A failed turn's notice, with 🔁 (again:) as the chat's only one: the answer
        before it loses its 🔁, and a later answer takes this one away."""
        again = self._again()
        items = plain_items(text, markup=again, reply_to=reply_to)
        after = self.outbox.live_retry.supersede(self.chat_id) if again else []
        await self._finish(_outcome(items, placeholder) + after, "failed", retry=again)

    def _cancelled(self, pending: int | None) -> list[OutboxItem]:
        """/cancel: the partial answer stays, marked cancelled, where the placeholder was
        (an edit), or as a silent message of its own when none stood (nothing notifies:
        the owner is looking); nothing written yet, a placeholder goes (the command's
        reply says it was cancelled)."""
        partial = self._draft.text.strip()
        if partial:
            footer = [t("tg.cancelled_partial")]
            return reply_items(partial, replace=pending, footer=footer, silent=True)
        return [delete_item(pending)] if pending is not None else []

    async def _finish(
        self, items: list[OutboxItem], state: InboxState, *, retry: Markup | None = None
    ) -> None:
        """Queue the turn's outcome, closing its inbox row in the same transaction.
        When the store refuses it, the owner is told directly (best effort) and the row
        stays open: the next start tells again, with 🔁. ``retry``: the 🔁 one of the
        items carries, from now on the chat's only one (the standing one is forgotten
        only once the items that take it away are queued)."""
        settle = (self.inbox_id, state) if self.inbox_id is not None else None
        # The plan as it stood comes first: it stays above the reply (or the notice).
        await self._plan.halt()
        queued = [*self._plan.final_items(), *items]
        if queued or settle is not None:
            try:
                self.delivery = await self.outbox.put(self.chat_id, queued, settle=settle)
                if retry is not None:
                    index = next(
                        i for i, x in enumerate(queued) if x.body.get("reply_markup") == retry
                    )
                    self.outbox.live_retry.stands(self.chat_id, self.delivery.ids[index])
            except Exception as exc:
                self.unqueued = True
                log.error("queueing a turn's outcome failed: %s", type(exc).__name__)
                words = await self.outbox.trouble_words(exc)
                await self._tell_directly(
                    items, words or t("turn.internal_error", kind=type(exc).__name__)
                )
                raise
        self._settled = True

    async def _tell_directly(self, items: list[OutboxItem], text: str) -> None:
        """The placeholder the outcome would have replaced becomes ``text``; with none,
        ``text`` comes as a new message."""
        standing = None
        for item in items:  # the placeholder: replaced by the first chunk, or deleted
            found = item.body.get("replace" if item.kind == "send" else "message_id")
            if item.kind != "edit" and isinstance(found, int):
                standing = found
                break
        await self.outbox.tell_directly(self.chat_id, text, replace=standing)

    async def _keep_typing(self) -> None:
        await asyncio.sleep(TYPING_AFTER)
        while True:
            with contextlib.suppress(TelegramError):
                await self.bot.send_chat_action(
                    self.chat_id, ChatAction.TYPING, rate_limit_args={"priority": "draft"}
                )
            await asyncio.sleep(self.typing_interval)

    async def _note_switch(self, event: ModelSwitched, pending: int | None) -> None:
        """A failover is told once, in a silent message of its own that stays (the
        reply, which the switch line is never part of, comes below it): the placeholder
        becomes the line; without one, the line comes anew (the draft's retry line is
        done). Through the outbox, so it keeps its place before the reply."""
        line = plain_items(event.describe(), replace=pending, silent=True)
        await self.outbox.put(self.chat_id, line)
        if not self._running:
            self._draft.say("")
        if pending is None:
            return
        await self._tool_line.placeholder_gone()
        if self.inbox_id is not None:
            # The old one is the switch line now: a crash must not overwrite it.
            try:
                await self.outbox.mailbox.set_placeholder(self.inbox_id, None)
            except Exception as exc:
                log.warning("forgetting the placeholder failed: %s", type(exc).__name__)

    async def _set_progress(self, message_id: int, text: str) -> None:
        """The silent progress surface (the placeholder) says ``text`` now: a retry.
        Best effort: the answer still comes."""
        with contextlib.suppress(TelegramError):
            await self.bot.edit_message_text(
                text,
                chat_id=self.chat_id,
                message_id=message_id,
                rate_limit_args={"priority": "progress"},
            )


def _outcome(items: list[OutboxItem], placeholder: int | None) -> list[OutboxItem]:
    """The turn's outcome comes as a new message, which notifies (an edit never does):
    the owner's lock screen shows its first words. The silent placeholder goes after
    it, so the chat never shows a gap."""
    return [*items, delete_item(placeholder)] if placeholder is not None else items
