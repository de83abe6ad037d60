"""Sessions and their messages: the ``sessions`` and ``messages`` tables.

A session is keyed by (channel, user_id, external_id); its messages are kept in order,
a user-input message starting each round.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from asyncio import Future
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from kernel.core.errors import StoreError
from kernel.core.messages import Message, content_to_json
from kernel.store.audit import prune_in
from kernel.store.database import Database, RowId, check_non_negative, dump_json, last_id
from kernel.store.parsed import ParsedMessages, parse_message

log = logging.getLogger(__name__)


@dataclass(slots=True)
class SessionRow:
    id: int
    channel: str
    title: str | None
    meta: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    message_count: int
    user_id: str = ""
    external_id: str = ""  # the channel's own id for it; "session-<id>" unless given
    mode: str = "act"  # act, plan or read_only (kernel/core/session_modes.py)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as history keeps it; ``failed``: set aside, never shown to a model;
    ``cut``: the branch (/undo, /rewind, /retry) it was cut with, 0 when it is not;
    ``id``: its row id (the HTTP routes' ``sequence``)."""

    message: Message
    failed: bool = False
    cut: int = 0
    id: int = 0
    starts_round: bool = False


@dataclass(frozen=True, slots=True)
class Begun:
    """What :meth:`SessionStore.begin_turn_soon` read, and the ids of the messages it
    stored (None: not stored, the session was not as assumed)."""

    session: SessionRow | None
    transcript: list[StoredMessage]
    history: list[Message]
    ids: list[int] | None


_SESSION_SELECT = """
    SELECT s.id, s.channel, s.title, s.meta, s.created_at, s.updated_at,
           (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id),
           s.user_id, s.external_id, s.mode
    FROM sessions s
"""


