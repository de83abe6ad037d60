"""SQLite persistence: :class:`Store`, the Kernel database.

One connection, used only from one dedicated worker thread; every public method is
async and runs its SQL there, so database work never blocks the event loop. The
methods come by table family: sessions and messages (``sessions.py``), a session's
branches (``branches.py``), settings
(``settings.py``), memories (``memories.py``); ``cron.py`` and ``channels.py`` wrap a
Store for their own tables. The thread and its transactions are ``database.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from kernel.config.backup import BACKUPS_FOLDER
from kernel.core.errors import StoreError
from kernel.store.branches import BranchTables
from kernel.store.database import (
    RAW,
    Connection,
    Job,
    error_code,
    transaction,
    translated,
)
from kernel.store.memories import (
    MEMORY_CATEGORIES,
    DuplicateMemory,
    MemoryRow,
    MemoryTables,
    has_backlog,
)
from kernel.store.memory_versions import MemoryVersionTables
from kernel.store.migrations import (
    MEMORIES_FTS_SQL,
    MIGRATIONS,
    Migration,
    MigrationFailed,
    fts5_supported,
    get_version,
    migrate,
)
from kernel.store.sessions import SessionRow, SessionTables, StoredMessage
from kernel.store.settings import SettingTables
from kernel.store.snapshot import copy_back, copy_into, pre_upgrade_name
from kernel.store.trouble import unwritable_file
from kernel.store.vectors import MemoryVectorTables

__all__ = [
    "MEMORY_CATEGORIES",
    "DuplicateMemory",
    "MemoryRow",
    "SessionRow",
    "Store",
    "StoredMessage",
]

log = logging.getLogger(__name__)


class Store(
    SessionTables,
    BranchTables,
    SettingTables,
    MemoryTables,
    MemoryVectorTables,
    MemoryVersionTables,
):
    """The Kernel database. ``start()`` before use, ``close()`` when done."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], datetime] | None = None,
        fts5: bool = True,
        migrations: Sequence[Migration] | None = None,
        backups: Path | None = None,
    ) -> None:
        """``migrations``: the schema's steps (a test injects one that fails);
        ``backups``: where the snapshot before an upgrade goes (data/backups)."""
        super().__init__(path, clock=clock, fts5=fts5)
        self._migrations = migrations
        self.backups = backups if backups is not None else self.path.parent / BACKUPS_FOLDER

    async def start(self) -> None:
        """Create the parent directory, open the database, set pragmas and migrate.
        After a failure (StoreError) it may be called again."""
        if self._closed:
            raise StoreError("store is closed")
        if self._executor is not None:
            return
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernel-db")
        self._executor = executor
        loop = asyncio.get_running_loop()
        try:
            self.schema_version = await loop.run_in_executor(executor, self._open)
        except Exception:
            # _open ran and failed, closing what it opened: start() may be tried again.
            executor.shutdown(wait=False)
            self._executor = None
            raise
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
        self._closing = asyncio.ensure_future(self._close_after_queue(executor))
        try:
            await asyncio.shield(self._closing)
        finally:
            executor.shutdown(wait=False)

    async def _close_after_queue(self, executor: ThreadPoolExecutor) -> None:
        # Every call already queued lands first: a last job behind them, then the close.
        loop = asyncio.get_running_loop()
        last = self._courier.send(Job("close", lambda conn: None, RAW, loop.create_future()))
        with contextlib.suppress(StoreError):
            await last
        await loop.run_in_executor(executor, self._close_conn)

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the database directory: {exc.strerror}") from exc
        # SQLite opens a file it cannot write read-only and fails only at the first
        # write: a database file that refuses writes is named here, before it opens.
        refused = unwritable_file(self.path)
        if refused is not None:
            raise StoreError(f"a database file cannot be written: {refused.strerror}") from refused
        with translated("open database"):
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, factory=Connection
            )
            self._conn = conn
            try:
                conn.execute("PRAGMA busy_timeout = 5000")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                version = self._upgrade(conn)
                self._detect_fts5(conn)
            except BaseException:
                # Not opened after all (a full or read-only disk, say): nothing to
                # checkpoint, and start() may be tried again.
                self._conn = None
                conn.close()
                raise
            return version

    def _upgrade(self, conn: sqlite3.Connection) -> int:
        """Migrate; a database that exists at an older schema is first copied into the
        backups folder (SQLite's online backup, streamed to the file), and put back
        from that copy when a migration fails (MigrationFailed says so). A database at
        the current schema costs one PRAGMA read here."""
        steps = MIGRATIONS if self._migrations is None else self._migrations
        before = get_version(conn)
        if not 0 < before < len(steps):
            return migrate(conn, steps)
        self.backups.mkdir(mode=0o700, parents=True, exist_ok=True)
        snapshot = self.backups / pre_upgrade_name(before, len(steps), self._clock())
        copy_into(conn, snapshot)
        log.info("schema v%d -> v%d: snapshot taken first", before, len(steps))
        try:
            return migrate(conn, steps)
        except MigrationFailed as exc:
            copy_back(snapshot, conn)
            exc.old, exc.snapshot = get_version(conn), snapshot
            log.error(
                "migration %d (%s) failed; the database was put back to v%d",
                exc.number,
                exc.name,
                exc.old,
            )
            raise

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

            transaction(conn, create, "BEGIN IMMEDIATE")
        self.memory_index_pending = has_backlog(conn)

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute("PRAGMA optimize")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            log.warning("database checkpoint on close failed: %s", error_code(exc))
        finally:
            conn.close()
