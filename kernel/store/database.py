"""The database thread under the Store: one SQLite connection, used only from one
dedicated worker thread, and the transactions every table family runs on it.

Store-internal: the table modules (``sessions``, ``memories``, ``settings``, ``cron``,
``channels``) build on :class:`Database` and the helpers below; other packages use
:class:`kernel.store.db.Store`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from kernel.core.errors import StoreError
from kernel.core.surrogates import mend_all

log = logging.getLogger(__name__)

T = TypeVar("T")


class Connection(sqlite3.Connection):
    """SQLite's connection, for text that may hold a lone surrogate (valid JSON, not
    text: a model's output, a tool's result). SQLite cannot encode one, and binding fails
    before the statement runs: it runs again with U+FFFD for each, instead of failing the
    write. Nothing is checked while all is well."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except UnicodeEncodeError:
            return super().execute(sql, mend_all(parameters))


class Database:
    """The connection's state and the async entry points that run SQL on its thread.
    Opening, migrating and closing are :class:`kernel.store.db.Store`'s."""

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
        self._clock = clock or utcnow
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None  # touched only on the db thread
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self.schema_version = 0
        # The audit chain's HMAC key (kernel/audit/key.py), set at start: the rows
        # appended from then on are keyed; None (tests, a bare Store): plain SHA-256.
        self.audit_key: bytes | None = None

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
        with translated(op):
            return fn(conn)

    async def _write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(op, lambda conn: transaction(conn, fn, "BEGIN IMMEDIATE"))

    async def _read(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        # A read transaction gives multi-statement reads one consistent snapshot.
        return await self._run(op, lambda conn: transaction(conn, fn, "BEGIN"))

    async def write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction on the db thread: for tables kept in
        modules of their own (``kernel/store/cron.py``)."""
        return await self._write(op, fn)

    async def read(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one read transaction on the db thread."""
        return await self._read(op, fn)

    def now(self) -> datetime:
        """The time the store stamps rows with (``updated_at``, ``created_at``)."""
        return self._clock()

    def _now(self) -> str:
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the store clock must return timezone-aware datetimes")
        return now.astimezone(UTC).isoformat(timespec="seconds")


def utcnow() -> datetime:
    return datetime.now(UTC)


def stamp(value: datetime) -> str:
    """A stored time: UTC ISO with milliseconds, one format, so that comparing the text
    compares the times (the mailbox and the usage ledger)."""
    if value.tzinfo is None:
        raise ValueError("stored times must be timezone-aware")
    return value.astimezone(UTC).isoformat(timespec="milliseconds")


def parse_stamp(value: str) -> datetime:
    return datetime.fromisoformat(value)


def error_code(exc: sqlite3.Error) -> str:
    return getattr(exc, "sqlite_errorname", None) or type(exc).__name__


@contextmanager
def translated(op: str) -> Iterator[None]:
    # Only the SQLite error *code* goes into the message: never row values or content.
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"{op} failed: {error_code(exc)}") from exc


def transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
    conn.execute(begin)
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                log.warning("rollback failed: %s", error_code(exc))
        raise
    return result


def last_id(cur: sqlite3.Cursor) -> int:
    if cur.lastrowid is None:  # pragma: no cover - only after a non-INSERT
        raise StoreError("insert returned no row id")
    return cur.lastrowid


def check_non_negative(**values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must not be negative")


def dump_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON-serialisable") from exc
