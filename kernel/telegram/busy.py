"""A message that arrives while the chat is busy (issue 34, item 7): never silent.

A busy chat does not queue on its own, but nothing is dropped unseen either:

- **Held**: the message's inbox row goes ``waiting`` (the mailroom holds it,
  ``held.py``: on record, run or dropped by the owner, offered again after a restart)
  and the busy window's ONE
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
  (a CLI's progress line, a placeholder's removal); a message then is not "busy": it
  runs as soon as that is done.

Like ``inbound.py``, the desk returns an :data:`~kernel.telegram.outcome.Outcome` for
the message's inbox row; the mailroom applies it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from telegram import Message

from kernel.core.asks import AnswerResult, Question
from kernel.core.errors import BusyError
from kernel.core.i18n import t
from kernel.telegram.deps import Deps, conversation_of
from kernel.telegram.held import Holds, Window
from kernel.telegram.outbox import plain_items
from kernel.telegram.outcome import ANSWERED, Hold, Later, Outcome, cut

log = logging.getLogger(__name__)

WIND_DOWN = 120.0  # seconds a stopped turn may take to end before a message is held
# How a message held back runs once the chat is free (``inbound.py``'s).
Run = Callable[[int, Message, "int | None"], Awaitable[Outcome]]


class BusyDesk:
    """What the chat does with a message that arrives while it is busy."""

    def __init__(self, deps: Deps, holds: Holds) -> None:
        self.deps = deps
        self.holds = holds  # the notices and their rows: the mailroom's state
        self._stopped: dict[int, Window] = {}  # chat → the window /cancel (or we) stopped

    def window_began(self, chat_id: int) -> None:
        """A new turn is shown: its busy window starts with no notice and not stopped."""
        self.holds.current.pop(chat_id, None)
        self._stopped.pop(chat_id, None)

    def stopped(self, chat_id: int) -> None:
        """The chat's turn was stopped (/cancel): what comes next is not "busy"."""
        self._stopped[chat_id] = self.deps.views.get(chat_id)

    async def arrived(self, chat_id: int, message: Message, row: int | None, run: Run) -> Outcome:
        """``run``: how the message runs once a stopped turn has wound down."""
        window = self.deps.views.get(chat_id)
        if chat_id in self._stopped and self._stopped[chat_id] is window:
            return self._follow(chat_id, message, row, run)
        questions = self.deps.board.pending(chat_id, conversation_of(chat_id))
        if questions and self._answer(questions, message):
            return ANSWERED
        if questions:
            return await self._decline(chat_id, questions, message, row, run)
        return Hold()

    def _answer(self, questions: list[Question], message: Message) -> bool:
        """A text while an ``ask_user`` question waits: the owner's answer in words."""
        if not message.text or any(q.kind != "question" for q in questions):
            return False
        result = self.deps.agent.asks.answer_text(questions[0].id, message.text)
        if result is not AnswerResult.RESOLVED:
            return False
        log.info("a message answered the question the turn waited on")
        return True

    async def _decline(
        self, chat_id: int, questions: list[Question], message: Message, row: int | None, run: Run
    ) -> Outcome:
        """Stop the turn held on the owner's button; the message runs instead."""
        kinds = {q.kind for q in questions}
        if "budget" in kinds:
            text = t("tg.busy.budget_stopped")
        elif kinds <= {"question"}:
            text = t("tg.busy.unanswered")
        else:
            text = t("tg.busy.declined")
        self._stopped[chat_id] = self.deps.views.get(chat_id)
        self.deps.agent.sessions.cancel(conversation_of(chat_id))
        log.info("a message stopped the turn waiting on the owner (%s)", ",".join(sorted(kinds)))
        await self.deps.outbox.put(chat_id, plain_items(text))
        return self._follow(chat_id, message, row, run)

    def _follow(self, chat_id: int, message: Message, row: int | None, run: Run) -> Later:
        """Run ``message`` once the stopped turn has wound down; meanwhile it is the
        chat's busy window (a message after it is held)."""
        before = self.deps.views.get(chat_id)
        self._stopped.pop(chat_id, None)
        work = self._after(chat_id, before, message, row, run)
        return Later(work, "tg-after-stop", for_owner=True)

    async def _after(
        self, chat_id: int, before: Window, message: Message, row: int | None, run: Run
    ) -> Outcome:
        try:
            if before is not None and not before.done():
                await asyncio.wait({before})
            await self.deps.agent.sessions.wait_idle(conversation_of(chat_id), WIND_DOWN)
        except BusyError:  # the stopped turn does not end: held like any busy message
            return Hold()
        except asyncio.CancelledError as exc:  # /cancel while it waits: the owner's choice
            return cut(exc, None if self.deps.life.stopping else "cancelled")
        return await run(chat_id, message, row)