class SessionTables(Database):
    """The Store's session and message methods."""

    @cached_property
    def _parsed(self) -> ParsedMessages:
        return ParsedMessages()  # made and used on the db thread

    async def create_session(
        self,
        channel: str,
        *,
        title: str | None = None,
        meta: dict[str, Any] | None = None,
        user_id: str = "",
        external_id: str | None = None,
        mode: str = "act",
    ) -> SessionRow:
        """A new session; ``external_id`` defaults to ``session-<id>``. Raises StoreError
        when (channel, user_id, external_id) is taken."""
        now = self._now()
        meta_json = dump_json(meta or {}, "session meta")

        def op(conn: sqlite3.Connection) -> SessionRow:
            return _insert_session(conn, channel, user_id, external_id, title, meta_json, now, mode)

        return await self._write("create session", op)

    async def open_session(
        self,
        channel: str,
        user_id: str,
        external_id: str,
        *,
        title: str | None = None,
        meta: dict[str, Any] | None = None,
        create: bool = True,
    ) -> tuple[SessionRow | None, bool]:
        """The session with this key, created (when ``create``) if missing, in one
        transaction. Returns (row or None, whether it was created now)."""
        now = self._now()
        meta_json = dump_json(meta or {}, "session meta")

        def op(conn: sqlite3.Connection) -> tuple[SessionRow | None, bool]:
            found = _find_session(conn, channel, user_id, external_id)
            if found is not None or not create:
                return found, False
            row = _insert_session(conn, channel, user_id, external_id, title, meta_json, now)
            return row, True

        def find(conn: sqlite3.Connection) -> SessionRow | None:
            return _find_session(conn, channel, user_id, external_id)

        # Found in a read (the usual case) without taking the write lock; created in a
        # write transaction that looks again, so two openers never make two rows.
        found = await self._read("find session", find)
        if found is not None or not create:
            return found, False
        return await self._write("open session", op)

    async def get_session(self, session_id: int) -> SessionRow | None:
        return await self._read("get session", lambda conn: _fetch_session(conn, session_id))

    async def list_sessions(
        self,
        *,
        limit: int = 20,
        offset: int = 0,
        channel: str | None = None,
        user_id: str | Sequence[str] | None = None,
        project: str | None = None,
        hidden: Sequence[str] = (),
    ) -> list[SessionRow]:
        """Sessions with the most recent activity first (ties: newest id first),
        optionally only one channel's, one user's (or one of several users') and/or one
        project's (``meta``), and none of the ``hidden`` channels'."""
        check_non_negative(limit=limit, offset=offset)
        where, params = _session_filter(channel, user_id, project, hidden)

        def op(conn: sqlite3.Connection) -> list[SessionRow]:
            rows = conn.execute(
                _SESSION_SELECT + where + " ORDER BY s.updated_at DESC, s.id DESC LIMIT ? OFFSET ?",
                (*params, limit, offset),
            ).fetchall()
            return [_session_from_row(r) for r in rows]

        return await self._read("list sessions", op)

    async def sessions_by_external_id(
        self, external_id: str, *, channel: str | None = None, user_id: str | None = None
    ) -> list[SessionRow]:
        """Sessions with this external id (several channels or users may share one)."""
        where, params = _session_filter(channel, user_id)
        where = (where + " AND" if where else " WHERE") + " s.external_id = ?"

        def op(conn: sqlite3.Connection) -> list[SessionRow]:
            rows = conn.execute(
                _SESSION_SELECT + where + " ORDER BY s.id LIMIT 50", (*params, external_id)
            ).fetchall()
            return [_session_from_row(r) for r in rows]

        return await self._read("find sessions", op)

    async def count_sessions(
        self,
        *,
        channel: str | None = None,
        user_id: str | Sequence[str] | None = None,
        project: str | None = None,
        hidden: Sequence[str] = (),
    ) -> int:
        where, params = _session_filter(channel, user_id, project, hidden)

        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT COUNT(*) FROM sessions s" + where, params).fetchone()
            return int(row[0])

        return await self._read("count sessions", op)

    async def delete_sessions(self, ids: Sequence[int], *, children: str = "") -> int:
        """Delete sessions (their messages cascade); returns how many sessions were deleted.
        ``children``: a channel whose sessions naming one of these as ``parent_session``
        in their meta (a sub-agent's runs) go with them, in the same transaction."""
        unique = sorted({int(i) for i in ids})
        if not unique:
            return 0

        now = self._now()

        def op(conn: sqlite3.Connection) -> int:
            gone = list(unique)
            if children:
                marks = ", ".join("?" * len(unique))
                gone += [
                    int(r[0])
                    for r in conn.execute(
                        "SELECT id FROM sessions WHERE channel = ? AND CASE WHEN"
                        " json_valid(meta) THEN json_extract(meta, '$.parent_session') END"
                        f" IN ({marks})",
                        (children, *unique),
                    )
                ]
            cur = conn.executemany("DELETE FROM sessions WHERE id = ?", [(i,) for i in unique])
            deleted = cur.rowcount
            conn.executemany("DELETE FROM sessions WHERE id = ?", [(i,) for i in gone])
            # The audit follows the history: the rows of what went are emptied, recorded.
            prune_in(conn, self.audit_key, now, gone, "session deleted")
            # So is the list of the files its turns made (the files go with retention).
            conn.executemany("DELETE FROM artifacts WHERE session_id = ?", [(i,) for i in gone])
            return deleted

        return await self._write("delete sessions", op)

    async def first_words(self, ids: Sequence[int]) -> dict[int, str]:
        """The text of each session's first message of the owner (its first round's
        start, cut or not, failed or not): what a session without a title is known by."""
        unique = sorted({int(i) for i in ids})
        if not unique:
            return {}
        marks = ", ".join("?" * len(unique))

        def op(conn: sqlite3.Connection) -> dict[int, str]:
            rows = conn.execute(
                "SELECT m.session_id, m.id, m.role, m.content FROM messages m WHERE m.id IN"
                " (SELECT MIN(id) FROM messages WHERE starts_round = 1"
                f" AND session_id IN ({marks}) GROUP BY session_id)",
                unique,
            ).fetchall()
            return {int(r[0]): parse_message(*r[1:]).text for r in rows}

        return await self._read("first words", op)

    async def clear_messages(self, session_id: int) -> int:
        """Delete the session's messages, keeping the session; returns how many went."""
        now = self._now()

        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            prune_in(conn, self.audit_key, now, [session_id], "history cleared")
            conn.execute("DELETE FROM branches WHERE session_id = ?", (session_id,))
            conn.execute("UPDATE sessions SET branch = 0 WHERE id = ?", (session_id,))
            conn.execute("DELETE FROM artifacts WHERE session_id = ?", (session_id,))
            return cur.rowcount

        return await self._write("clear messages", op)

    async def set_title(self, session_id: int, title: str | None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))
            _require_session(cur, session_id)

        await self._write("set session title", op)

    async def update_meta(self, session_id: int, meta: dict[str, Any]) -> None:
        """Replace the session's meta dict."""
        meta_json = dump_json(meta, "session meta")

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute("UPDATE sessions SET meta = ? WHERE id = ?", (meta_json, session_id))
            _require_session(cur, session_id)

        await self._write("update session meta", op)

    async def set_mode(self, session_id: int, mode: str) -> str:
        """Set the session's mode; returns the mode it had. Raises StoreError for an
        unknown session or a mode that is not one."""

        def op(conn: sqlite3.Connection) -> str:
            row = conn.execute("SELECT mode FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise StoreError(f"session {session_id} not found")
            conn.execute("UPDATE sessions SET mode = ? WHERE id = ?", (mode, session_id))
            return str(row[0])

        return await self._write("set session mode", op)

    async def merge_meta(self, session_id: int, changes: dict[str, Any]) -> dict[str, Any]:
        """Set keys of the session's meta (a None value removes the key) in one write,
        so two changes to different keys never undo each other; returns the new meta."""

        def op(conn: sqlite3.Connection) -> dict[str, Any]:
            row = conn.execute("SELECT meta FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise StoreError(f"session {session_id} does not exist")
            meta = _load_meta(row[0])
            for key, value in changes.items():
                if value is None:
                    meta.pop(key, None)
                else:
                    meta[key] = value
            conn.execute(
                "UPDATE sessions SET meta = ? WHERE id = ?",
                (dump_json(meta, "session meta"), session_id),
            )
            return meta

        return await self._write("merge session meta", op)

    # ------------------------------------------------------------------ messages

    async def append_messages(self, session_id: int, messages: Sequence[Message]) -> list[int]:
        """Append messages in one transaction and bump the session's ``updated_at``.

        Returns the new message ids. Raises StoreError if the session does not exist.
        """
        if not messages:
            return []
        return await self._write("append messages", self._appending(session_id, messages, ()))

    def append_messages_soon(
        self, session_id: int, messages: Sequence[Message], rows: Sequence[RowId]
    ) -> Future[list[int]]:
        """:meth:`append_messages` queued without waiting (``write_soon``): ``rows[i]``
        gets the i-th message's id on the database thread, for the records queued behind
        it (the turn's ``message.received``: one hop with the message)."""
        return self.write_soon("append messages", self._appending(session_id, messages, rows))

    def _appending(
        self, session_id: int, messages: Sequence[Message], rows: Sequence[RowId]
    ) -> Callable[[sqlite3.Connection], list[int]]:
        now = self._now()
        # Serialised here, not on the db thread, so the stored content is a snapshot
        # even if the caller (e.g. after a cancel) goes on mutating the messages.
        values = [
            (m.role, dump_json(content_to_json(m.content), "message content"), m.is_user_input)
            for m in messages
        ]

        def op(conn: sqlite3.Connection) -> list[int]:
            cur = conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            _require_session(cur, session_id)
            ids = []
            for role, content, starts_round in values:
                cur = conn.execute(
                    "INSERT INTO messages (session_id, role, content, starts_round, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (session_id, role, content, int(starts_round), now),
                )
                ids.append(last_id(cur))
            for row, value in zip(rows, ids, strict=False):
                row.value = value
            return ids

        return op

    async def load_messages(self, session_id: int, *, rounds: int | None = None) -> list[Message]:
        """The session's messages in order, as a model is shown them: without the ones
        marked failed (:meth:`mark_failed`).

        With ``rounds=N``, only messages from the start of the N-th most recent round
        (a user-input message) onward; everything if there are fewer rounds.
        """
        stored = await self._load("load messages", session_id, rounds, with_failed=False)
        return [s.message for s in stored]

    async def load_transcript(
        self, session_id: int, *, rounds: int | None = None
    ) -> list[StoredMessage]:
        """The session's messages in order as history keeps them: failed ones included
        (and flagged), for showing and exporting a chat."""
        return await self._load("load transcript", session_id, rounds, with_failed=True)

    async def _load(
        self, op: str, session_id: int, rounds: int | None, *, with_failed: bool
    ) -> list[StoredMessage]:
        if rounds == 0:
            return []
        return await self._read(op, self._loading(session_id, rounds, with_failed=with_failed))

    def begin_turn_soon(
        self,
        session_id: int,
        *,
        rounds: int,
        meta: dict[str, Any],
        mode: str,
        fits: Callable[[list[StoredMessage]], bool],
        messages: Sequence[Message],
        rows: Sequence[RowId],
    ) -> Future[Begun]:
        """A turn's start in one job (issue 37), queued without waiting: the session, its
        last round as history keeps it (the transcript) and its last ``rounds`` rounds
        as a model is shown them, read in the transaction that then appends ``messages``
        (:meth:`append_messages_soon`) only if the session's meta and mode are still
        ``meta`` and ``mode`` (what the turn assumed, read by the conversation's turn
        before) and ``fits(transcript)``; else nothing is written (``Begun.ids`` None)."""
        transcript = self._loading(session_id, 1, with_failed=True)
        history = self._loading(session_id, rounds, with_failed=False)
        append = self._appending(session_id, messages, rows)

        def op(conn: sqlite3.Connection) -> Begun:
            session = _fetch_session(conn, session_id)
            told = transcript(conn)
            kept = [s.message for s in history(conn)] if rounds else []
            same = session is not None and session.meta == meta and session.mode == mode
            return Begun(session, told, kept, append(conn) if same and fits(told) else None)

        return self.write_soon("begin a turn", op)

    def _loading(
        self, session_id: int, rounds: int | None, *, with_failed: bool
    ) -> Callable[[sqlite3.Connection], list[StoredMessage]]:
        if rounds is not None:
            check_non_negative(rounds=rounds)
        # `starts_round = 1` literally, so the partial index applies.
        only_kept = "" if with_failed else " AND failed = 0 AND cut = 0"

        def fn(conn: sqlite3.Connection) -> list[StoredMessage]:
            start_id = 0
            if rounds is not None:
                row = conn.execute(
                    "SELECT id FROM messages WHERE session_id = ? AND starts_round = 1"
                    + only_kept
                    + " ORDER BY id DESC LIMIT 1 OFFSET ?",
                    (session_id, rounds - 1),
                ).fetchone()
                if row is not None:
                    start_id = int(row[0])
            rows = conn.execute(
                "SELECT id, role, content, failed, cut, starts_round FROM messages"
                " WHERE session_id = ? AND id >= ?" + only_kept + " ORDER BY id",
                (session_id, start_id),
            ).fetchall()
            self._parsed.read()
            parsed = self._parsed.message
            return [
                StoredMessage(
                    parsed(r[0], r[1], r[2]), bool(r[3]), int(r[4]), int(r[0]), bool(r[5])
                )
                for r in rows
            ]

        return fn

    async def mark_failed(self, session_id: int, message_ids: Sequence[int]) -> int:
        """Set these messages of the session aside: kept as history, never loaded for a
        model again (a message the provider refused for its content, and what its turn
        produced). Returns how many were marked."""
        unique = sorted({int(i) for i in message_ids})
        if not unique:
            return 0

        def op(conn: sqlite3.Connection) -> int:
            cur = conn.executemany(
                "UPDATE messages SET failed = 1 WHERE session_id = ? AND id = ?",
                [(session_id, i) for i in unique],
            )
            return cur.rowcount

        return await self._write("mark messages failed", op)

    async def count_rounds(self, session_id: int) -> int:
        """Rounds a model would be shown: failed or cut user messages do not count."""

        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT COUNT(*) FROM messages WHERE session_id = ? AND starts_round = 1"
                " AND failed = 0 AND cut = 0",
                (session_id,),
            ).fetchone()
            return int(row[0])

        return await self._read("count rounds", op)


def _require_session(cur: sqlite3.Cursor, session_id: int) -> None:
    if cur.rowcount == 0:
        raise StoreError(f"session {session_id} not found")


def _session_filter(
    channel: str | None,
    user_id: str | Sequence[str] | None,
    project: str | None = None,
    hidden: Sequence[str] = (),
) -> tuple[str, tuple[str, ...]]:
    clauses: list[str] = []
    params: list[str] = []
    if hidden:
        clauses.append(f"s.channel NOT IN ({', '.join('?' * len(hidden))})")
        params.extend(hidden)
    if project is not None:  # a row whose meta is not JSON is in no project
        clauses.append(
            "CASE WHEN json_valid(s.meta) THEN json_extract(s.meta, '$.project') END = ?"
        )
        params.append(project)
    if channel is not None:
        clauses.append("s.channel = ?")
        params.append(channel)
    if isinstance(user_id, str):
        clauses.append("s.user_id = ?")
        params.append(user_id)
    elif user_id is not None:
        clauses.append(f"s.user_id IN ({', '.join('?' * len(user_id))})")
        params.extend(user_id)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), tuple(params)


