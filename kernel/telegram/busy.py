"""A message that arrives while the chat is busy (issue 34, item 7): never silent.

A busy chat does not queue on its own, but nothing is dropped unseen either:

- **Held**: the message's inbox row goes ``waiting`` (``mailroom.py``: on record, run
  or dropped by the owner, offered again after a restart) and the busy window's ONE
  notice counts what arrived ("收到 3 条新消息"), edited as more come, with
  [▶ 答完后处理] (``busy:run``: the messages this notice held, in order, one turn after
  another once the current turn ends) and [🗑 丢弃] (``busy:drop``). Once pressed, the
  notice is done: a later message gets a new one. Each held row records the session
  it was sent in (▶ runs it there). Which rows a notice held is known to this process
  only: after a restart a press of an old notice acts on none and points to the notice
  of every waiting message (``mailroom.py``).
- **An answer**: while the turn waits on an ``ask_user`` question shown in the chat, a
  text answers it in the owner's words (the question's message says so).
- **A decline**: while the turn waits on any other button (an approval, a CLI's
  permission prompt, the budget question), or on a question the message cannot answer
  (a photo), the turn is stopped (the question is not approved: nothing runs unasked)
  and the message runs as a new turn once it has wound down; a notice says which.
- **Free at once**: after /cancel (or a decline) the stopped turn may still wind down
  (a CLI's progress line, the placeholder's removal); a message then is not "busy": it
  runs as soon as that is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from telegram import Message

from kernel.agent.agent import UserInput
from kernel.core.asks import AnswerResult, Question
from kernel.core.errors import BusyError
from kernel.core.i18n import t
from kernel.telegram.outbox import Ticket, edit_item, plain_items

if TYPE_CHECKING:
    from kernel.telegram.channel import TelegramChannel

log = logging.getLogger(__name__)

RUN, DROP = "busy:run", "busy:drop"
WIND_DOWN = 120.0  # seconds a stopped turn may take to end before a message is held
REMEMBERED = 50  # unpressed notices whose rows are remembered (older: as after a restart)

Window = asyncio.Task[None] | None  # the view task whose busy window it is


def held_markup() -> dict[str, object]:
    return {
        "inline_keyboard": [
            [
                {"text": t("tg.busy.run"), "callback_data": RUN},
                {"text": t("tg.busy.drop"), "callback_data": DROP},
            ]
        ]
    }


class BusyNotice:
    """The one notice of a busy window, edited to count the messages held in it."""

    def __init__(self, channel: TelegramChannel, chat_id: int, window: Window) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.window = window
        self.rows: list[int] = []  # the inbox rows it holds, in order
        self.pressed = False
        self._message_id: int | None = None
        self._ticket: Ticket | None = None
        self._shown = 0
        self._sent = False

    @property
    def count(self) -> int:
        return len(self.rows)

    async def message_id(self) -> int | None:
        """Its message, once delivered (None: not sent, or not delivered)."""
        if self._message_id is None and self._ticket is not None:
            (message_id,) = await self._ticket.wait()
            return message_id
        return self._message_id

    async def add(self, row: int) -> None:
        self.rows.append(row)
        if not self._sent:
            self._sent = True
            self._shown = self.count
            text = t("tg.busy.held", count=self.count)
            ticket = await self.channel.outbox.put(
                self.chat_id, plain_items(text, markup=held_markup())
            )
            self._ticket = ticket
            self.channel.spawn(self._learn(ticket), "tg-busy-notice")
        elif self._message_id is not None:
            await self._edit()

    async def _learn(self, ticket: Ticket) -> None:
        """Once the notice is delivered: its id, and the count that grew meanwhile."""
        (message_id,) = await ticket.wait()
        self._message_id = message_id
        if message_id is not None and self.count != self._shown and not self.pressed:
            await self._edit()

    async def _edit(self) -> None:
        assert self._message_id is not None
        self._shown = self.count
        text = t("tg.busy.held", count=self.count)
        edit = edit_item(self._message_id, text, markup=held_markup())
        await self.channel.outbox.put(self.chat_id, [edit])


class BusyDesk:
    """What the chat does with a message that arrives while it is busy."""

    def __init__(self, channel: TelegramChannel, conversation_of: Callable[[int], str]) -> None:
        self.channel = channel
        self.conversation_of = conversation_of  # inbound.py's: a chat's conversation
        self._notices: dict[int, BusyNotice] = {}  # chat → its current window's notice
        self._unpressed: list[BusyNotice] = []  # every notice still to be pressed
        self._pressed: deque[int] = deque(maxlen=REMEMBERED)  # their message ids, once pressed
        self._stopped: dict[int, Window] = {}  # chat → the window /cancel (or we) stopped

    def window_began(self, chat_id: int) -> None:
        """A new turn is shown: its busy window starts with no notice and not stopped."""
        self._notices.pop(chat_id, None)
        self._stopped.pop(chat_id, None)

    def stopped(self, chat_id: int) -> None:
        """The chat's turn was stopped (/cancel): what comes next is not "busy"."""
        self._stopped[chat_id] = self.channel.inbound.views.get(chat_id)

    async def pressed(self, chat_id: int, message_id: int) -> list[int] | None:
        """The owner pressed the notice ``message_id``: the rows it held (None when this
        process does not know it: a restart since). A later message gets a new notice."""
        notice = None
        for candidate in list(self._unpressed):  # in order: the pressed one is delivered
            if await candidate.message_id() == message_id:
                notice = candidate
                break
        if notice is None:
            return [] if message_id in self._pressed else None  # a second press: nothing
        self._pressed.append(message_id)
        notice.pressed = True
        self._unpressed.remove(notice)
        if self._notices.get(chat_id) is notice:
            del self._notices[chat_id]
        return list(notice.rows)

    def holding(self) -> set[int]:
        """The rows held by busy notices not pressed yet (the offline notice leaves them)."""
        return {row for notice in self._unpressed for row in notice.rows}

    async def arrived(self, chat_id: int, message: Message, row: int | None) -> None:
        inbound = self.channel.inbound
        window = inbound.views.get(chat_id)
        if chat_id in self._stopped and self._stopped[chat_id] is window:
            self._follow(chat_id, message, row)
            return
        questions = self.channel.board.pending(chat_id, self.conversation_of(chat_id))
        if questions and await self._answer(questions, message, row):
            return
        if questions:
            await self._decline(chat_id, questions, message, row)
            return
        await self.hold(chat_id, row)

    async def _answer(self, questions: list[Question], message: Message, row: int | None) -> bool:
        """A text while an ``ask_user`` question waits: the owner's answer in words."""
        if not message.text or any(q.kind != "question" for q in questions):
            return False
        result = self.channel.kernel.agent.asks.answer_text(questions[0].id, message.text)
        if result is not AnswerResult.RESOLVED:
            return False
        log.info("a message answered the question the turn waited on")
        if row is not None:
            await self.channel.mailroom.close(row, "answered")
        return True

    async def _decline(
        self, chat_id: int, questions: list[Question], message: Message, row: int | None
    ) -> None:
        """Stop the turn held on the owner's button; the message runs instead."""
        kinds = {q.kind for q in questions}
        if "budget" in kinds:
            text = t("tg.busy.budget_stopped")
        elif kinds <= {"question"}:
            text = t("tg.busy.unanswered")
        else:
            text = t("tg.busy.declined")
        self._stopped[chat_id] = self.channel.inbound.views.get(chat_id)
        self.channel.kernel.agent.sessions.cancel(self.conversation_of(chat_id))
        log.info("a message stopped the turn waiting on the owner (%s)", ",".join(sorted(kinds)))
        await self.channel.outbox.put(chat_id, plain_items(text))
        self._follow(chat_id, message, row)

    def _follow(self, chat_id: int, message: Message, row: int | None) -> None:
        """Run ``message`` once the stopped turn has wound down; meanwhile it is the
        chat's busy window (a message after it is held)."""
        inbound = self.channel.inbound
        before = inbound.views.get(chat_id)
        task = self.channel.spawn(
            self._after(chat_id, before, message, row), "tg-after-stop", for_owner=True
        )
        inbound.views[chat_id] = task
        self._stopped.pop(chat_id, None)

    async def _after(self, chat_id: int, before: Window, message: Message, row: int | None) -> None:
        inbound = self.channel.inbound
        try:
            if before is not None and not before.done():
                await asyncio.wait({before})
            await self.channel.kernel.agent.sessions.wait_idle(
                self.conversation_of(chat_id), WIND_DOWN
            )
        except BusyError:  # the stopped turn does not end: held like any busy message
            await self.hold(chat_id, row)
            return
        except asyncio.CancelledError:  # /cancel while it waits: the owner's choice
            if row is not None and not self.channel.stopping:
                await asyncio.shield(self.channel.mailroom.close(row, "cancelled"))
            raise
        if message.text:
            await inbound.start(chat_id, UserInput(message.text, channel="telegram"), row=row)
        else:
            await inbound.prepare(chat_id, message, row)

    async def hold(self, chat_id: int, row: int | None) -> None:
        """Keep the message waiting for the owner's choice, counted by the notice."""
        mailroom = self.channel.mailroom
        window = self.channel.inbound.views.get(chat_id)
        if row is None or not await mailroom.hold(row):
            # Not on record (the store failed): nothing can run it later; say so once.
            if not self._told(chat_id, window):
                await self.channel.outbox.put(chat_id, plain_items(t("turn.busy")))
            return
        await self._note_session(chat_id, row)
        notice = self._notices.get(chat_id)
        if notice is None or notice.window is not window or notice.pressed:
            notice = BusyNotice(self.channel, chat_id, window)
            self._notices[chat_id] = notice
            self._unpressed = [*self._unpressed[-REMEMBERED + 1 :], notice]
        await notice.add(row)

    async def _note_session(self, chat_id: int, row: int) -> None:
        """The held message belongs to the conversation's current session: ▶ (after a
        restart too) runs it there, not in whatever session is current by then."""
        session = self.channel.kernel.agent.sessions.current_session(self.conversation_of(chat_id))
        if session is None:
            return
        try:
            await self.channel.mailroom.mailbox.set_session(row, session)
        except Exception as exc:  # ▶ then runs it in the chat's current session
            log.warning("recording a held message's session failed: %s", type(exc).__name__)

    def _told(self, chat_id: int, window: Window) -> bool:
        notice = self._notices.get(chat_id)
        told = notice is not None and notice.window is window
        if not told:
            self._notices[chat_id] = BusyNotice(self.channel, chat_id, window)
        return told
