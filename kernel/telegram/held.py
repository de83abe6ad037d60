"""The busy notices (``busy.py``) and the inbox rows each holds: state the mailroom
owns, since the notices' buttons act on inbox rows (``mailroom.py``).

A busy window's ONE notice counts the messages held in it ("收到 3 条新消息"), edited as
more come, with [▶ 答完后处理] (``busy:run``) and [🗑 丢弃] (``busy:drop``). Which rows a
notice held is known to this process only: after a restart a press of an old notice
acts on none (``mailroom.py``). A held message's row records the session it was sent
in: ▶ (after a restart too) runs it there.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from kernel.core.i18n import t
from kernel.store.mailbox import Mailbox
from kernel.telegram.deps import Deps, conversation_of
from kernel.telegram.outbox import Outbox, Ticket, edit_item, plain_items

log = logging.getLogger(__name__)

RUN, DROP = "busy:run", "busy:drop"
REMEMBERED = 50  # unpressed notices whose rows are remembered (older: as after a restart)

Window = asyncio.Task[None] | None  # the view task whose busy window it is
Spawn = Callable[[Coroutine[Any, Any, None], str], object]


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

    def __init__(self, outbox: Outbox, spawn: Spawn, chat_id: int, window: Window) -> None:
        self.outbox = outbox
        self.spawn = spawn
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
            ticket = await self.outbox.put(self.chat_id, plain_items(text, markup=held_markup()))
            self._ticket = ticket
            self.spawn(self._learn(ticket), "tg-busy-notice")
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
        await self.outbox.put(self.chat_id, [edit])


class Holds:
    """Every busy notice not pressed yet and the rows it holds; each chat's current one."""

    def __init__(self, deps: Deps, mailbox: Mailbox) -> None:
        self.deps = deps
        self.mailbox = mailbox
        self.current: dict[int, BusyNotice] = {}  # chat → its current window's notice
        self._unpressed: list[BusyNotice] = []  # every notice still to be pressed
        self._pressed: deque[int] = deque(maxlen=REMEMBERED)  # their message ids, once pressed

    def add(self, chat_id: int, notice: BusyNotice) -> None:
        self.current[chat_id] = notice
        self._unpressed = [*self._unpressed[-REMEMBERED + 1 :], notice]

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
        if self.current.get(chat_id) is notice:
            del self.current[chat_id]
        return list(notice.rows)

    def holding(self) -> set[int]:
        """The rows held by busy notices not pressed yet (the offline notice leaves them)."""
        return {row for notice in self._unpressed for row in notice.rows}

    async def hold(self, chat_id: int, row: int | None) -> None:
        """Keep the message waiting for the owner's choice, counted by the notice of the
        chat's busy window."""
        deps = self.deps
        window = deps.views.get(chat_id)
        now = deps.clock.now()
        if row is None or not await self.mailbox.settle(row, "waiting", now, only_from=("open",)):
            # Not on record (the store failed): nothing can run it later; say so once.
            if not self._told(chat_id, window):
                await deps.outbox.put(chat_id, plain_items(t("turn.busy")))
            return
        await self._note_session(chat_id, row)
        notice = self.current.get(chat_id)
        if notice is None or notice.window is not window or notice.pressed:
            notice = self._notice(chat_id, window)
            self.add(chat_id, notice)
        await notice.add(row)

    def _notice(self, chat_id: int, window: Window) -> BusyNotice:
        return BusyNotice(self.deps.outbox, self.deps.life.spawn, chat_id, window)

    async def _note_session(self, chat_id: int, row: int) -> None:
        """The held message belongs to the conversation's current session: ▶ (after a
        restart too) runs it there, not in whatever session is current by then."""
        session = self.deps.agent.sessions.current_session(conversation_of(chat_id))
        if session is None:
            return
        try:
            await self.mailbox.set_session(row, session)
        except Exception as exc:  # ▶ then runs it in the chat's current session
            log.warning("recording a held message's session failed: %s", type(exc).__name__)

    def _told(self, chat_id: int, window: Window) -> bool:
        notice = self.current.get(chat_id)
        told = notice is not None and notice.window is window
        if not told:
            self.current[chat_id] = self._notice(chat_id, window)
        return told
