"""The owner's updates on record (issue 15): every one is taken into the ``inbox`` table
before it is handled, so nothing the owner sends is lost or handled twice.

- **Taken in**: the gate calls :meth:`Mailroom.admit` for each owner update; a repeat
  ``update_id`` (Telegram delivers again after a crash) is not handled again. A command
  is settled in the transaction that queues its reply (``commands.py``; with the
  follow-up's, when one comes), a button press once handled (:meth:`Mailroom.after`); a
  message stays ``open`` through its turn and is settled with its reply or notice: the
  mailroom hands it to the inbound handler (:meth:`Mailroom.serve`) and applies the
  outcome returned (``outcome.py``): closes the row, queues the notice that settles it,
  holds it (``held.py``), or runs the work still to do as the chat's busy task.
- **Waiting**: a message in the first batch, dated before polling began, arrived while
  Kernel was down; one queued through a Bot API outage of ``LATE_AFTER`` seconds or
  more, or dated that long before a message already seen, is treated the same (judged
  by Telegram's dates and polling's outages, ``polling.py``, not the host's clock; a
  command is never held). It is recorded ``waiting`` and not handled; once the first
  batch is taken in, ONE notice tells the owner how many wait and since when, with two
  buttons: process them now (in order, one turn after another) or drop them. The
  state is in the database, so the buttons still work after a restart. A message held
  while the chat was busy (``busy.py``) waits the same way, offered by the busy
  notice's buttons (they act on what that notice held; the offline notice's on the
  rest).
- **Interrupted**: at start, rows the previous process left ``open`` were cut off by a
  crash or a stop. Each is settled ``interrupted`` with a notice naming the message (a
  new message, which notifies; a silent placeholder it had goes) and a 🔁 button that runs it
  again.
  Commands and presses cut off are closed quietly (🔁 could run /new twice).
- **Again** (``again:<id>``): reopen a settled row (forgetting its placeholder: by now
  that message is the earlier outcome) and run its stored update again; the pressed
  message loses its 🔁.

Public API: :class:`Mailroom`; how its rows read is ``inbox.py``'s.
Message text is the owner's data: it goes to the chat, never to a log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from kernel.core.i18n import t
from kernel.core.turns import Turn
from kernel.store.mailbox import InboxRow, InboxState, Mailbox
from kernel.telegram.deps import Deps
from kernel.telegram.held import DROP as BUSY_DROP
from kernel.telegram.held import RUN as BUSY_RUN
from kernel.telegram.held import Holds
from kernel.telegram.inbox import accessible, kind_of, named, sent_at
from kernel.telegram.outbox import again_markup, delete_item, edit_item, plain_items
from kernel.telegram.outcome import Close, Hold, Keep, Later, Outcome
from kernel.telegram.polling import SINCE_START
from kernel.telegram.topics import is_topic

log = logging.getLogger(__name__)

CHANNEL = "telegram"
RUN, DROP, AGAIN = "waiting:run", "waiting:drop", "again:"
# waiting:… the offline notice's buttons, busy:… the busy notice's (``busy.py``)
CALLBACK_PATTERN = r"^((waiting|busy):(run|drop)|again:\d{1,18})$"  # an id SQLite can hold
IDLE_POLL = 0.2  # seconds between looks at a busy chat (a turn not shown by a view)
# A message queued this long (seconds: through a Bot API outage, or behind a newer one) is
# handled like one sent while Kernel was down.
LATE_AFTER = 60.0
# The inbound handler (``inbound.py``): a message, its row, its stored row when handled late.
Handler = Callable[[Message, "int | None", "InboxRow | None"], Awaitable[Outcome]]


class Check:
    """Put in PTB's update queue behind a batch: handled once the batch before it is."""


