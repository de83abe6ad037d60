"""How one turn looks in the chat: placeholder, typing, drafts, then the final reply.

The placeholder is always replaced (by the first chunk of the reply, an error, or a
notice) or deleted (on /cancel), never left dangling. Drafts (``sendMessageDraft``)
preview the reply as plain text while it forms, at most one every ``draft_interval``
seconds; the first draft error turns them off for the rest of the turn. Delivery
survives a dropped connection: each chunk is retried a few times, and if it still
cannot be sent the owner is told, since the reply is already in history.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable

from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError

from kernel.core.events import (
    AskUser,
    AssistantDelta,
    Completed,
    ErrorEvent,
    ToolCall,
    ToolProgress,
    ToolResult,
)
from kernel.core.i18n import t
from kernel.core.redact import hide_quoted
from kernel.core.tasks import TaskSet
from kernel.core.turns import Turn
from kernel.delegate.delegator import Delegator
from kernel.telegram.asks import AskBoard
from kernel.telegram.budget import Bot, Thinned
from kernel.telegram.progress import TOOL_NAME, DelegationProgress
from kernel.telegram.render import html_to_plain, render_markdown
from kernel.telegram.split import split_html, split_plain, utf16_len
from kernel.telegram.tool_progress import ToolProgressLine

log = logging.getLogger(__name__)

DRAFT_LIMIT = 4096
DRAFT_SETTLE = 1.0
SEND_ATTEMPTS = 3
_draft_ids = itertools.count(1)


async def send_reply(bot: Bot, chat_id: int, markdown: str, replace: int | None = None) -> None:
    """Deliver Markdown as Telegram HTML chunks; a chunk Telegram rejects goes as plain text.

    ``replace``: a message (the placeholder) whose text becomes the first chunk.
    """
    chunks = split_html(render_markdown(markdown))
    if not chunks:
        chunks = [t("tg.empty_reply")]
    for index, chunk in enumerate(chunks):
        target = replace if index == 0 else None
        try:
            await _put(bot, chat_id, chunk, ParseMode.HTML, target)
        except BadRequest as exc:
            # Telegram quotes the offending tag or entity of the reply: keep only the shape.
            reason = hide_quoted(exc.message)
            log.warning("telegram rejected an HTML chunk (%s); sending plain text", reason)
            for part in split_plain(html_to_plain(chunk)):
                await _put(bot, chat_id, part, None, target)
                target = None


async def send_plain(bot: Bot, chat_id: int, text: str, replace: int | None = None) -> None:
    for index, part in enumerate(split_plain(text) or [t("tg.empty_reply")]):
        await _put(bot, chat_id, part, None, replace if index == 0 else None)


async def _put(bot: Bot, chat_id: int, text: str, mode: str | None, replace: int | None) -> None:
    if replace is not None:
        try:
            await _retrying(
                lambda: bot.edit_message_text(
                    text, chat_id=chat_id, message_id=replace, parse_mode=mode
                )
            )
            return
        except BadRequest as exc:
            if "can't parse entities" in exc.message.lower():
                raise
            # The placeholder is gone or unchanged: fall through and send anew.
            await _delete(bot, chat_id, replace)
    await _retrying(lambda: bot.send_message(chat_id, text, parse_mode=mode))


async def _retrying(call: Callable[[], object]) -> None:
    """A network failure or a 429 beyond the rate limiter's own retries gets a few more
    tries; a BadRequest is the caller's to handle."""
    for attempt in range(SEND_ATTEMPTS):
        try:
            await call()  # type: ignore[misc]
            return
        except (NetworkError, RetryAfter) as exc:
            if isinstance(exc, BadRequest) or attempt == SEND_ATTEMPTS - 1:
                raise
            wait = exc._retry_after.total_seconds() if isinstance(exc, RetryAfter) else 1.0
            log.warning("telegram send failed (%s); retrying", type(exc).__name__)
            await asyncio.sleep(wait * (attempt + 1))


async def _delete(bot: Bot, chat_id: int, message_id: int) -> None:
    with contextlib.suppress(TelegramError):
        await bot.delete_message(chat_id, message_id)


