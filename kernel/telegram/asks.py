"""Questions from a turn as messages with inline buttons, and the owner's presses.

``ask_user`` events become a message whose buttons carry ``ask:<id>:<option>``. A press
(the gate lets only the owner's through) resolves the waiting question and the message
is closed with the choice; a question that ended otherwise (timeout, /cancel, the turn
failing) is closed by the turn's view with that outcome. Buttons never stay live on a
question nobody waits for. The question and its closing edits go through the durable
outbox (in order with the rest of the chat); the answers to presses go directly.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from kernel.core.asks import AnswerResult, AskRegistry
from kernel.core.events import AskUser
from kernel.core.i18n import t
from kernel.store.mailbox import OutboxItem
from kernel.telegram.outbox import Outbox, Undeliverable, edit_item

log = logging.getLogger(__name__)

PREFIX = "ask"


@dataclass(slots=True)
class _Shown:
    chat_id: int
    message_id: int | None  # None until the outbox delivered the question
    text: str
    tool_call_id: str
    options: list[str]
    closed: str | None = None  # the closing note, when it came before the message id


class AskBoard:
    """Open questions shown in Telegram, shared by turn views and the callback handler."""

    def __init__(self, bot: Bot, outbox: Outbox, asks: AskRegistry) -> None:
        self.bot = bot
        self.outbox = outbox
        self.asks = asks
        self._open: dict[str, _Shown] = {}

    async def show(self, chat_id: int, event: AskUser) -> None:
        buttons = [
            InlineKeyboardButton(option, callback_data=f"{PREFIX}:{event.id}:{index}")
            for index, option in enumerate(event.options)
        ]
        rows = [buttons[i : i + 2] for i in range(0, len(buttons), 2)]
        markup = InlineKeyboardMarkup(rows).to_dict()
        body = {"text": event.question, "parse_mode": None, "reply_markup": markup}
        # On the board before it is delivered: a press can come before send() returns.
        shown = _Shown(chat_id, None, event.question, event.tool_call_id, list(event.options))
        self._open[event.id] = shown
        try:
            shown.message_id = await self.outbox.send(chat_id, OutboxItem("send", body))
        except Undeliverable as exc:  # unanswerable: the turn stops waiting at once
            log.warning("could not show a question: %s", exc.state)
            self._open.pop(event.id, None)
            self.asks.undelivered(event.id)
            return
        if shown.closed is not None:  # closed while it was on its way
            await self._edit_closed(shown, shown.closed)

    async def close_for_tool(self, tool_call_id: str, note: str, among: set[str]) -> None:
        """The tool finished while its question (one of ``among``, the view's own) was
        still open: it was not answered."""
        for ask_id in [
            k for k, v in self._open.items() if v.tool_call_id == tool_call_id and k in among
        ]:
            await self._close(ask_id, note)

    async def close_asks(self, ask_ids: set[str], note: str) -> None:
        """Close these questions (a view's own) if still open. Other questions in the same
        chat (a cron job's, a QQ turn's) are not this turn's to close."""
        for ask_id in [k for k in self._open if k in ask_ids]:
            await self._close(ask_id, note)

    async def _close(self, ask_id: str, note: str, message_id: int | None = None) -> None:
        shown = self._open.pop(ask_id, None)
        if shown is None:
            return
        if shown.message_id is None:
            shown.message_id = message_id  # the pressed message, when a press closes it
        if shown.message_id is None:
            shown.closed = note  # show() edits it once the message id is known
            return
        await self._edit_closed(shown, note)

    async def _edit_closed(self, shown: _Shown, note: str) -> None:
        assert shown.message_id is not None
        text = f"{shown.text}\n\n{note}"
        await self.outbox.put(shown.chat_id, [edit_item(shown.message_id, text)])

    async def on_press(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None:
            return
        ask_id, choice = _parse(query.data or "")
        result = self.asks.answer(ask_id, choice) if ask_id else AnswerResult.UNKNOWN
        if result is AnswerResult.RESOLVED:
            shown = self._open.get(ask_id)
            option = shown.options[choice] if shown else ""
            # _close takes it off the board before its first await, so the resumed turn's
            # view cannot close it as unanswered.
            pressed = query.message.message_id if query.message else None
            await self._close(ask_id, t("tg.ask_chosen", option=option), pressed)
            await self._answer_query(query.id, t("tg.ask_chosen", option=option))
            return
        await self._answer_query(query.id, t("tg.ask_gone"))
        self._open.pop(ask_id, None)
        message = query.message
        if message is not None:  # a stale question: take its buttons away
            await self.outbox.put(message.chat.id, [edit_item(message.message_id, None)])

    async def _answer_query(self, query_id: str, text: str) -> None:
        with contextlib.suppress(TelegramError):
            await self.bot.answer_callback_query(query_id, text=text)


def _parse(data: str) -> tuple[str, int]:
    prefix, _, rest = data.partition(":")
    ask_id, _, index = rest.partition(":")
    if prefix != PREFIX or not ask_id or not index.isdigit():
        return "", -1
    return ask_id, int(index)
