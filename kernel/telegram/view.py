"""How one turn looks in the chat: placeholder, typing, drafts, then the final reply.

The placeholder is always replaced (by the first chunk of the reply or the error) or
deleted (on cancel), never left dangling. Drafts (``sendMessageDraft``) preview the
reply as plain text while it forms, at most one every ``draft_interval`` seconds; the
first draft error turns them off for the rest of the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time

from telegram import Bot
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, TelegramError

from kernel.agent.events import AssistantDelta, Completed, ErrorEvent, ToolCall
from kernel.agent.turns import Turn
from kernel.i18n import t
from kernel.telegram.render import html_to_plain, render_markdown
from kernel.telegram.split import split_html, split_plain

log = logging.getLogger(__name__)

DRAFT_LIMIT = 4096
_draft_ids = itertools.count(1)


async def send_reply(bot: Bot, chat_id: int, markdown: str, replace: int | None = None) -> None:
    """Deliver Markdown as Telegram HTML chunks; a chunk Telegram rejects goes as plain text.

    ``replace``: a message (the placeholder) whose text becomes the first chunk.
    """
    for index, chunk in enumerate(split_html(render_markdown(markdown))):
        target = replace if index == 0 else None
        try:
            await _put(bot, chat_id, chunk, ParseMode.HTML, target)
        except BadRequest as exc:
            log.warning("telegram rejected an HTML chunk (%s); sending plain text", exc.message)
            for part in split_plain(html_to_plain(chunk)):
                await _put(bot, chat_id, part, None, target)
                target = None


async def send_plain(bot: Bot, chat_id: int, text: str, replace: int | None = None) -> None:
    for index, part in enumerate(split_plain(text)):
        await _put(bot, chat_id, part, None, replace if index == 0 else None)


async def _put(bot: Bot, chat_id: int, text: str, mode: str | None, replace: int | None) -> None:
    if replace is not None:
        try:
            await bot.edit_message_text(text, chat_id=chat_id, message_id=replace, parse_mode=mode)
            return
        except BadRequest as exc:
            if "can't parse entities" in exc.message.lower():
                raise
            # The placeholder is gone or unchanged: fall through and send anew.
            await _delete(bot, chat_id, replace)
    await bot.send_message(chat_id, text, parse_mode=mode)


async def _delete(bot: Bot, chat_id: int, message_id: int) -> None:
    with contextlib.suppress(TelegramError):
        await bot.delete_message(chat_id, message_id)


class TurnView:
    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        *,
        drafts: bool,
        draft_interval: float = 0.3,
        typing_interval: float = 4.0,
    ) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.drafts = drafts
        self.draft_interval = draft_interval
        self.typing_interval = typing_interval
        self.draft_id = next(_draft_ids)
        self._text: list[str] = []
        self._last_draft = 0.0
        self._drafted = ""

    async def show(self, turn: Turn) -> None:
        placeholder = await self.bot.send_message(self.chat_id, t("tg.placeholder"))
        typing = asyncio.get_running_loop().create_task(self._keep_typing())
        pending: int | None = placeholder.message_id
        try:
            async for event in turn:
                if isinstance(event, AssistantDelta):
                    self._text.append(event.delta)
                    await self._maybe_draft()
                elif isinstance(event, ToolCall):
                    await self._note_tool(placeholder.message_id, event.name)
                elif isinstance(event, Completed):
                    if event.cancelled:
                        break
                    typing.cancel()
                    await send_reply(self.bot, self.chat_id, event.reply or "…", pending)
                    pending = None
                elif isinstance(event, ErrorEvent):
                    typing.cancel()
                    await send_plain(self.bot, self.chat_id, "⚠️ " + event.message, pending)
                    pending = None
        finally:
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
            if pending is not None:
                await _delete(self.bot, self.chat_id, pending)

    async def _keep_typing(self) -> None:
        while True:
            with contextlib.suppress(TelegramError):
                await self.bot.send_chat_action(self.chat_id, ChatAction.TYPING)
            await asyncio.sleep(self.typing_interval)

    async def _maybe_draft(self) -> None:
        if not self.drafts:
            return
        now = time.monotonic()
        if now - self._last_draft < self.draft_interval:
            return
        text = "".join(self._text).strip()[:DRAFT_LIMIT]
        if not text or text == self._drafted:
            return
        self._last_draft = now
        try:
            await self.bot.send_message_draft(self.chat_id, self.draft_id, text)
            self._drafted = text
        except TelegramError as exc:
            log.info("draft failed (%s); drafts off for this turn", type(exc).__name__)
            self.drafts = False

    async def _note_tool(self, message_id: int, name: str) -> None:
        with contextlib.suppress(TelegramError):
            await self.bot.edit_message_text(
                t("tg.working_tool", name=name), chat_id=self.chat_id, message_id=message_id
            )
