"""The mailbox (migration 7): ``inbox``, the owner's updates Kernel took in, and
``outbox``, everything Kernel means to send, each row kept until it is settled.

Inbox states: ``waiting`` (arrived while Kernel was down: the owner decides), ``open``
(being handled), then one of ``answered``, ``failed`` (told with a notice),
``cancelled``, ``dropped`` (the owner chose to), ``interrupted`` (found open at start:
the owner was told). ``placeholder_id`` is the "working on it" message while it stands;
``payload["kernel_cleanup"]`` lists other messages of an open turn (a progress line of
their own) that a crash would leave standing: the next start deletes them.

Outbox rows go out per chat in ``id`` order. States: ``pending``, ``sending`` (written
before the platform is called, so a death mid-call is known), ``sent``, ``expired``,
``failed``. ``ambiguous`` marks a send that may have reached the chat unseen: its
re-send carries a visible marker. :meth:`Mailbox.put` can settle an inbox row in the
same transaction that queues the reply, so a crash never leaves both.

Times are UTC ISO strings with milliseconds, compared as text (one format, so the order
is the time order). Payloads and bodies are the owner's own data in the owner's own
database, like the history; they never reach a log.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from kernel.core.rows import filled, holds_later
from kernel.store.database import dump_json, last_id, parse_stamp, stamp
from kernel.store.db import Store

InboxState = Literal["waiting", "open", "answered", "failed", "cancelled", "dropped", "interrupted"]
OutboxKind = Literal["send", "edit", "delete"]
UNSETTLED: tuple[InboxState, ...] = ("waiting", "open")
SETTLED: tuple[InboxState, ...] = ("answered", "failed", "cancelled", "dropped", "interrupted")


@dataclass(frozen=True, slots=True)
class InboxRow:
    id: int
    channel: str
    chat_id: str
    update_id: int | None
    message_id: int | None
    kind: str
    payload: dict[str, Any]
    state: InboxState
    placeholder_id: int | None
    received_at: datetime
    closed_at: datetime | None
    session_id: int | None = None  # the session its turn ran in, once known

    @property
    def cleanup(self) -> list[int]:
        """Messages of the open turn to delete should a crash cut it off."""
        ids = self.payload.get("kernel_cleanup")
        return [int(x) for x in ids if isinstance(x, int)] if isinstance(ids, list) else []


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One thing to do in a chat. ``body``: ``text``, ``parse_mode``, ``reply_markup``,
    ``replace`` (a message whose text becomes this one), ``message_id`` (edit/delete)."""

    kind: OutboxKind
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    channel: str
    chat_id: str
    kind: OutboxKind
    body: dict[str, Any]
    state: str
    ambiguous: bool
    attempts: int
    next_at: datetime
    expires_at: datetime
    created_at: datetime
    message_id: int | None
    error: str | None
    inbox_id: int | None


@dataclass(frozen=True, slots=True)
class InboxCounts:
    """Rows being handled and rows waiting for the owner's decision. (What waits in the
    outbox is counted by the running ``Outbox``, which holds those rows anyway.)"""

    open_turns: int
    waiting_updates: int


_INBOX_COLUMNS = (
    "id, channel, chat_id, update_id, message_id, kind, payload, state, placeholder_id,"
    " received_at, closed_at, session_id"
)
_OUTBOX_COLUMNS = (
    "id, channel, chat_id, kind, body, state, ambiguous, attempts, next_at, expires_at,"
    " created_at, message_id, error, inbox_id"
)


