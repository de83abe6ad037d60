"""The durable outbox: everything Kernel sends to a chat is written down first, then
delivered by one worker per chat, strictly in order, until it lands or expires.

:meth:`Outbox.put` queues items in the ``outbox`` table (optionally settling an inbox row
in the same transaction) and wakes the chat's worker; :meth:`Outbox.send` also waits for
the message id. The worker marks a row ``sending`` before each call, so a process that
dies mid-call leaves a trace: :meth:`Outbox.start` turns such rows back into pending,
marked *ambiguous*. A send that may have reached the chat unseen (a timeout after the
request went out, a connection cut mid-request, a 5xx, a death mid-call) is re-sent with
the visible marker ``tg.resent_marker``: never an unmarked duplicate. A failure that
provably never reached the API (refused connection, connect or pool timeout, 429) is
retried unmarked. Retries back off from 1 s doubling to 5 min (``retry_after``
honoured); a row still undelivered at its ``expires_at`` expires with the rows behind
it that are as old, and one notice says how many and since when (a later expiry folds
a notice not yet delivered into its own, so an outage leaves one notice, not many).
:meth:`Outbox.nudge` (polling answered again) makes rows that failed for the network due
at once instead of at the end of their backoff.

A call that may have landed is remembered, so a store failure after it (the row left
``sending``) never re-sends unmarked: a known message id is recorded, else re-sent marked.
A tidy row's first try takes no ``sending`` mark and its ``sent`` rides a later hop
(taking buttons off twice is harmless); a send put for a chat with nothing else unsent
is marked in the put's own transaction.

A row that cannot be delivered yet blocks the rows behind it: order matters more than
speed. Tidy rows (a superseded 🔁 taken away: :func:`unbutton_item`) are the exception:
they show nothing new, so every other row of the chat goes first, and they go only when
the chat's rate budget has a token to spare (``RateBudget.room``), however long that
takes; durable like any row, a restart still delivers them. Permanent refusals
(Forbidden, BadRequest) fail the row and the next one goes; a refused reply (not a
notice, not a chat that blocked the bot) is told once in plain words (``tg.chunk_refused``).
One call per row, and what its outcome means (gone messages, "not modified", the HTML
fallback), is ``calls.py``'s.

When the outbox itself cannot be written (a full disk, a read-only database), a notice
goes straight through the Bot API instead (:meth:`Outbox.tell_directly`), in words
naming the trouble and its fix (:meth:`Outbox.trouble_words`).

Public API: :class:`Outbox`, :class:`Ticket`, :class:`Undeliverable`, :func:`reply_items`,
:func:`plain_items`, :func:`again_markup`, :class:`LiveRetry` (``outbox.live_retry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace as with_fields
from datetime import datetime, timedelta, tzinfo
from typing import Any

from telegram import Bot
from telegram.error import TelegramError

from kernel.audit import AuditLog
from kernel.core.backoff import Backoff
from kernel.core.clock import Clock, unless_set
from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.store.mailbox import InboxState, Mailbox, OutboxItem, OutboxRow
from kernel.store.trouble import storage_trouble
from kernel.telegram.budget import RateBudget
from kernel.telegram.calls import NotNow, Refused, RetryLater, RowCalls
from kernel.telegram.items import (
    CHANNEL,
    RETRY,
    TIDY_LINGER,
    Delivered,
    LiveRetry,
    Ticket,
    Undeliverable,
    again_markup,
    delete_item,
    edit_item,
    goes_first,
    is_tidy,
    logged,
    note_row,
    parse_time,
    plain_items,
    reply_items,
    retry_markup,
    unbutton_item,
    unsend_item,
)

# The builders are ``items.py``'s; importable from here as before.
__all__ = [
    "CHANNEL",
    "RETRY",
    "LiveRetry",
    "Outbox",
    "Ticket",
    "Undeliverable",
    "again_markup",
    "delete_item",
    "edit_item",
    "plain_items",
    "reply_items",
    "retry_markup",
    "unbutton_item",
    "unsend_item",
]

log = logging.getLogger(__name__)

# A failed row is retried after 1 s, doubling to 5 min (a 429's retry_after wins).
BACKOFF = Backoff(first=1.0, cap=300.0)
NOTICE_EXPIRY = timedelta(days=30)  # the "could not deliver" notice itself waits long
IDLE_WAIT = 60.0  # a worker with nothing due looks again at least this often
STORE_RETRY = 5.0  # seconds before a worker whose store call failed looks again
_NOTICE = "undelivered"  # body["notice"] of the expiry notice
_REFUSED = "refused"  # body["notice"] of the "Telegram refused a reply" notice
_WAITED = "RetryAfter"  # row.error of a 429: its wait is Telegram's, never shortened


class Outbox:
    """One per Telegram channel (``channel.outbox``)."""

    def __init__(
        self,
        mailbox: Mailbox,
        bot: Bot,
        *,
        expiry: timedelta,
        clock: Clock,
        tz: tzinfo | None = None,
        backoff: Backoff = BACKOFF,
        audit: AuditLog | None = None,
    ) -> None:
        """``clock``: the time rows are stamped with and workers wait on (Kernel's);
        ``backoff``: the delays between tries of a row; ``audit``: where each finished
        row is recorded (outbox.sent / outbox.failed, no text)."""
        self.mailbox = mailbox
        self.audit = audit
        self.bot = bot
        self.expiry = expiry
        self.clock = clock
        self.now = clock.now
        self.tz = tz
        self._workers: dict[int, asyncio.Task[None]] = {}
        self._wake: dict[int, asyncio.Event] = {}
        self._tasks = TaskSet("telegram outbox")
        self._futures: dict[int, asyncio.Future[tuple[str, int | None]]] = {}
        self._unsent: dict[int, dict[int, datetime]] = {}  # chat → row id → created
        self._tidy: set[int] = set()  # unsent rows that are tidy-ups (they may wait)
        self._running = False
        self._stopped = False  # stop() ran: a put now only waits in the table
        self._idle = asyncio.Event()  # set when nothing is left to deliver
        self.backoff = backoff
        # Calls that may have landed, by row: a re-read row still ``sending`` after a
        # store failure is then re-sent marked (or only recorded, its message id known).
        self._maybe: set[int] = set()
        self._landed: dict[int, int | None] = {}
        self._delivered = Delivered()  # the latest rows' message ids
        # Chats whose first row failed for the network: chat → True when the request
        # never reached the API (then any success elsewhere also hurries them).
        self._stalled: dict[int, bool] = {}
        self._hurry: set[int] = set()  # chats whose network-failed row is due now
        self._putting: set[asyncio.Future[Ticket]] = set()
        self._caller_tells: set[int] = set()  # rows whose refusal their caller tells
        self._handed: dict[int, list[OutboxRow]] = {}  # chat → rows put since it looked
        self._audited: set[int] = set()  # rows whose "sent" is on the audit already
        self._claimed: set[int] = set()  # rows marked ``sending`` when put, not yet tried
        self._queueing: dict[int, int] = {}  # chat → puts on their way to the table
        self.tidy_linger = TIDY_LINGER  # how long a tidy row's "sent" waits for a hop
        self._calls = RowCalls(bot)
        self.delivered = 0
        self.live_retry = LiveRetry()

    # ----- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Rows left ``sending`` by a dead process become ambiguous; every chat with
        unsent rows gets its worker."""
        recovered = await self.mailbox.recover(CHANNEL)
        if recovered:
            log.warning("%d outgoing messages were cut off mid-send; re-sending marked", recovered)
        self._running, self._stopped = True, False
        for row in await self.mailbox.unsent(CHANNEL):
            chat = int(row.chat_id)
            self._unsent.setdefault(chat, {})[row.id] = row.created_at
            if is_tidy(row.body):
                self._tidy.add(row.id)
            self._ensure_worker(chat)

    async def stop(self, drain: float = 0.0) -> None:
        """Give queued rows ``drain`` seconds, then stop; what is left goes at next start."""
        if drain > 0 and self._running and any(self._unsent.values()):
            self._idle.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain):
                    await self._idle.wait()
        self._running = False
        self._stopped = True
        await self._tasks.close(5.0)
        self._workers.clear()
        if self._claimed:  # claimed when put, never called for: pending again, unmarked
            claimed, self._claimed = sorted(self._claimed), set()
            with contextlib.suppress(Exception):
                await self.mailbox.unclaim(claimed)
        for future in self._futures.values():
            if not future.done():
                future.set_result(("stopped", None))
        self._futures.clear()

    # ----- queueing --------------------------------------------------------------------
    async def put(
        self,
        chat_id: int,
        items: Sequence[OutboxItem],
        *,
        settle: tuple[int, InboxState] | None = None,
        expiry: timedelta | None = None,
        caller_tells: bool = False,
        also: Callable[[sqlite3.Connection], None] | None = None,
    ) -> Ticket:
        """Queue ``items`` durably, then wake the chat's worker; returns at once.
        Cancel-safe: a cancel while the row is written still registers and wakes.
        ``caller_tells``: the caller handles a refusal itself (no ``tg.chunk_refused``);
        ``also``: a write committed with the rows (a background task marked told)."""
        task = asyncio.ensure_future(self._put(chat_id, items, settle, expiry, caller_tells, also))
        self._putting.add(task)
        task.add_done_callback(self._put_done)
        return await asyncio.shield(task)

    def _put_done(self, task: asyncio.Future[Ticket]) -> None:
        self._putting.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # A caller still waiting gets it through the shield; one cancelled meanwhile
            # cannot: the rows were not written, and the log says so.
            log.warning("queueing outgoing messages failed: %s", type(task.exception()).__name__)

    async def _put(
        self,
        chat_id: int,
        items: Sequence[OutboxItem],
        settle: tuple[int, InboxState] | None,
        expiry: timedelta | None,
        caller_tells: bool,
        also: Callable[[sqlite3.Connection], None] | None = None,
    ) -> Ticket:
        now = self.now()
        claim = self._goes_now(chat_id, items)
        self._queueing[chat_id] = self._queueing.get(chat_id, 0) + 1
        try:
            rows = await self.mailbox.queue(
                CHANNEL,
                str(chat_id),
                items,
                now=now,
                expires_at=now + (expiry or self.expiry),
                settle=settle,
                also=also,
                claimed=claim,
            )
        finally:
            self._queueing[chat_id] -= 1  # (per chat, as the workers)
        ids = [row.id for row in rows]
        if claim and self._stopped:  # nobody calls for it now: the next start sends it
            with contextlib.suppress(Exception):
                await self.mailbox.unclaim(ids[:1])
        elif claim:
            self._claimed.add(ids[0])
        loop = asyncio.get_running_loop()
        futures = []
        for row_id, item in zip(ids, items, strict=True):
            future: asyncio.Future[tuple[str, int | None]] = loop.create_future()
            if self._stopped:  # nobody delivers in this process any more
                future.set_result(("stopped", None))
            else:
                self._futures[row_id] = future
                self._unsent.setdefault(chat_id, {})[row_id] = now
                if is_tidy(item.body):
                    self._tidy.add(row_id)
                if caller_tells:
                    self._caller_tells.add(row_id)
            futures.append(future)
        if self._running:  # else the rows wait in the table for start()
            self._handed.setdefault(chat_id, []).extend(rows)
            self._ensure_worker(chat_id)
            self._wake[chat_id].set()
        return Ticket(ids, futures)

    def _goes_now(self, chat_id: int, items: Sequence[OutboxItem]) -> bool:
        """Whether the first of ``items`` is claimed as it is put (``sending`` in the
        put's transaction): a send the chat's worker calls for next."""
        if not self._running or self._stopped or not goes_first(items):
            return False
        return not self._unsent.get(chat_id) and not self._queueing.get(chat_id)

    async def send(self, chat_id: int, item: OutboxItem) -> int:
        """Queue one item and wait for it: its message id. Raises :class:`Undeliverable`."""
        ticket = await self.put(chat_id, [item], caller_tells=True)
        ((state, message_id),) = await ticket._outcomes()
        if state != "sent" or message_id is None:
            raise Undeliverable(state)
        return message_id

    async def trouble_words(self, exc: BaseException) -> str | None:
        """What the owner is told when ``exc`` (a failed store call) comes from the
        disk's state: what is wrong and what to do. None when it does not (a lock, a
        bug)."""
        folder = self.mailbox.store.path.parent
        trouble = await asyncio.to_thread(storage_trouble, exc, folder)
        if trouble is None:
            return None
        fix = t("tg.storage_fix_space" if trouble.full else "tg.storage_fix_write")
        return t("tg.storage_trouble", path=trouble.path or folder, cause=trouble.cause, fix=fix)

    async def tell_directly(self, chat_id: int, text: str, *, replace: int | None = None) -> bool:
        """``text`` straight through the Bot API, never written down: for when the
        outbox cannot be written. ``replace``: a message (a placeholder) that becomes
        ``text``. Best effort: True once Telegram took it."""
        try:
            if replace is not None:
                await self.bot.edit_message_text(text, chat_id=chat_id, message_id=replace)
            else:
                await self.bot.send_message(chat_id, text)
        except TelegramError as exc:
            log.warning("telling the owner directly failed: %s", type(exc).__name__)
            return False
        return True

    def nudge(self) -> None:
        """Telegram answers again (polling recovered): rows that failed for the network
        are due now, not at the end of their backoff (a 429's wait still holds)."""
        for chat_id in list(self._stalled):
            self._hurry.add(chat_id)
            wake = self._wake.get(chat_id)
            if wake is not None:
                wake.set()

    def backlog(self, chat_id: int) -> bool:
        """Rows of this chat not yet delivered that show something (a message sent
        directly now would jump the queue); tidy rows do not count."""
        return any(row not in self._tidy for row in self._unsent.get(chat_id, ()))

    def undelivered(self, chat_id: int) -> int:
        """Rows of this chat not yet delivered, tidy rows too."""
        return len(self._unsent.get(chat_id, ()))

    def stats(self) -> dict[str, Any]:
        created = [when for rows in self._unsent.values() for when in rows.values()]
        oldest = min(created) if created else None
        age = (self.now() - oldest).total_seconds() if oldest else 0.0
        return {
            "undelivered": len(created),
            "oldest_undelivered_seconds": round(max(age, 0.0), 1),
            "delivered": self.delivered,
            "resent": self._calls.resent,
        }

    # ----- the worker ------------------------------------------------------------------
    def _ensure_worker(self, chat_id: int) -> None:
        self._wake.setdefault(chat_id, asyncio.Event())
        task = self._workers.get(chat_id)
        if task is None or task.done():
            self._workers[chat_id] = self._tasks.spawn(self._work(chat_id), f"outbox-{chat_id}")

    async def _work(self, chat_id: int) -> None:
        wake = self._wake[chat_id]
        # The chat's queue as known (None: read the table). Only this worker changes its
        # rows and only a put adds rows, handing them over: the rest stays valid.
        rows: list[OutboxRow] | None = None
        while True:
            try:
                rows = await self._step(chat_id, wake, rows)
            except Exception as exc:  # the store failed: look again a bit later
                log.error("outbox step failed: %s", type(exc).__name__)
                rows = None
                await self._pause(wake, STORE_RETRY)

    async def _step(
        self, chat_id: int, wake: asyncio.Event, known: list[OutboxRow] | None
    ) -> list[OutboxRow] | None:
        """Deliver, wait for, or expire the chat's first row: the queue left (None: read)."""
        wake.clear()
        if known is None:
            self._handed.pop(chat_id, None)  # the read has them (a later put hands anew)
            known = await self.mailbox.unsent(CHANNEL, str(chat_id))
        rows = self._take_handed(chat_id, known)
        if not rows:
            if wake.is_set():
                return []  # a put after the read: its rows are handed
            self._unsent.pop(chat_id, None)
            self._check_idle()
            await self._pause(wake, IDLE_WAIT)
            return [] if wake.is_set() else None  # idle long: the table is looked at
        # Every row that shows something goes first; tidy rows once none is left.
        row = next((r for r in rows if not is_tidy(r.body)), rows[0])
        rest = [r for r in rows if r is not row]
        if row.id in self._landed:  # delivered; only the store's record of it failed
            await self._record(chat_id, row, self._landed[row.id], row.attempts)
            return rest
        now = self.now()
        if now >= row.expires_at:
            await self._expire(chat_id, rows, now)
            return None
        due = (row.next_at - now).total_seconds()
        hurried = chat_id in self._hurry and row.error != _WAITED
        if due > 0 and not hurried:
            await self._pause(wake, min(due, (row.expires_at - now).total_seconds()))
            return rows
        self._hurry.discard(chat_id)
        if is_tidy(row.body) and not await self._room(chat_id, wake):
            return rows  # a put came first: its rows go before this one
        return rest if await self._attempt(chat_id, row) else None

    def _take_handed(self, chat_id: int, rows: list[OutboxRow]) -> list[OutboxRow]:
        """``rows`` and the rows puts handed over since, each once, in queue order."""
        have = {row.id for row in rows}
        handed = [r for r in self._handed.pop(chat_id, ()) if r.id not in have]
        return sorted([*rows, *handed], key=lambda r: r.id) if handed else rows

    async def _room(self, chat_id: int, wake: asyncio.Event) -> bool:
        """Wait until the chat's rate budget has a token to spare for a tidy row: True;
        False when a put (or a nudge) woke the worker first."""
        budget = getattr(self.bot, "rate_limiter", None)
        if not isinstance(budget, RateBudget):
            return True
        if wake.is_set():
            return False
        return await unless_set(budget.room(self._calls.chat(chat_id)), wake) and not wake.is_set()

    async def _pause(self, wake: asyncio.Event, seconds: float) -> None:
        """``seconds`` on the clock, or until ``wake`` is set (a put, a nudge)."""
        if wake.is_set():
            return
        waits = {
            asyncio.ensure_future(self.clock.sleep(max(seconds, 0.0))),
            asyncio.ensure_future(wake.wait()),
        }
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def _attempt(self, chat_id: int, row: OutboxRow) -> bool:
        """One try; True when the row is finished (sent or failed for good)."""
        if row.id in self._maybe and not row.ambiguous and row.kind == "send":
            # An earlier call of this process may have landed and the store failed
            # before it could say how it ended: never an unmarked second copy.
            row = with_fields(row, ambiguous=True)
        if row.id in self._claimed:  # its mark went with the put: this is its first try
            self._claimed.discard(row.id)
            resolved: OutboxRow | None = with_fields(row, state="pending", attempts=0)
        else:
            resolved = await self._claim(row)
        if resolved is None:  # an edit of a message that never landed: nothing to do
            await self._record(chat_id, row, None, row.attempts)
            return True
        row = resolved
        self._maybe.add(row.id)
        try:
            message_id = await self._calls.deliver(chat_id, row)
        except NotNow:  # a tidy row the budget could not spare a token for after all
            self._maybe.discard(row.id)
            return False
        except RetryLater as retry:
            ambiguous = retry.ambiguous or row.ambiguous
            if not ambiguous:
                self._maybe.discard(row.id)
            if retry.delay is None:
                self._stalled[chat_id] = not retry.ambiguous and row.kind == "send"
            delay = self.backoff.delay(max(row.attempts, 0) + 1, retry.delay)
            log.warning("telegram %s failed (%s); retrying in %.0fs", row.kind, retry.error, delay)
            at = self.now() + timedelta(seconds=delay)
            await self.mailbox.retry_at(row.id, at, retry.error, ambiguous=ambiguous)
            return False
        except Refused as failed:
            self._maybe.discard(row.id)
            log.error("telegram refused a %s for good: %s", row.kind, failed)
            await self.mailbox.give_up([row.id], "failed", str(failed), self.now())
            why = "forbidden" if failed.forbidden else "refused"
            note_row(self.audit, row, why, row.attempts + 1)
            told = row.id in self._caller_tells  # (_finish forgets it)
            self._finish(chat_id, row.id, "failed", None)
            await self._tell_refused(chat_id, row, failed, told=told)
            return True
        self._landed[row.id] = message_id
        self._stalled.pop(chat_id, None)
        # Telegram answers: chats whose requests never got there need not wait longer.
        for other, unreached in self._stalled.items():
            if unreached and other not in self._hurry:
                self._hurry.add(other)
                self._wake[other].set()
        await self._record(chat_id, row, message_id, row.attempts + 1)
        return True

    async def _claim(self, row: OutboxRow) -> OutboxRow | None:
        """The row marked ``sending`` before its call, in one store call with the message
        of the earlier row an edit or delete names (:func:`unbutton_item`,
        :func:`unsend_item`); None, nothing marked, when that row never landed. A tidy
        row's first try, its message known, takes no mark and no store call."""
        of_row = row.body.get("of_row")
        named = None if row.kind == "send" or of_row is None else int(of_row)
        known = self._delivered.get(named) if named is not None and is_tidy(row.body) else None
        if known is not None and row.attempts == 0 and row.error is None:  # (a retry claims)
            return with_fields(row, body={**row.body, "message_id": known})
        claimed, message_id = await self.mailbox.claim(row.id, named)
        if not claimed:
            return None
        if named is None:
            return row
        return with_fields(row, body={**row.body, "message_id": message_id})

    async def _record(
        self, chat_id: int, row: OutboxRow, message_id: int | None, attempts: int
    ) -> None:
        # A tidy row's mark is waited for by no one and harmless to lose (the next
        # start takes the buttons off once more): it waits for company (TIDY_LINGER).
        linger = self.tidy_linger if is_tidy(row.body) else None
        done = self.mailbox.sent(row.id, message_id, self.now(), linger=linger)
        self._delivered.note(row.id, message_id)
        if row.id not in self._audited:  # queued behind the mark: one hop (a mark that
            self._audited.add(row.id)  # failed is written again, its audit row is not)
            note_row(self.audit, row, "sent", attempts, message_id, linger)
        if linger is not None:
            done.add_done_callback(logged)
        else:
            await done
        self._audited.discard(row.id)
        self._landed.pop(row.id, None)
        self._maybe.discard(row.id)
        self.delivered += 1
        self._finish(chat_id, row.id, "sent", message_id)

    async def _tell_refused(
        self, chat_id: int, row: OutboxRow, failed: Refused, *, told: bool
    ) -> None:
        """A reply Telegram refused for good is told once, in plain words; not for a
        notice (no loop), an edit or delete, a chat that refuses the bot itself, or a
        row whose caller tells (a question: :meth:`send` raises to it)."""
        if row.kind != "send" or row.body.get("notice") or failed.forbidden or told:
            return
        pending = await self.mailbox.unsent(CHANNEL, str(chat_id))
        if any(other.body.get("notice") == _REFUSED for other in pending):
            return  # one notice stands for the whole run of refused chunks
        item = OutboxItem(
            "send", {"text": t("tg.chunk_refused"), "parse_mode": None, "notice": _REFUSED}
        )
        await self.put(chat_id, [item], expiry=NOTICE_EXPIRY)

    def _finish(self, chat_id: int, row_id: int, state: str, message_id: int | None) -> None:
        self._unsent.get(chat_id, {}).pop(row_id, None)
        self._tidy.discard(row_id)
        self._caller_tells.discard(row_id)
        future = self._futures.pop(row_id, None)
        if future is not None and not future.done():
            future.set_result((state, message_id))
        self._check_idle()

    def _check_idle(self) -> None:
        if not any(self._unsent.values()):
            self._idle.set()

    async def _expire(self, chat_id: int, rows: list[OutboxRow], now: datetime) -> None:
        """The first row expired: it and the rows behind it that expired too go (a row
        queued later has its own time), and one notice tells the owner. An earlier such
        notice still queued is folded into the new one: one notice per outage."""
        gone = [row for row in rows if row.expires_at <= now]
        lost = [r for r in gone if r.kind == "send" and r.body.get("notice") != _NOTICE]
        log.warning("%d outgoing messages expired undelivered", len(gone))
        if not lost:
            await self._give_up(chat_id, gone, now)
            return
        count = len(lost)
        earliest = min(row.created_at for row in lost)
        folded = [r for r in rows if r.body.get("notice") == _NOTICE and r not in gone]
        for notice in folded:
            count += int(notice.body.get("count", 1))
            since = parse_time(notice.body.get("since"))
            earliest = min(earliest, since or earliest)
        when = earliest.astimezone(self.tz).strftime("%m-%d %H:%M")
        body = {
            "text": t("tg.undelivered", count=count, time=when),
            "parse_mode": None,
            "notice": _NOTICE,
            "count": count,
            "since": earliest.isoformat(),
        }
        await self._give_up(chat_id, gone + folded, now)
        with contextlib.suppress(Exception):  # the notice is best effort on a failing store
            await self.put(chat_id, [OutboxItem("send", body)], expiry=NOTICE_EXPIRY)

    async def _give_up(self, chat_id: int, rows: list[OutboxRow], now: datetime) -> None:
        await self.mailbox.give_up([row.id for row in rows], "expired", "expired", now)
        for row in rows:
            note_row(self.audit, row, "expired", row.attempts)
            self._finish(chat_id, row.id, "expired", None)