def _tail_utf16(text: str, limit: int) -> str:
    """The end of ``text`` within ``limit`` UTF-16 units: a draft shows the newest part."""
    if utf16_len(text) <= limit:
        return text
    tail = text[-limit:]
    while utf16_len(tail) > limit:
        tail = tail[1:]
    return tail


class TurnView:
    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        *,
        drafts: bool,
        draft_interval: float = 0.3,
        typing_interval: float = 4.0,
        interrupted: Callable[[], bool] = lambda: False,
        board: AskBoard | None = None,
        delegator: Delegator | None = None,
        conversation: str = "",
        progress_interval: float = 3.0,
        needs_approval: Callable[[str], bool] = lambda name: False,
    ) -> None:
        self.bot = bot
        self.board = board
        self.chat_id = chat_id
        self.drafts = drafts
        self.draft_interval = draft_interval
        self.typing_interval = typing_interval
        self.interrupted = interrupted  # true when the channel is shutting down
        self.delegator = delegator
        self.conversation = conversation
        self.progress_interval = progress_interval
        self.needs_approval = needs_approval
        self._progress: DelegationProgress | None = None
        self._tool_line = ToolProgressLine(bot, chat_id, interval=progress_interval)
        self.draft_id = next(_draft_ids)
        self._text: list[str] = []
        self.reply: str | None = None  # the final reply, once completed (not cancelled)
        self._last_draft = 0.0
        self._drafted = ""
        self._drafts = TaskSet("telegram drafts")
        self._draft_task: asyncio.Task[None] | None = None  # the one in flight
        self._asked: set[str] = set()  # the questions this turn showed

    async def show(self, turn: Turn) -> None:
        pending = await self._placeholder()
        asked = False  # a question took the placeholder away
        typing = asyncio.get_running_loop().create_task(self._keep_typing())
        try:
            async for event in turn:
                if isinstance(event, AssistantDelta):
                    self._text.append(event.delta)
                    self._maybe_draft()
                elif isinstance(event, ToolCall):
                    if event.name == TOOL_NAME and self._watch_delegation(event):
                        assert self._progress is not None
                        if self.needs_approval(TOOL_NAME):
                            self._progress.begin_when_running()
                        else:  # the placeholder becomes the progress; the reply comes anew
                            reuse, pending = pending, None
                            await self._progress.begin(reuse)
                    elif pending is not None:
                        await self._note_tool(pending, event.name)
                elif isinstance(event, ToolProgress):
                    if self._progress is None or event.id != self._progress.call_id:
                        await self._tool_line.report(event, pending)
                elif isinstance(event, AskUser) and self.board is not None:
                    # The reply must come below the question, so the placeholder goes
                    # and a new one follows once the question is settled.
                    if pending is not None:
                        await _delete(self.bot, self.chat_id, pending)
                        await self._tool_line.placeholder_gone()
                        pending = None
                    asked = True
                    self._asked.add(event.id)
                    await self.board.show(self.chat_id, event)
                elif isinstance(event, ToolResult):
                    await self._tool_line.ended(event.id)
                    if self._progress is not None and event.id == self._progress.call_id:
                        progress, self._progress = self._progress, None
                        await progress.finish(event)
                    if self.board is not None:
                        await self.board.close_for_tool(
                            event.id, t("tg.ask_unanswered"), self._asked
                        )
                    if asked and pending is None:
                        asked, pending = False, await self._placeholder()
                elif isinstance(event, Completed):
                    typing.cancel()
                    await self._tool_line.stop()
                    await self._settle_draft()
                    if self._progress is not None:
                        await self._progress.cancelled()
                    if event.cancelled and self.interrupted():
                        await send_plain(self.bot, self.chat_id, t("tg.interrupted"), pending)
                        pending = None
                    elif not event.cancelled:
                        first, pending = pending, None  # from here the placeholder is the reply
                        self.reply = event.reply
                        await self._deliver(event.reply, first)
                elif isinstance(event, ErrorEvent):
                    typing.cancel()
                    await self._tool_line.stop()
                    await self._settle_draft()
                    if self._progress is not None:
                        await self._progress.cancelled()
                    first, pending = pending, None
                    text = t("tg.turn_error", message=event.message)
                    try:
                        await send_plain(self.bot, self.chat_id, text, first)
                    except TelegramError as exc:
                        log.error("error notice delivery failed: %s", type(exc).__name__)
        finally:
            await self._tool_line.stop()
            await self._drafts.close(DRAFT_SETTLE)
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
            if self._progress is not None:
                await self._progress.close()
            if self.board is not None:  # a question the turn no longer waits for
                await self.board.close_asks(self._asked, t("tg.ask_cancelled"))
            if pending is not None:
                await _delete(self.bot, self.chat_id, pending)

    def _watch_delegation(self, event: ToolCall) -> bool:
        """Follow this delegate_to_cli call, unless one is already followed (a second
        call in the same step is refused as busy and shows in the model's reply)."""
        if self.delegator is None or self._progress is not None:
            return False
        cli = event.arguments.get("cli")
        self._progress = DelegationProgress(
            self.bot,
            self.chat_id,
            self.delegator,
            self.conversation,
            event.id,
            cli if isinstance(cli, str) else None,
            interval=self.progress_interval,
        )
        return True

    async def _placeholder(self) -> int | None:
        try:
            placeholder = await self.bot.send_message(self.chat_id, t("tg.placeholder"))
        except TelegramError as exc:  # no placeholder; the reply still comes
            log.warning("placeholder failed: %s", type(exc).__name__)
            return None
        return placeholder.message_id

    async def _deliver(self, reply: str, placeholder: int | None) -> None:
        try:
            await send_reply(self.bot, self.chat_id, reply, placeholder)
        except TelegramError as exc:
            log.error("reply delivery failed: %s", type(exc).__name__)
            with contextlib.suppress(TelegramError):
                await self.bot.send_message(self.chat_id, t("tg.delivery_failed"))

    async def _keep_typing(self) -> None:
        while True:
            with contextlib.suppress(TelegramError):
                await self.bot.send_chat_action(
                    self.chat_id, ChatAction.TYPING, rate_limit_args={"priority": "draft"}
                )
            await asyncio.sleep(self.typing_interval)

    def _maybe_draft(self) -> None:
        """Drafts are best-effort previews sent beside the turn, one at a time: a slow draft
        (or one the rate budget thinned: it never waits) must never hold up the events
        behind it, the final reply least of all."""
        if not self.drafts or (self._draft_task is not None and not self._draft_task.done()):
            return
        now = time.monotonic()
        if now - self._last_draft < self.draft_interval:
            return
        text = _tail_utf16("".join(self._text).strip(), DRAFT_LIMIT)
        if not text or text == self._drafted:
            return
        self._last_draft = now
        self._draft_task = self._drafts.spawn(self._send_draft(text), "telegram-draft")

    async def _send_draft(self, text: str) -> None:
        try:
            await self.bot.send_message_draft(
                self.chat_id, self.draft_id, text, rate_limit_args={"priority": "draft"}
            )
            self._drafted = text
        except Thinned:  # the chat's budget is short: a later draft shows the text
            pass
        except TelegramError as exc:
            log.info("draft failed (%s); drafts off for this turn", type(exc).__name__)
            self.drafts = False

    async def _settle_draft(self) -> None:
        """Before the final message: let a draft in flight land (a draft arriving after
        the reply would show stale text), but wait at most DRAFT_SETTLE seconds."""
        self.drafts = False
        task = self._draft_task
        if task is None or task.done():
            return
        await asyncio.wait({task}, timeout=DRAFT_SETTLE)
        task.cancel()

    async def _note_tool(self, message_id: int, name: str) -> None:
        with contextlib.suppress(TelegramError):
            await self.bot.edit_message_text(
                t("tg.working_tool", name=name),
                chat_id=self.chat_id,
                message_id=message_id,
                rate_limit_args={"priority": "progress"},
            )
