"""SQLite persistence for sessions, messages, settings and memories.

One connection, used only from one dedicated worker thread; every public method is
async and runs its SQL there, so database work never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from kernel.core.errors import StoreError
from kernel.core.messages import Message, Role, content_from_json, content_to_json
from kernel.store.migrations import (
    MEMORIES_FTS_SQL,
    MIGRATIONS,
    fts5_supported,
    memory_key,
    migrate,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

MEMORY_CATEGORIES: tuple[str, ...] = ("user", "feedback", "project", "reference")
# Each term costs one bound parameter and one LIKE scan; a pasted essay is not a query.
MAX_SEARCH_TERMS = 32


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


@dataclass(slots=True)
class MemoryRow:
    id: int
    text: str
    category: str | None
    created_at: datetime


_SESSION_SELECT = """
    SELECT s.id, s.channel, s.title, s.meta, s.created_at, s.updated_at,
           (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id),
           s.user_id, s.external_id
    FROM sessions s
"""
_MEMORY_SELECT = "SELECT id, text, category, created_at FROM memories"


class Store:
    """The Kernel database. ``start()`` before use, ``close()`` when done."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], datetime] | None = None,
        fts5: bool = True,
    ) -> None:
        """``fts5=False`` searches memories with LIKE even where SQLite has FTS5."""
        self.path = Path(path)
        self._want_fts5 = fts5
        # Set at start: whether memory search uses FTS5 (detected) or LIKE.
        self.fts5_available = False
        # True while some memories are not in the full-text index yet.
        self.memory_index_pending = False
        self._clock = clock or _utcnow
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None  # touched only on the db thread
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self.schema_version = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Create the parent directory, open the database, set pragmas and migrate."""
        if self._closed:
            raise StoreError("store is closed")
        if self._executor is not None:
            return
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernel-db")
        self._executor = executor
        loop = asyncio.get_running_loop()
        try:
            self.schema_version = await loop.run_in_executor(executor, self._open)
        except BaseException:
            # Queued behind _open, so it also closes a connection opened after a cancel.
            self._closed = True
            executor.submit(self._close_conn)
            executor.shutdown(wait=False)
            self._executor = None
            raise

    async def close(self) -> None:
        """Checkpoint the WAL, close the connection and stop the db thread. Idempotent."""
        if self._closing is not None:
            await asyncio.shield(self._closing)
            return
        self._closed = True
        executor = self._executor
        if executor is None:
            return
        loop = asyncio.get_running_loop()
        # FIFO on one worker: every call already queued finishes before the close.
        self._closing = loop.run_in_executor(executor, self._close_conn)
        try:
            await asyncio.shield(self._closing)
        finally:
            executor.shutdown(wait=False)

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the database directory: {exc.strerror}") from exc
        with _translated("open database"):
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._conn = conn
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            version = migrate(conn, MIGRATIONS)
            self._detect_fts5(conn)
            return version

    def _detect_fts5(self, conn: sqlite3.Connection) -> None:
        self.fts5_available = self._want_fts5 and fts5_supported(conn)
        if not self.fts5_available:
            log.info(
                "memory search: LIKE (FTS5 %s)", "unavailable" if self._want_fts5 else "turned off"
            )
            return
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories_fts'"
        ).fetchone()
        if exists is None:
            # Migrated where SQLite lacked FTS5: build the index now that it is here.
            def create(conn: sqlite3.Connection) -> None:
                conn.execute(MEMORIES_FTS_SQL)
                conn.execute("UPDATE memories SET tokens = NULL")

            _transaction(conn, create, "BEGIN IMMEDIATE")
        self.memory_index_pending = _has_backlog(conn)

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute("PRAGMA optimize")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            log.warning("database checkpoint on close failed: %s", _error_code(exc))
        finally:
            conn.close()

    # ------------------------------------------------------------------ plumbing

    async def _run(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the db thread; ``op`` names it in errors.

        A cancelled caller does not interrupt ``fn``: it either never starts (still
        queued) or runs to its COMMIT/ROLLBACK on the db thread.
        """
        if self._closed:
            raise StoreError("store is closed")
        executor = self._executor
        if executor is None:
            raise StoreError("store is not started")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, self._call, op, fn)

    def _call(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise StoreError("store is closed")
        with _translated(op):
            return fn(conn)

    async def _write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(op, lambda conn: _transaction(conn, fn, "BEGIN IMMEDIATE"))

    async def _read(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        # A read transaction gives multi-statement reads one consistent snapshot.
        return await self._run(op, lambda conn: _transaction(conn, fn, "BEGIN"))

    async def write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction on the db thread: for tables kept in
        modules of their own (``kernel/store/cron.py``)."""
        return await self._write(op, fn)

    async def read(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one read transaction on the db thread."""
        return await self._read(op, fn)

    def _now(self) -> str:
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the store clock must return timezone-aware datetimes")
        return now.astimezone(UTC).isoformat(timespec="seconds")

    # ------------------------------------------------------------------ sessions

    async def create_session(
        self,
        channel: str,
        *,
        title: str | None = None,
        meta: dict[str, Any] | None = None,
        user_id: str = "",
        external_id: str | None = None,
    ) -> SessionRow:
        """A new session; ``external_id`` defaults to ``session-<id>``. Raises StoreError
        when (channel, user_id, external_id) is taken."""
        now = self._now()
        meta_json = _dump_json(meta or {}, "session meta")

        def op(conn: sqlite3.Connection) -> SessionRow:
            return _insert_session(conn, channel, user_id, external_id, title, meta_json, now)

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
        meta_json = _dump_json(meta or {}, "session meta")

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
        user_id: str | None = None,
    ) -> list[SessionRow]:
        """Sessions with the most recent activity first (ties: newest id first),
        optionally only one channel's and/or one user's."""
        _check_non_negative(limit=limit, offset=offset)
        where, params = _session_filter(channel, user_id)

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
        self, *, channel: str | None = None, user_id: str | None = None
    ) -> int:
        where, params = _session_filter(channel, user_id)

        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT COUNT(*) FROM sessions s" + where, params).fetchone()
            return int(row[0])

        return await self._read("count sessions", op)

    async def delete_sessions(self, ids: Sequence[int]) -> int:
        """Delete sessions (their messages cascade); returns how many sessions were deleted."""
        unique = sorted({int(i) for i in ids})
        if not unique:
            return 0

        def op(conn: sqlite3.Connection) -> int:
            cur = conn.executemany("DELETE FROM sessions WHERE id = ?", [(i,) for i in unique])
            return cur.rowcount

        return await self._write("delete sessions", op)

    async def clear_messages(self, session_id: int) -> int:
        """Delete the session's messages, keeping the session; returns how many went."""
        now = self._now()

        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            return cur.rowcount

        return await self._write("clear messages", op)

    async def set_title(self, session_id: int, title: str | None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))
            _require_session(cur, session_id)

        await self._write("set session title", op)

    async def update_meta(self, session_id: int, meta: dict[str, Any]) -> None:
        """Replace the session's meta dict."""
        meta_json = _dump_json(meta, "session meta")

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute("UPDATE sessions SET meta = ? WHERE id = ?", (meta_json, session_id))
            _require_session(cur, session_id)

        await self._write("update session meta", op)

    # ------------------------------------------------------------------ messages

    async def append_messages(self, session_id: int, messages: Sequence[Message]) -> list[int]:
        """Append messages in one transaction and bump the session's ``updated_at``.

        Returns the new message ids. Raises StoreError if the session does not exist.
        """
        if not messages:
            return []
        now = self._now()
        # Serialised here, not on the db thread, so the stored content is a snapshot
        # even if the caller (e.g. after a cancel) goes on mutating the messages.
        rows = [
            (m.role, _dump_json(content_to_json(m.content), "message content"), m.is_user_input)
            for m in messages
        ]

        def op(conn: sqlite3.Connection) -> list[int]:
            cur = conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            _require_session(cur, session_id)
            ids = []
            for role, content, starts_round in rows:
                cur = conn.execute(
                    "INSERT INTO messages (session_id, role, content, starts_round, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (session_id, role, content, int(starts_round), now),
                )
                ids.append(_last_id(cur))
            return ids

        return await self._write("append messages", op)

    async def load_messages(self, session_id: int, *, rounds: int | None = None) -> list[Message]:
        """The session's messages in order.

        With ``rounds=N``, only messages from the start of the N-th most recent round
        (a user-input message) onward; everything if there are fewer rounds.
        """
        if rounds is not None:
            _check_non_negative(rounds=rounds)
            if rounds == 0:
                return []

        def op(conn: sqlite3.Connection) -> list[Message]:
            start_id = 0
            if rounds is not None:
                # `starts_round = 1` literally, so the partial index applies.
                row = conn.execute(
                    "SELECT id FROM messages WHERE session_id = ? AND starts_round = 1"
                    " ORDER BY id DESC LIMIT 1 OFFSET ?",
                    (session_id, rounds - 1),
                ).fetchone()
                if row is not None:
                    start_id = int(row[0])
            rows = conn.execute(
                "SELECT id, role, content FROM messages WHERE session_id = ? AND id >= ?"
                " ORDER BY id",
                (session_id, start_id),
            ).fetchall()
            return [_message_from_row(r) for r in rows]

        return await self._read("load messages", op)

    async def count_rounds(self, session_id: int) -> int:
        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT COUNT(*) FROM messages WHERE session_id = ? AND starts_round = 1",
                (session_id,),
            ).fetchone()
            return int(row[0])

        return await self._read("count rounds", op)

    # ------------------------------------------------------------------ settings

    async def check_writable(self) -> None:
        """A real write (and its commit) to prove the database accepts writes now."""
        now = self._now()

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES ('health_probe', ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at",
                (now, now),
            )

        await self._write("write probe", op)

    async def get_setting(self, key: str) -> str | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        return await self._read("get setting", op)

    async def set_setting(self, key: str, value: str) -> None:
        now = self._now()

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE"
                " SET value = excluded.value, updated_at = excluded.updated_at",
                (key, value, now),
            )

        await self._write("set setting", op)

    async def delete_setting(self, key: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM settings WHERE key = ?", (key,))

        await self._write("delete setting", op)

    # ------------------------------------------------------------------ memories
    #
    # Kernel cuts the text into tokens (jieba, in kernel/memory); the store keeps the
    # row in ``memories`` and, when FTS5 is in use, the same tokens in ``memories_fts``.

    async def add_memory(
        self, text: str, category: str | None = None, *, tokens: str | None = None
    ) -> tuple[MemoryRow, bool]:
        """Store a memory; returns (row, created). The same fact (whitespace and case
        aside) returns the existing row and False.

        ``tokens``: the text's search tokens; indexed at once when FTS5 is in use,
        otherwise the row waits in the backlog (:meth:`memory_backlog`).
        Raises ValueError for empty text or an unknown category.
        """
        clean = text.strip()
        if not clean:
            raise ValueError("memory text is empty")
        if category is not None and category not in MEMORY_CATEGORIES:
            raise ValueError(f"memory category must be one of {', '.join(MEMORY_CATEGORIES)}")
        now = self._now()
        key = memory_key(clean)
        index = tokens is not None and self.fts5_available

        def op(conn: sqlite3.Connection) -> tuple[MemoryRow, bool]:
            row = conn.execute(
                _MEMORY_SELECT + " WHERE key = ? ORDER BY id LIMIT 1", (key,)
            ).fetchone()
            if row is not None:
                return _memory_from_row(row), False
            cur = conn.execute(
                "INSERT INTO memories (text, category, created_at, key, tokens)"
                " VALUES (?, ?, ?, ?, ?)",
                (clean, category, now, key, tokens if index else None),
            )
            memory_id = _last_id(cur)
            if index:
                conn.execute(
                    "INSERT INTO memories_fts (rowid, tokens) VALUES (?, ?)", (memory_id, tokens)
                )
            return MemoryRow(memory_id, clean, category, datetime.fromisoformat(now)), True

        result = await self._write("add memory", op)
        if result[1] and not index and self.fts5_available:
            self.memory_index_pending = True
        return result

    async def list_memories(self, *, limit: int = 200) -> list[MemoryRow]:
        """Newest first."""
        _check_non_negative(limit=limit)

        def op(conn: sqlite3.Connection) -> list[MemoryRow]:
            rows = conn.execute(_MEMORY_SELECT + " ORDER BY id DESC LIMIT ?", (limit,))
            return [_memory_from_row(r) for r in rows.fetchall()]

        return await self._read("list memories", op)

    async def count_memories(self) -> int:
        def op(conn: sqlite3.Connection) -> int:
            return int(conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0])

        return await self._read("count memories", op)

    async def search_memories_fts(self, match: str, *, limit: int = 5) -> list[MemoryRow]:
        """Memories matching an FTS5 query (built by kernel/memory/tokens.py), best
        BM25 rank first. Raises StoreError when FTS5 is not in use."""
        _check_non_negative(limit=limit)
        if not self.fts5_available:
            raise StoreError("full-text search is not available (SQLite without FTS5)")
        if not match or limit == 0:
            return []
        # Joined with memories: a row deleted while FTS5 was unavailable may linger in
        # the index (ids are never reused, so it can never match another memory).
        sql = (
            "SELECT m.id, m.text, m.category, m.created_at"
            " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
            " WHERE memories_fts MATCH ? ORDER BY memories_fts.rank LIMIT ?"
        )

        def op(conn: sqlite3.Connection) -> list[MemoryRow]:
            return [_memory_from_row(r) for r in conn.execute(sql, (match, limit)).fetchall()]

        return await self._read("search memories", op)

    async def search_memories_like(
        self, terms: Sequence[str], *, limit: int = 5, newest: int | None = None
    ) -> list[MemoryRow]:
        """Memories containing any of ``terms`` (substring match, the fallback without
        FTS5). Ranked by how many distinct terms match, then newest first.
        Case-insensitive for ASCII only (SQLite LIKE). ``newest``: look only at that
        many of the most recent memories (a scan's cost grows with the table)."""
        _check_non_negative(limit=limit)
        # LIKE folds ASCII case only, so terms are deduplicated the same way.
        unique: dict[str, str] = {}
        for term in terms:
            if term:
                unique.setdefault(_ascii_lower(term), term)
        chosen = list(unique.values())[:MAX_SEARCH_TERMS]
        if not chosen or limit == 0:
            return []
        score = " + ".join(["(text LIKE ? ESCAPE '\\')"] * len(chosen))
        window = "" if newest is None else " ORDER BY id DESC LIMIT ?"
        sql = (
            f"SELECT id, text, category, created_at FROM"
            f" (SELECT *, {score} AS score FROM memories{window})"
            " WHERE score > 0 ORDER BY score DESC, id DESC LIMIT ?"
        )
        params: list[Any] = [f"%{_escape_like(t)}%" for t in chosen]
        if newest is not None:
            params.append(newest)
        params.append(limit)

        def op(conn: sqlite3.Connection) -> list[MemoryRow]:
            return [_memory_from_row(r) for r in conn.execute(sql, params).fetchall()]

        return await self._read("search memories", op)

    async def delete_memories(self, ids: Sequence[int]) -> int:
        """Delete memories (and their index entries); returns how many were deleted."""
        unique = sorted({int(i) for i in ids})
        if not unique:
            return 0
        fts = self.fts5_available

        def op(conn: sqlite3.Connection) -> int:
            deleted = 0
            for memory_id in unique:
                row = conn.execute(
                    "SELECT tokens FROM memories WHERE id = ?", (memory_id,)
                ).fetchone()
                if row is None:
                    continue
                if fts and row[0] is not None:
                    conn.execute(
                        "INSERT INTO memories_fts (memories_fts, rowid, tokens)"
                        " VALUES ('delete', ?, ?)",
                        (memory_id, row[0]),
                    )
                conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
                deleted += 1
            return deleted

        return await self._write("delete memories", op)

    async def memory_backlog(self, limit: int = 500) -> list[tuple[int, str]]:
        """(id, text) of memories not yet in the full-text index, oldest first."""
        _check_non_negative(limit=limit)

        def op(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            rows = conn.execute(
                "SELECT id, text FROM memories WHERE tokens IS NULL ORDER BY id LIMIT ?",
                (limit,),
            ).fetchall()
            return [(int(i), str(text)) for i, text in rows]

        return await self._read("read memory backlog", op)

    async def index_memories(self, rows: Sequence[tuple[int, str]]) -> int:
        """Put (id, tokens) into the full-text index; returns how many were indexed.

        A row deleted or indexed meanwhile is skipped, so this is safe to race with
        adds and deletes. Clears :attr:`memory_index_pending` once nothing is left.
        """
        if not self.fts5_available:
            return 0
        pairs = list(rows)

        def op(conn: sqlite3.Connection) -> tuple[int, bool]:
            indexed = 0
            for memory_id, tokens in pairs:
                cur = conn.execute(
                    "UPDATE memories SET tokens = ? WHERE id = ? AND tokens IS NULL",
                    (tokens, memory_id),
                )
                if cur.rowcount:
                    conn.execute(
                        "INSERT INTO memories_fts (rowid, tokens) VALUES (?, ?)",
                        (memory_id, tokens),
                    )
                    indexed += 1
            return indexed, _has_backlog(conn)

        indexed, pending = await self._write("index memories", op)
        self.memory_index_pending = pending
        return indexed


# ---------------------------------------------------------------------- helpers


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _error_code(exc: sqlite3.Error) -> str:
    return getattr(exc, "sqlite_errorname", None) or type(exc).__name__


@contextmanager
def _translated(op: str) -> Iterator[None]:
    # Only the SQLite error *code* goes into the message: never row values or content.
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"{op} failed: {_error_code(exc)}") from exc


