"""Questions from a turn as messages with inline buttons, and the owner's presses.

``ask_user`` events become a message whose buttons carry ``ask:<id>:<option>``. A press
(the gate lets only the owner's through) resolves the waiting question and the message
is closed with the choice. A question that stopped counting otherwise is closed the
moment its wait ends (the ask registry tells the board: a timeout, /cancel, the
delegation or turn ending, an answer given elsewhere), and its turn's view closes what
is left when the tool or turn ends. Buttons never stay live on a question nobody waits
for. A Markdown question (a CLI's permission prompt: a command in a code block, a diff)
is shown as Telegram HTML and keeps that form in its closing edit; a permission prompt
closes with what its answer meant ("✅ Allowed once", "⌛ Timed out: denied"). The
question and its closing edits go through the durable outbox (in order with the rest of
the chat); the answers to presses go directly.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Literal

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ParseMode
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from kernel.core.asks import Answer, AnswerResult, AskOutcome, AskRegistry, Question
from kernel.core.events import AskUser
from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.delegate.approvals import ALLOW_ONCE, ALLOW_TASK, meaning
from kernel.store.mailbox import OutboxItem
from kernel.telegram.outbox import Outbox, Undeliverable, edit_item
from kernel.telegram.render import escape, render_markdown
from kernel.telegram.split import LIMIT, split_html, utf16_len

log = logging.getLogger(__name__)

PREFIX = "ask"
PERMISSION = "permission"  # the kind of a CLI's permission prompt
# Room left in a Markdown question's last chunk for its closing note.
NOTE_ROOM = 300
STOP_WAIT = 5.0  # seconds the board's closing edits get at stop
QUOTED = 60  # characters of a typed answer in the question's closing note

# Why a question closed without a press.
Reason = Literal["unanswered", "timeout", "cancelled"]


@dataclass(slots=True)
class _Shown:
    chat_id: int
    message_id: int | None  # None until the outbox delivered the question
    text: str  # as sent: plain text, or HTML when ``html``
    tool_call_id: str
    options: list[str]
    kind: str = "question"
    html: bool = False
    closed: str | None = None  # the closing note, when it came before the message id


def question_body(event: AskUser) -> tuple[list[str], str | None]:
    """The question's text as Telegram takes it: its chunks (the buttons go on the last)
    and the parse mode. A Markdown question is rendered to HTML; one too long for a
    message is split, leaving room in the last chunk for the closing note. A question
    with details (an approval's full arguments) shows them one tap away, in a collapsed
    quote: nothing to press or wait for, and it still opens after a restart."""
    if event.details and not event.markdown:
        return [_with_details(event.question, event.details)], ParseMode.HTML
    if not event.markdown:
        return [event.question], None
    chunks = split_html(render_markdown(event.question), LIMIT - NOTE_ROOM)
    return chunks or [escape(event.question)], ParseMode.HTML


class AskBoard:
    """Open questions shown in Telegram, shared by turn views and the callback handler."""

    def __init__(self, bot: Bot, outbox: Outbox, asks: AskRegistry) -> None:
        self.bot = bot
        self.outbox = outbox
        self.asks = asks
        self._open: dict[str, _Shown] = {}
        self._closing = TaskSet("ask board")  # closing edits of questions that ended
        self._unlisten = asks.on_end(self._ended)

    async def stop(self) -> None:
        """Stop listening; the closing edits under way get a bounded moment."""
        self._unlisten()
        await self._closing.wait(STOP_WAIT)
        await self._closing.close(1.0)

    async def show(self, chat_id: int, event: AskUser) -> None:
        buttons = [
            InlineKeyboardButton(option, callback_data=f"{PREFIX}:{event.id}:{index}")
            for index, option in enumerate(event.options)
        ]
        # A permission prompt's three answers each get a row: their words are long.
        width = 1 if event.kind == PERMISSION else 2
        rows = [buttons[i : i + width] for i in range(0, len(buttons), width)]
        markup = InlineKeyboardMarkup(rows).to_dict()
        chunks, mode = question_body(event)
        *before, text = chunks
        # On the board before it is delivered: a press can come before send() returns.
        shown = _Shown(
            chat_id,
            None,
            text,
            event.tool_call_id,
            list(event.options),
            kind=event.kind,
            html=mode is not None,
        )
        self._open[event.id] = shown
        try:
            if before:
                await self.outbox.put(
                    chat_id, [OutboxItem("send", {"text": c, "parse_mode": mode}) for c in before]
                )
            body = {"text": text, "parse_mode": mode, "reply_markup": markup}
            shown.message_id = await self.outbox.send(chat_id, OutboxItem("send", body))
        except Undeliverable as exc:  # unanswerable: the turn stops waiting at once
            log.warning("could not show a question: %s", exc.state)
            self._open.pop(event.id, None)
            self.asks.undelivered(event.id)
            return
        if shown.closed is not None:  # closed while it was on its way
            await self._edit_closed(shown, shown.closed)

    async def close_for_tool(self, tool_call_id: str, reason: Reason, among: set[str]) -> None:
        """The tool finished while its question (one of ``among``, the view's own) was
        still open: it was not answered."""
        for ask_id in [
            k for k, v in self._open.items() if v.tool_call_id == tool_call_id and k in among
        ]:
            await self._close(ask_id, reason)

    async def close_asks(self, ask_ids: set[str], reason: Reason) -> None:
        """Close these questions (a view's own) if still open. Other questions in the same
        chat (a cron job's, a QQ turn's) are not this turn's to close."""
        for ask_id in [k for k in self._open if k in ask_ids]:
            await self._close(ask_id, reason)

    def _ended(self, question: Question, answer: Answer | None) -> None:
        """The ask registry: ``question``'s wait ended. Still on the board means no press
        closed it: it timed out, was cancelled, or was answered elsewhere (the sidecar,
        ``kernel chat``). Taken off the board now, so no later close words it again."""
        shown = self._open.pop(question.id, None)
        if shown is None:
            return
        if answer is None:
            note = _note(shown, "cancelled")
        elif answer.outcome is AskOutcome.TIMEOUT:
            note = _note(shown, "timeout")
        elif answer.outcome is AskOutcome.ANSWERED and answer.text is not None:
            note = t("tg.ask_typed", text=_quoted(answer.text))
        elif answer.outcome is AskOutcome.ANSWERED and answer.choice is not None:
            note = _chosen(shown, answer.choice)
        else:  # undelivered: show() took it off already
            return
        self._closing.spawn(self._finish(shown, note), "ask-close")

    def pending(self, chat_id: int, conversation: str) -> list[Question]:
        """The questions shown in this chat that a turn of ``conversation`` waits on
        (an approval, the budget question, ``ask_user``, a CLI's permission prompt)."""
        found = []
        for ask_id, shown in self._open.items():
            question = self.asks.get(ask_id)
            if shown.chat_id == chat_id and question and question.conversation == conversation:
                found.append(question)
        return found

    async def _close(self, ask_id: str, reason: Reason) -> None:
        shown = self._open.pop(ask_id, None)
        if shown is not None:
            await self._finish(shown, _note(shown, reason))

    async def _finish(self, shown: _Shown, note: str, message_id: int | None = None) -> None:
        if shown.message_id is None:
            shown.message_id = message_id  # the pressed message, when a press closes it
        if shown.message_id is None:
            shown.closed = note  # show() edits it once the message id is known
            return
        await self._edit_closed(shown, note)

    async def _edit_closed(self, shown: _Shown, note: str) -> None:
        assert shown.message_id is not None
        if shown.html:
            item = edit_item(
                shown.message_id, f"{shown.text}\n\n{escape(note)}", parse_mode=ParseMode.HTML
            )
        else:
            item = edit_item(shown.message_id, f"{shown.text}\n\n{note}")
        await self.outbox.put(shown.chat_id, [item])

    async def on_press(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None:
            return
        ask_id, choice = _parse(query.data or "")
        result = self.asks.answer(ask_id, choice) if ask_id else AnswerResult.UNKNOWN
        if result is AnswerResult.RESOLVED:
            # Off the board before the first await, so neither the registry's listener
            # nor the resumed turn's view can close it as unanswered.
            shown = self._open.pop(ask_id, None)
            note = _chosen(shown, choice) if shown else t("tg.ask_chosen", option="")
            if shown is not None:
                pressed = query.message.message_id if query.message else None
                await self._finish(shown, note, pressed)
            await self._answer_query(query.id, note)
            return
        await self._answer_query(query.id, t("tg.ask_gone"))
        if result is AnswerResult.BAD_OPTION:  # a made-up option: the question still waits
            return
        self._open.pop(ask_id, None)
        message = query.message
        if message is not None:  # a stale question: take its buttons away
            await self.outbox.put(message.chat.id, [edit_item(message.message_id, None)])

    async def _answer_query(self, query_id: str, text: str) -> None:
        with contextlib.suppress(TelegramError):
            await self.bot.answer_callback_query(query_id, text=text)


def _with_details(question: str, details: str) -> str:
    """The question, then its details in an expandable quote, within one message with
    room for the closing note."""
    label = t("tg.ask_details")
    room = LIMIT - NOTE_ROOM - utf16_len(question) - utf16_len(label) - 4
    if utf16_len(details) > room:
        details = details[: max(0, room - 2)]
        while utf16_len(details) > room - 2:
            details = details[:-1]
        details += " …"
    quoted = f"{escape(label)}\n{escape(details)}"
    return f"{escape(question)}\n<blockquote expandable>{quoted}</blockquote>"


def _chosen(shown: _Shown, choice: int) -> str:
    if shown.kind == PERMISSION:
        chosen = meaning(len(shown.options), choice)
        if chosen == ALLOW_ONCE:
            return t("tg.perm_allowed_once")
        if chosen == ALLOW_TASK:
            return t("tg.perm_allowed_task")
        return t("tg.perm_denied")
    option = shown.options[choice] if 0 <= choice < len(shown.options) else ""
    return t("tg.ask_chosen", option=option)


def _quoted(text: str) -> str:
    """The start of a typed answer, as the question's closing note shows it."""
    line = " ".join(text.split())
    return line if len(line) <= QUOTED else line[: QUOTED - 1] + "…"


def _note(shown: _Shown, reason: Reason) -> str:
    if shown.kind == PERMISSION:
        return t("tg.perm_timeout") if reason == "timeout" else t("tg.perm_cancelled")
    if reason == "cancelled":
        return t("tg.ask_cancelled")
    return t("tg.ask_unanswered")


def _parse(data: str) -> tuple[str, int]:
    prefix, _, rest = data.partition(":")
    ask_id, _, index = rest.partition(":")
    if prefix != PREFIX or not ask_id or not index.isdigit():
        return "", -1
    return ask_id, int(index)