class Mailbox:
    """The inbox and outbox tables, through the Store's database thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # ----- inbox -----------------------------------------------------------------------

    async def take_in(
        self,
        channel: str,
        chat_id: str,
        *,
        update_id: int | None,
        message_id: int | None,
        kind: str,
        payload: dict[str, Any],
        now: datetime,
        state: InboxState = "open",
    ) -> InboxRow | None:
        """Record an update; None when this ``update_id`` was recorded before (the
        platform delivered it again: it must not be handled twice)."""
        body = dump_json(payload, "inbox payload")

        def op(conn: sqlite3.Connection) -> InboxRow | None:
            cur = conn.execute(
                "INSERT OR IGNORE INTO inbox (channel, chat_id, update_id, message_id, kind,"
                " payload, state, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (channel, chat_id, update_id, message_id, kind, body, state, stamp(now)),
            )
            if cur.rowcount != 1:
                return None
            return _inbox(conn, last_id(cur))

        return await self.store.write("record an inbox row", op)

    async def inbox_row(self, row_id: int) -> InboxRow | None:
        return await self.store.read("read an inbox row", lambda conn: _inbox(conn, row_id))

    async def inbox_rows(
        self, channel: str, states: Iterable[InboxState], *, limit: int = 1000
    ) -> list[InboxRow]:
        """Rows in these states, oldest first."""
        wanted = list(states)
        marks = ", ".join("?" for _ in wanted)

        def op(conn: sqlite3.Connection) -> list[InboxRow]:
            rows = conn.execute(
                f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE channel = ? AND state IN ({marks})"
                " ORDER BY id LIMIT ?",
                (channel, *wanted, limit),
            ).fetchall()
            return [_inbox_from(row) for row in rows]

        return await self.store.read("list inbox rows", op)

    async def revise(
        self, channel: str, chat_id: str, message_id: int, payload: dict[str, Any]
    ) -> bool:
        """The owner edited a message that is not being handled: what waits or runs
        again (🔁) is the edited one. False when no such row is waiting or settled."""
        body = dump_json(payload, "inbox payload")

        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE inbox SET payload = ? WHERE channel = ? AND chat_id = ?"
                " AND message_id = ? AND state != 'open' AND kind != 'callback'",
                (body, channel, chat_id, message_id),
            )
            return cur.rowcount > 0

        return await self.store.write("revise an inbox row", op)

    async def set_placeholder(self, row_id: int, message_id: int | None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE inbox SET placeholder_id = ? WHERE id = ?", (message_id, row_id))

        await self.store.write("record a placeholder", op)

    async def set_session(self, row_id: int, session_id: int) -> None:
        """The session the message's turn runs in (🔁 runs it there again); written
        with the turn's next store call (``write_soon``), which it need not hold up."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE inbox SET session_id = ? WHERE id = ?", (session_id, row_id))

        await self.store.write_soon("record a message's session", op)

    async def reopen(self, row_id: int, now: datetime) -> bool:
        """A settled row opens again to run once more (🔁). The placeholder it had is
        forgotten: by now it is the earlier outcome, which a crash must not overwrite."""

        def op(conn: sqlite3.Connection) -> bool:
            marks = ", ".join("?" for _ in SETTLED)
            cur = conn.execute(
                "UPDATE inbox SET state = 'open', closed_at = NULL, placeholder_id = NULL,"
                " payload = json_remove(payload, '$.kernel_cleanup')"
                f" WHERE id = ? AND state IN ({marks})",
                (row_id, *SETTLED),
            )
            return cur.rowcount == 1

        return await self.store.write("reopen an inbox row", op)

    async def add_cleanup(self, row_id: int, message_id: int) -> None:
        """A message the open turn showed that must not outlive a crash."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE inbox SET payload = json_set(payload, '$.kernel_cleanup',"
                " json_insert(coalesce(json_extract(payload, '$.kernel_cleanup'), json('[]')),"
                " '$[#]', ?)) WHERE id = ? AND state = 'open'",
                (message_id, row_id),
            )

        await self.store.write("record a message to clean up", op)

    async def settle(
        self,
        row_id: int,
        state: InboxState,
        now: datetime,
        *,
        only_from: Sequence[InboxState] = UNSETTLED,
    ) -> bool:
        """Move a row to ``state`` (closing it when that is a settled state); False when
        it was not in one of ``only_from`` (someone settled it first)."""

        def op(conn: sqlite3.Connection) -> bool:
            return _settle(conn, row_id, state, stamp(now), only_from)

        return await self.store.write("settle an inbox row", op)

    # ----- outbox ----------------------------------------------------------------------

    async def put(
        self,
        channel: str,
        chat_id: str,
        items: Sequence[OutboxItem],
        *,
        now: datetime,
        expires_at: datetime,
        settle: tuple[int, InboxState] | None = None,
        also: Callable[[sqlite3.Connection], None] | None = None,
    ) -> list[int]:
        """Queue ``items`` in order; returns their row ids. ``settle``: an inbox row to
        close in the same transaction (the reply and the end of its turn together);
        ``also``: another write of the same transaction (a task marked told)."""
        rows = await self.queue(
            channel, chat_id, items, now=now, expires_at=expires_at, settle=settle, also=also
        )
        return [row.id for row in rows]

    async def queue(
        self,
        channel: str,
        chat_id: str,
        items: Sequence[OutboxItem],
        *,
        now: datetime,
        expires_at: datetime,
        settle: tuple[int, InboxState] | None = None,
        also: Callable[[sqlite3.Connection], None] | None = None,
        claimed: bool = False,
    ) -> list[OutboxRow]:
        """:meth:`put`, returning the rows as written, as :meth:`unsent` would read them
        (the outbox's worker takes them without reading them back). ``claimed``: the
        first row is written already marked ``sending`` (:meth:`claim`'s mark, in the
        transaction that puts it), for a worker about to call the platform with it. A
        body's :class:`~kernel.core.rows.Later` value (the 🔁 naming an answer stored
        by a write queued before this one) is made on the database thread."""
        # Serialised here, but for a body naming a row not written yet (issue 37).
        later = [holds_later(item.body) for item in items]
        bodies = [
            (item.kind, "" if wait else dump_json(item.body, "outbox body"))
            for item, wait in zip(items, later, strict=True)
        ]
        created, expires = stamp(now), stamp(expires_at)
        inbox_id = settle[0] if settle else None
        states = [
            ("sending", 1) if claimed and n == 0 else ("pending", 0) for n in range(len(items))
        ]

        def op(conn: sqlite3.Connection) -> list[int]:
            if any(later):
                bodies[:] = [
                    (kind, dump_json(filled(item.body), "outbox body") if wait else body)
                    for (kind, body), item, wait in zip(bodies, items, later, strict=True)
                ]
            ids = []
            for (kind, body), (state, attempts) in zip(bodies, states, strict=True):
                cur = conn.execute(
                    "INSERT INTO outbox (channel, chat_id, kind, body, state, attempts,"
                    " next_at, expires_at, created_at, inbox_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        channel,
                        chat_id,
                        kind,
                        body,
                        state,
                        attempts,
                        created,
                        expires,
                        created,
                        inbox_id,
                    ),
                )
                ids.append(last_id(cur))
            if settle is not None:
                _settle(conn, settle[0], settle[1], created, UNSETTLED)
            if also is not None:
                also(conn)
            return ids

        ids = await self.store.write("queue outgoing messages", op)
        made, ends = parse_stamp(created), parse_stamp(expires)
        return [
            OutboxRow(
                id=row_id,
                channel=channel,
                chat_id=chat_id,
                kind=kind,
                body=json.loads(body),
                state=state,
                ambiguous=False,
                attempts=attempts,
                next_at=made,
                expires_at=ends,
                created_at=made,
                message_id=None,
                error=None,
                inbox_id=inbox_id,
            )
            for row_id, (kind, body), (state, attempts) in zip(ids, bodies, states, strict=True)
        ]

    async def unsent(self, channel: str, chat_id: str | None = None) -> list[OutboxRow]:
        """Pending and sending rows, per chat in order."""
        where = "channel = ? AND state IN ('pending', 'sending')"
        args: tuple[Any, ...] = (channel,)
        if chat_id is not None:
            where += " AND chat_id = ?"
            args = (channel, chat_id)

        def op(conn: sqlite3.Connection) -> list[OutboxRow]:
            rows = conn.execute(
                f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE {where} ORDER BY chat_id, id",
                args,
            ).fetchall()
            return [_outbox_from(row) for row in rows]

        return await self.store.read("list outgoing messages", op)

    async def recent(self, channel: str, chat_id: str, limit: int) -> list[OutboxRow]:
        """The chat's newest ``limit`` rows, newest first (while the table keeps them)."""

        def op(conn: sqlite3.Connection) -> list[OutboxRow]:
            rows = conn.execute(
                f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE channel = ? AND chat_id = ?"
                " ORDER BY id DESC LIMIT ?",
                (channel, chat_id, limit),
            ).fetchall()
            return [_outbox_from(row) for row in rows]

        return await self.store.read("list recent outgoing messages", op)

    async def outbox_row(self, row_id: int) -> OutboxRow | None:
        def op(conn: sqlite3.Connection) -> OutboxRow | None:
            row = conn.execute(
                f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE id = ?", (row_id,)
            ).fetchone()
            return _outbox_from(row) if row else None

        return await self.store.read("read an outgoing message", op)

    async def sent_as(self, channel: str, chat_id: str, message_id: int) -> OutboxRow | None:
        """The send row whose delivery is the chat's message ``message_id`` (the newest,
        should a message id come back), while the table keeps it."""

        def op(conn: sqlite3.Connection) -> OutboxRow | None:
            row = conn.execute(
                f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE channel = ? AND chat_id = ?"
                " AND message_id = ? AND kind = 'send' ORDER BY id DESC LIMIT 1",
                (channel, chat_id, message_id),
            ).fetchone()
            return _outbox_from(row) if row else None

        return await self.store.read("find a sent message", op)

    async def recover(self, channel: str) -> int:
        """At start: rows left ``sending`` by a process that died mid-call may have
        reached the chat; they go back to ``pending``, marked ambiguous."""

        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "UPDATE outbox SET state = 'pending', ambiguous = 1"
                " WHERE channel = ? AND state = 'sending' AND kind = 'send'",
                (channel,),
            )
            conn.execute(
                "UPDATE outbox SET state = 'pending' WHERE channel = ? AND state = 'sending'",
                (channel,),
            )
            return cur.rowcount

        return await self.store.write("recover outgoing messages", op)

    async def sending(self, row_id: int) -> None:
        """Written before the platform is called."""
        await self.claim(row_id)

    async def claim(self, row_id: int, of_row: int | None = None) -> tuple[bool, int | None]:
        """:meth:`sending` in one store call with the message id of the row ``of_row``
        (an edit or delete of an earlier row's message). ``(False, None)`` and nothing
        written when ``of_row`` never landed (nothing to change); else ``(True, its
        message id)``."""

        def op(conn: sqlite3.Connection) -> tuple[bool, int | None]:
            target = None
            if of_row is not None:
                found = conn.execute(
                    "SELECT message_id FROM outbox WHERE id = ?", (of_row,)
                ).fetchone()
                target = found[0] if found else None
                if target is None:
                    return False, None
            conn.execute(
                "UPDATE outbox SET state = 'sending', attempts = attempts + 1 WHERE id = ?",
                (row_id,),
            )
            return True, target

        return await self.store.write("mark a message sending", op)

    async def unclaim(self, row_ids: Sequence[int]) -> None:
        """Rows claimed when put (:meth:`queue`'s ``claimed``) whose call was never made
        (the outbox stopped first): back to ``pending`` as if never claimed, so the next
        start sends them unmarked."""

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE outbox SET state = 'pending', attempts = MAX(attempts - 1, 0)"
                " WHERE id = ? AND state = 'sending'",
                [(row_id,) for row_id in row_ids],
            )

        await self.store.write("unclaim messages", op)

    def sent(
        self, row_id: int, message_id: int | None, now: datetime, *, linger: float | None = None
    ) -> asyncio.Future[None]:
        """Queued at once, awaited by the caller: records queued behind it
        (``write_soon``: the row's audit) go in its hop and transaction. ``linger``: no
        one waits for it; it goes with the next hop, at most ``linger`` seconds on."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE outbox SET state = 'sent', message_id = ?, done_at = ?, error = NULL,"
                " attempts = MAX(attempts, 1) WHERE id = ?",  # (a tidy row's first try)
                (message_id, stamp(now), row_id),
            )

        if linger is not None:
            return self.store.write_soon("mark a message sent", op, linger=linger)
        return self.store.write_queued("mark a message sent", op)

    async def retry_at(
        self, row_id: int, next_at: datetime, error: str, *, ambiguous: bool
    ) -> None:
        """Back to ``pending`` until ``next_at``; ``ambiguous`` only ever turns on."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE outbox SET state = 'pending', next_at = ?, error = ?,"
                " ambiguous = MAX(ambiguous, ?) WHERE id = ?",
                (stamp(next_at), error, int(ambiguous), row_id),
            )

        await self.store.write("schedule a retry", op)

    async def give_up(
        self, row_ids: Sequence[int], state: Literal["expired", "failed"], error: str, now: datetime
    ) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE outbox SET state = ?, error = ?, done_at = ? WHERE id = ?",
                [(state, error, stamp(now), row_id) for row_id in row_ids],
            )

        await self.store.write("give up a message", op)

    # ----- the whole ------------------------------------------------------------------

    async def inbox_counts(self, channel: str) -> InboxCounts:
        def op(conn: sqlite3.Connection) -> InboxCounts:
            counts = dict(
                conn.execute(
                    "SELECT state, COUNT(*) FROM inbox WHERE channel = ?"
                    " AND state IN ('waiting', 'open') GROUP BY state",
                    (channel,),
                ).fetchall()
            )
            return InboxCounts(
                open_turns=int(counts.get("open", 0)),
                waiting_updates=int(counts.get("waiting", 0)),
            )

        return await self.store.read("count the inbox", op)

    async def prune(self, before: datetime) -> int:
        """Forget settled inbox rows and finished outbox rows older than ``before``."""
        cutoff = stamp(before)

        def op(conn: sqlite3.Connection) -> int:
            out = conn.execute(
                "DELETE FROM outbox WHERE state NOT IN ('pending', 'sending') AND done_at < ?",
                (cutoff,),
            ).rowcount
            inbox = conn.execute(
                "DELETE FROM inbox WHERE state NOT IN ('waiting', 'open') AND closed_at < ?",
                (cutoff,),
            ).rowcount
            return int(out) + int(inbox)

        return await self.store.write("prune the mailbox", op)