def _find_session(
    conn: sqlite3.Connection, channel: str, user_id: str, external_id: str
) -> SessionRow | None:
    row = conn.execute(
        _SESSION_SELECT + " WHERE s.channel = ? AND s.user_id = ? AND s.external_id = ?",
        (channel, user_id, external_id),
    ).fetchone()
    return None if row is None else _session_from_row(row)


def _insert_session(
    conn: sqlite3.Connection,
    channel: str,
    user_id: str,
    external_id: str | None,
    title: str | None,
    meta_json: str,
    now: str,
    mode: str = "act",
) -> SessionRow:
    cur = conn.execute(
        "INSERT INTO sessions (channel, user_id, external_id, title, meta, created_at,"
        " updated_at, mode) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (channel, user_id, external_id, title, meta_json, now, now, mode),
    )
    session_id = last_id(cur)
    if external_id is None:
        conn.execute(
            "UPDATE sessions SET external_id = ? WHERE id = ?",
            (f"session-{session_id}", session_id),
        )
    row = _fetch_session(conn, session_id)
    if row is None:  # pragma: no cover - just inserted in this transaction
        raise StoreError("session vanished after insert")
    return row


def _fetch_session(conn: sqlite3.Connection, session_id: int) -> SessionRow | None:
    row = conn.execute(_SESSION_SELECT + " WHERE s.id = ?", (session_id,)).fetchone()
    return None if row is None else _session_from_row(row)


def _load_meta(meta_json: Any) -> dict[str, Any]:
    try:
        meta = json.loads(meta_json)
    except (TypeError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _session_from_row(row: tuple[Any, ...]) -> SessionRow:
    sid, channel, title, meta_json, created_at, updated_at, count, user_id, external_id, mode = row
    meta = _load_meta(meta_json)
    if not meta and meta_json not in ("{}", None):
        log.warning("session %d has unreadable meta; using {}", sid)
    return SessionRow(
        id=int(sid),
        channel=str(channel),
        title=title,
        meta=meta,
        created_at=datetime.fromisoformat(created_at),
        updated_at=datetime.fromisoformat(updated_at),
        message_count=int(count),
        user_id=str(user_id),
        external_id=str(external_id or f"session-{sid}"),
        mode=str(mode),
    )