def _transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
    conn.execute(begin)
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                log.warning("rollback failed: %s", _error_code(exc))
        raise
    return result


def _last_id(cur: sqlite3.Cursor) -> int:
    if cur.lastrowid is None:  # pragma: no cover - only after a non-INSERT
        raise StoreError("insert returned no row id")
    return cur.lastrowid


def _require_session(cur: sqlite3.Cursor, session_id: int) -> None:
    if cur.rowcount == 0:
        raise StoreError(f"session {session_id} not found")


def _check_non_negative(**values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must not be negative")


def _dump_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON-serialisable") from exc


def _has_backlog(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM memories WHERE tokens IS NULL)").fetchone()
    return bool(row[0])


def _ascii_lower(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _session_filter(channel: str | None, user_id: str | None) -> tuple[str, tuple[str, ...]]:
    clauses, params = [], []
    if channel is not None:
        clauses.append("s.channel = ?")
        params.append(channel)
    if user_id is not None:
        clauses.append("s.user_id = ?")
        params.append(user_id)
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
) -> SessionRow:
    cur = conn.execute(
        "INSERT INTO sessions (channel, user_id, external_id, title, meta, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (channel, user_id, external_id, title, meta_json, now, now),
    )
    session_id = _last_id(cur)
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


def _session_from_row(row: tuple[Any, ...]) -> SessionRow:
    sid, channel, title, meta_json, created_at, updated_at, count, user_id, external_id = row
    try:
        meta = json.loads(meta_json)
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        log.warning("session %d has unreadable meta; using {}", sid)
        meta = {}
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
    )


def _message_from_row(row: tuple[Any, ...]) -> Message:
    message_id, role, content = row
    try:
        blocks = content_from_json(json.loads(content))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(f"message {message_id} has unreadable content") from exc
    return Message(role=cast(Role, role), content=blocks)


def _memory_from_row(row: tuple[Any, ...]) -> MemoryRow:
    mid, text, category, created_at = row
    return MemoryRow(
        id=int(mid),
        text=str(text),
        category=category,
        created_at=datetime.fromisoformat(created_at),
    )