def _settle(
    conn: sqlite3.Connection,
    row_id: int,
    state: InboxState,
    now: str,
    only_from: Sequence[InboxState],
) -> bool:
    marks = ", ".join("?" for _ in only_from)
    closed = now if state in SETTLED else None
    cur = conn.execute(
        f"UPDATE inbox SET state = ?, closed_at = ? WHERE id = ? AND state IN ({marks})",
        (state, closed, row_id, *only_from),
    )
    return cur.rowcount == 1


def _inbox(conn: sqlite3.Connection, row_id: int) -> InboxRow | None:
    row = conn.execute(f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE id = ?", (row_id,)).fetchone()
    return _inbox_from(row) if row else None


def _inbox_from(row: tuple[Any, ...]) -> InboxRow:
    return InboxRow(
        id=row[0],
        channel=row[1],
        chat_id=row[2],
        update_id=row[3],
        message_id=row[4],
        kind=row[5],
        payload=json.loads(row[6]),
        state=row[7],
        placeholder_id=row[8],
        received_at=parse_stamp(row[9]),
        closed_at=parse_stamp(row[10]) if row[10] else None,
        session_id=row[11],
    )


def _outbox_from(row: tuple[Any, ...]) -> OutboxRow:
    return OutboxRow(
        id=row[0],
        channel=row[1],
        chat_id=row[2],
        kind=row[3],
        body=json.loads(row[4]),
        state=row[5],
        ambiguous=bool(row[6]),
        attempts=row[7],
        next_at=parse_stamp(row[8]),
        expires_at=parse_stamp(row[9]),
        created_at=parse_stamp(row[10]),
        message_id=row[11],
        error=row[12],
        inbox_id=row[13],
    )