class Mailroom:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.outbox = deps.outbox
        self.mailbox = Mailbox(deps.services.store)
        self.owner = deps.owner
        self.holds = Holds(deps, self.mailbox)  # the busy notices and the rows they hold
        self._handler: Handler | None = None  # the owner's messages go to it (``serve``)
        self.since: float | None = None  # epoch seconds polling began (whole seconds)
        self._handling: dict[int, tuple[InboxRow, asyncio.Future[None] | None]] = {}
        self._replays: dict[int, tuple[InboxRow, asyncio.Future[None]]] = {}  # id(update)
        self._queue: deque[int] = deque()  # rows to run, in order
        self._claimed: set[int] = set()  # queued or running now: never queued twice
        self._reopened: set[int] = set()  # 🔁 rows: open already, to be run
        self._deferred: set[int] = set()  # commands whose reply comes later (follow-up)
        self._runner: asyncio.Task[None] | None = None
        self._checked = False  # the first batch's check was queued
        self._noticed = False  # the first batch's check ran
        self._late = False  # a message was recorded waiting after that
        self.duplicates = 0  # updates Telegram delivered twice
        self._newest: float | None = None  # the newest message date seen (Telegram's)

    def now(self) -> datetime:
        return self.deps.clock.now()

    # ----- start ---------------------------------------------------------------------

    async def recover(self) -> int:
        """Before polling: rows left ``open`` by the previous process were interrupted.
        Each becomes ``interrupted`` with a notice and 🔁, sent anew (it notifies; the
        silent placeholder goes after it). Also takes the time polling begins: older
        messages arrived while down."""
        self.since = float(int(time.time()))
        rows = await self.mailbox.inbox_rows(CHANNEL, ["open"])
        for row in rows:
            if row.kind in ("callback", "command"):
                # A press or command cut off: told nothing (a command's 🔁 could run /new
                # twice); the owner sends it again if its reply never came.
                await self.mailbox.settle(row.id, "interrupted", self.now())
                continue
            text = t("tg.interrupted_turn", what=named(row))
            # A new message, which notifies (the silent placeholder goes after it).
            items = [delete_item(message_id) for message_id in row.cleanup]
            items += plain_items(text, markup=again_markup(row.id))
            if row.placeholder_id is not None:
                items.append(delete_item(row.placeholder_id))
            await self.outbox.put(int(row.chat_id), items, settle=(row.id, "interrupted"))
        told = [row for row in rows if row.kind not in ("callback", "command")]
        if told:
            log.info("%d turns were interrupted by the last stop; the owner is told", len(told))
        return len(told)

    def poll_starting(self, answered: int) -> None:
        """Called as each getUpdates starts, with how many were answered so far. The
        updater queues a batch before it asks again: a check queued now runs after it."""
        if answered and (not self._checked or self._late):
            self._checked, self._late = True, False
            self.deps.app.update_queue.put_nowait(Check())

    async def on_check(self, check: Check, context: ContextTypes.DEFAULT_TYPE) -> None:
        self._noticed = True
        await self.notify_waiting()

    async def notify_waiting(self) -> None:
        """The offline notice: every waiting message but those a busy notice holds."""
        rows = await self.mailbox.inbox_rows(CHANNEL, ["waiting"])
        holding = self.holds.holding()
        rows = [row for row in rows if row.id not in holding]
        if not rows:
            return
        earliest = min(sent_at(row) for row in rows)
        text = t("tg.waiting.notice", count=len(rows), earliest=self._clock_time(earliest))
        markup = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(t("tg.waiting.run"), callback_data=RUN),
                    InlineKeyboardButton(t("tg.waiting.drop"), callback_data=DROP),
                ]
            ]
        ).to_dict()
        await self.outbox.put(self.owner, plain_items(text, markup=markup))
        log.info("%d messages arrived while Kernel was down; the owner is asked", len(rows))

    def _clock_time(self, when: datetime) -> str:
        zone = ZoneInfo(self.deps.config.general.timezone)
        local = when.astimezone(zone)
        today = self.now().astimezone(zone).date()
        return local.strftime("%H:%M" if local.date() == today else "%m-%d %H:%M")

    # ----- taking updates in ---------------------------------------------------------

    async def admit(self, update: Update) -> bool:
        """Record an owner's update before it is handled; False: do not handle it now
        (a repeat, a message that arrived while Kernel was down, or Kernel stopping)."""
        replay = self._replays.pop(id(update), None)
        if replay is not None:
            if self.deps.life.stopping:  # left open: the next start tells the owner
                replay[1].set_result(None)
                return False
            self._handling[update.update_id] = replay
            return True
        kind = kind_of(update)
        message = update.message
        stopping = self.deps.life.stopping
        if stopping and message is None:
            return False  # a press while stopping: the owner presses again
        late = message is not None and self._late_message(update, message, kind)
        waiting = stopping or late
        try:
            row = await self.mailbox.take_in(
                CHANNEL,
                str(update.effective_chat.id if update.effective_chat else self.owner),
                update_id=update.update_id,
                message_id=message.message_id if message else None,
                kind=kind,
                payload=update.to_dict(),
                now=self.now(),
                state="waiting" if waiting else "open",
            )
        except Exception as exc:  # the store failed: answering beats losing the message
            log.error("recording update %d failed: %s", update.update_id, type(exc).__name__)
            if waiting:  # not handled now and not on record: the owner must hear of it
                await self._unrecorded(exc)
            return not waiting
        if row is None:
            self.duplicates += 1
            log.info("update %d was delivered again; not handled twice", update.update_id)
            return False
        if waiting:
            self._late = self._late or self._noticed
            return False
        self._handling[update.update_id] = (row, None)
        return True

    async def _unrecorded(self, exc: BaseException) -> None:
        outbox = self.outbox
        words = await outbox.trouble_words(exc)
        await outbox.tell_directly(
            self.owner, words or t("turn.internal_error", kind=type(exc).__name__)
        )

    async def unreadable(self, update: Update, what: str) -> None:
        """The owner sent something Kernel's Telegram library cannot read (a message
        kind newer than it): on record as failed, and the owner told how to resend."""
        try:
            row = await self.mailbox.take_in(
                CHANNEL,
                str(self.owner),
                update_id=update.update_id,
                message_id=None,
                kind="unreadable",
                payload={"update_id": update.update_id},
                now=self.now(),
            )
        except Exception as exc:
            log.error("recording update %d failed: %s", update.update_id, type(exc).__name__)
            row = None
        settle: tuple[int, InboxState] | None = (row.id, "failed") if row else None
        items = plain_items(t("tg.unreadable", what=what))
        await self.outbox.put(self.owner, items, settle=settle)

    async def edited(self, update: Update) -> None:
        """The owner edited a message: a row waiting, failed, interrupted or answered
        takes the edited text, so "process" or 🔁 runs what the owner means now (a
        message the model refused can be fixed and tried again). An edit is never a
        turn of its own."""
        message = update.edited_message
        if message is None:
            return
        payload = update.to_dict()
        payload["message"] = payload.pop("edited_message")
        try:
            revised = await self.mailbox.revise(
                CHANNEL, str(message.chat.id), message.message_id, payload
            )
        except Exception as exc:
            log.warning("recording an edit failed: %s", type(exc).__name__)
            return
        if revised:
            log.info("message %d was edited; its next run uses the edit", message.message_id)

    def refused(self, update: Update) -> None:
        """The gate refused a replayed update (it cannot, for the owner's own): its run
        ends here rather than waiting for handlers that will not come."""
        replay = self._replays.pop(id(update), None)
        if replay is not None and not replay[1].done():
            replay[1].set_result(None)

    def _late_message(self, update: Update, message: Any, kind: str) -> bool:
        """Judged by Telegram's dates and what polling saw, never the host's clock
        alone (a clock running fast would hold every live message): queued while Kernel
        was down (the first batch, sent before polling began), queued through an outage
        of ``LATE_AFTER`` or more, or sent that long before a message already seen. A
        command is never held: /cancel or /status delivered late still acts."""
        sent = float(message.date.timestamp())
        newest, self._newest = self._newest, max(self._newest or sent, sent)
        if kind == "command":
            return False
        if newest is not None and sent < newest - LATE_AFTER:
            return True
        backlog = self.deps.bot.backlog
        if update.update_id not in backlog:
            return False
        outage = backlog.pop(update.update_id)
        if outage is SINCE_START:
            return self.since is not None and sent < self.since
        return outage >= LATE_AFTER

    def row_id(self, update: Update) -> int | None:
        """The inbox row of the update being handled."""
        entry = self._handling.get(update.update_id)
        return entry[0].id if entry else None

    # ----- a message's handling -------------------------------------------------------

    def serve(self, handler: Handler) -> None:
        self._handler = handler

    async def on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """The owner's message goes to the inbound handler with its row, and the stored
        row when it is handled late (it waited while Kernel was down, or 🔁 runs it
        again); what the handling came to is applied to the row."""
        message = update.message
        if message is None or self._handler is None:
            return
        entry = self._handling.get(update.update_id)
        row = entry[0].id if entry is not None else None
        late = entry[0] if entry is not None and entry[1] is not None else None
        outcome = await self._handler(message, row, late)
        await self.apply(message.chat.id, row, outcome)

    async def apply(self, chat_id: int, row: int | None, outcome: Outcome) -> None:
        """Apply how a message's handling ended (``outcome.py``) to its row (None: not
        on record, when the store failed: the notice is still sent, the work still runs)."""
        if isinstance(outcome, Later):
            turn = outcome.turn
            if turn is not None and row is not None:
                self.deps.life.spawn(self._note_session(turn, row), f"tg-session-{turn.id}")
            work = self._later(chat_id, row, outcome.work)
            task = self.deps.life.spawn(work, outcome.name, for_owner=outcome.for_owner)
            self.deps.views[chat_id] = task
        elif isinstance(outcome, Hold):
            await self.holds.hold(chat_id, row)
        elif isinstance(outcome, Close | Keep):
            error = outcome.error
            if isinstance(outcome, Close):
                closing = self._close_with(chat_id, row, outcome)
                cancelled = isinstance(error, asyncio.CancelledError)  # the close still lands
                await (asyncio.shield(closing) if cancelled else closing)
            if error is not None:
                raise error

    async def _later(
        self, chat_id: int, row: int | None, work: Coroutine[Any, Any, Outcome]
    ) -> None:
        await self.apply(chat_id, row, await work)

    async def _close_with(self, chat_id: int, row: int | None, outcome: Close) -> None:
        if outcome.notice is not None:
            await self.tell(chat_id, outcome.notice, row, outcome.state, again=outcome.again)
        elif row is not None:
            await self.close(row, outcome.state)

    async def _note_session(self, turn: Turn, row: int) -> None:
        """Record the session the message's turn runs in, once the turn knows it: 🔁
        after a restart runs the message there again."""
        placed = asyncio.ensure_future(turn.placed.wait())
        try:
            ended = {turn.task} if turn.task is not None else set()
            await asyncio.wait({placed, *ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            placed.cancel()
        if turn.session_id is None:
            return
        try:
            await self.mailbox.set_session(row, turn.session_id)
        except Exception as exc:  # 🔁 then runs in the chat's current session
            log.warning("recording a message's session failed: %s", type(exc).__name__)

    async def after(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """After the handlers: a command or press is done; a message's turn goes on."""
        if not isinstance(update, Update):
            return
        entry = self._handling.pop(update.update_id, None)
        if entry is None:
            return
        row, done = entry
        later = row.id in self._deferred
        self._deferred.discard(row.id)  # read only here: kept no longer than the update
        try:
            # A command's reply settles its row (``commands.py``); this closes what
            # produced no reply, unless a follow-up is still to come.
            if row.kind in ("command", "callback") and not later:
                await self._close_quietly(row.id, "answered")
        finally:
            if done is not None and not done.done():
                done.set_result(None)

    def defer(self, row_id: int) -> None:
        """The command's reply comes later: its row is settled with it."""
        self._deferred.add(row_id)

    def undefer(self, row_id: int) -> None:
        self._deferred.discard(row_id)

    async def failed(self, update: object) -> None:
        """A handler raised (the owner is told by the error handler)."""
        if isinstance(update, Update) and (row := self.row_id(update)) is not None:
            await self._close_quietly(row, "failed")

    async def _close_quietly(self, row_id: int, state: InboxState) -> None:
        """Close a handled update's row; a store failure here is only logged (the owner
        was answered or is told by the error handler; an open row is settled at the
        next start)."""
        try:
            await self.close(row_id, state)
        except Exception as exc:
            log.warning("closing inbox row %d failed: %s", row_id, type(exc).__name__)

    async def close(self, row_id: int, state: InboxState) -> bool:
        """Settle an open row (no-op when it was settled already, e.g. with its reply)."""
        return await self.mailbox.settle(row_id, state, self.now(), only_from=("open",))

    async def tell(
        self,
        chat_id: int,
        text: str,
        row_id: int | None,
        state: InboxState = "failed",
        *,
        again: bool = False,
    ) -> None:
        """A notice that ends a message's row (settled in the same transaction)."""
        markup = again_markup(row_id) if again and row_id is not None else None
        settle = (row_id, state) if row_id is not None else None
        await self.outbox.put(chat_id, plain_items(text, markup=markup), settle=settle)

    # ----- the owner's choices ---------------------------------------------------------

    async def on_press(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        assert query is not None and query.data is not None
        data = query.data
        if data in (RUN, DROP):
            answer = await self._choose(query.message, run=data == RUN)
        elif data in (BUSY_RUN, BUSY_DROP):
            answer = await self._busy_choice(query.message, run=data == BUSY_RUN)
        else:
            answer = await self._again(int(data.removeprefix(AGAIN)))
            notice = query.message
            if answer == t("tg.waiting.again") and accessible(notice):
                assert notice is not None
                # The 🔁 goes once pressed: a stale press cannot run it again unasked.
                edit = edit_item(notice.message_id, None)
                await self.outbox.put(int(notice.chat.id), [edit])
        try:
            await query.answer(answer)
        except TelegramError as exc:  # the toast is a courtesy; the choice is on record
            log.info("answering a press failed: %s", type(exc).__name__)

    async def _busy_choice(self, notice: Any, *, run: bool) -> str:
        """A busy notice's ▶/🗑: the messages it held. One this process does not know
        (a restart since) acts on none: its buttons go, and the offline notice comes
        again, counting every waiting message, to choose with the true count in view."""
        message_id = notice.message_id if accessible(notice) else None
        held = None
        if message_id is not None:
            held = await self.holds.pressed(self.owner, message_id)
        if held is not None:
            return await self._choose(notice, run=run, words="tg.busy", only=set(held))
        waiting = await self.mailbox.inbox_rows(CHANNEL, ["waiting"])
        text = t("tg.busy.forgotten" if waiting else "tg.busy.none")
        await self._close_notice(notice, text)
        await self.notify_waiting()
        return text

    async def _choose(
        self, notice: Any, *, run: bool, words: str = "tg.waiting", only: set[int] | None = None
    ) -> str:
        """Run (in order, each once the chat is idle) or drop the waiting messages:
        ``only`` these (a busy notice's), else all but those a busy notice holds."""
        rows = await self.mailbox.inbox_rows(CHANNEL, ["waiting"])
        skip = self._claimed | (set() if only is not None else self.holds.holding())
        rows = [row for row in rows if row.id not in skip and (only is None or row.id in only)]
        if run and rows:
            text = t(f"{words}.running", count=len(rows))
            self._enqueue([row.id for row in rows])
        elif rows:
            now = self.now()
            dropped = 0
            for row in rows:
                dropped += await self.mailbox.settle(row.id, "dropped", now, only_from=("waiting",))
            text = t(f"{words}.dropped", count=dropped)
        else:
            text = t(f"{words}.none")
        await self._close_notice(notice, text)
        return text

    async def _close_notice(self, notice: Any, text: str) -> None:
        """The buttons go: the notice keeps its words and says what was chosen."""
        if accessible(notice):
            old = getattr(notice, "text", None) or ""
            edit = edit_item(notice.message_id, f"{old}\n\n{text}".strip())
            await self.outbox.put(int(notice.chat.id), [edit])

    async def _again(self, row_id: int) -> str:
        row = await self.mailbox.inbox_row(row_id)
        chat = int(row.chat_id) if row is not None else 0
        mine = row is not None and row.channel == CHANNEL and (chat == self.owner or is_topic(chat))
        if row is None or not mine or row.kind == "callback":  # presses are not run again
            return t("tg.waiting.gone")
        if row.state == "open" or row_id in self._claimed:
            return t("tg.waiting.already")
        if row.state != "waiting":
            if not await self.mailbox.reopen(row_id, self.now()):
                return t("tg.waiting.already")
            self._reopened.add(row_id)
        self._enqueue([row_id])
        return t("tg.waiting.again")

    # ----- running stored messages -----------------------------------------------------

    def _enqueue(self, row_ids: list[int]) -> None:
        fresh = [row_id for row_id in row_ids if row_id not in self._claimed]
        self._claimed.update(fresh)
        self._queue.extend(fresh)
        if self._runner is None or self._runner.done():
            self._runner = self.deps.life.spawn(self._run(), "tg-mailroom", for_owner=True)

    async def _run(self) -> None:
        """One stored message after another, each once the chat is idle."""
        while self._queue and not self.deps.life.stopping:
            await self._idle()
            if not self._queue or self.deps.life.stopping:
                return
            row_id = self._queue.popleft()
            try:
                await self._run_one(row_id)
            finally:
                self._claimed.discard(row_id)
                self._reopened.discard(row_id)

    async def _run_one(self, row_id: int) -> None:
        row = await self.mailbox.inbox_row(row_id)
        if row is None:
            return
        if row.state == "waiting":  # a waiting row opens now; a 🔁 row was opened
            if not await self.mailbox.settle(row_id, "open", self.now(), only_from=("waiting",)):
                return
        elif row.state != "open" or row_id not in self._reopened:
            return  # dropped, settled or run meanwhile
        await self._replay(row)
        await self._idle()

    async def _replay(self, row: InboxRow) -> None:
        """Hand the stored update to PTB as if it had just arrived (the gate knows it)."""
        update = Update.de_json(row.payload, self.deps.app.bot)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._replays[id(update)] = (row, done)
        try:
            await self.deps.app.update_queue.put(update)
            await done
        finally:
            self._replays.pop(id(update), None)

    async def _idle(self) -> None:
        """Until no turn runs in the owner's chat and no view is still showing one."""
        views = self.deps.views
        while not self.deps.life.stopping:
            view = views.get(self.owner)
            if view is not None and not view.done():
                await asyncio.wait({view})
            elif views.busy(self.owner):
                await asyncio.sleep(IDLE_POLL)
            else:
                return

    def cancel_runs(self) -> bool:
        """/cancel: the stored messages not started yet are not run. A 🔁 row already
        reopened is settled ``cancelled``; waiting rows stay waiting (asked again)."""
        queued = list(self._queue)
        self._queue.clear()
        self._claimed.difference_update(queued)
        self._reopened.difference_update(queued)
        if queued:
            self.deps.life.spawn(self._cancelled(queued), "tg-mailroom-cancel", for_owner=True)
        return bool(queued)

    async def _cancelled(self, queued: list[int]) -> None:
        waiting = False
        for row_id in queued:
            row = await self.mailbox.inbox_row(row_id)
            if row is not None and row.state == "open":
                await self.close(row_id, "cancelled")
            waiting = waiting or (row is not None and row.state == "waiting")
        if waiting:
            await self.notify_waiting()
