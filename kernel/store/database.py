"""The database thread under the Store: one SQLite connection, used only from one
dedicated worker thread, and the transactions every table family runs on it.

Calls go to the thread by hops (:class:`Courier`): the calls queued while a hop is on the
thread, or in the same turn of the event loop, go together, in one transaction, each in
a SAVEPOINT of its own when it writes (group commit, :func:`run_hop`); a caller is
answered once its transaction committed.

Store-internal: the table modules (``sessions``, ``memories``, ``settings``, ``cron``,
``channels``) build on :class:`Database` and the helpers below; other packages use
:class:`kernel.store.db.Store`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from asyncio import Future
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from kernel.core.errors import StoreError
from kernel.core.rows import RowId as RowId  # the store's callers take it from here
from kernel.core.surrogates import mend_all

log = logging.getLogger(__name__)

T = TypeVar("T")

# What a job asks of the db thread: a write transaction, a read transaction, or its own
# statements outside any transaction (opening, closing, tests).
WRITE, READ, RAW = "write", "read", "raw"
# A job's outcome: (True, its result) or (False, the exception its caller gets).
Outcome = tuple[bool, Any]
# A writing job's own savepoint, and how it ends (constant text: SQLite's statement
# cache finds each at once).
SAVEPOINT, UNDO, RELEASE = "SAVEPOINT job", "ROLLBACK TO job", "RELEASE job"
# How long a write no caller waits for waits for company before its hop leaves (the
# longest a record of something done is not yet on disk).
LINGER = 0.005


@dataclass(slots=True)
class Job:
    """One call waiting for the db thread; ``future`` gets its result or its error."""

    op: str
    fn: Callable[[sqlite3.Connection], Any]
    kind: str
    future: Future[Any]


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
        self._courier = Courier(lambda: self._executor, self._connection)

    async def _run(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the db thread outside any transaction; ``op`` names it
        in errors.

        A cancelled caller does not interrupt ``fn``: it either never starts (still
        queued) or runs to its COMMIT/ROLLBACK on the db thread.
        """
        return await self._submit(op, fn, RAW)

    async def _write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._submit(op, fn, WRITE)

    async def _read(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        # A read transaction gives multi-statement reads one consistent snapshot.
        return await self._submit(op, fn, READ)

    def _submit(
        self,
        op: str,
        fn: Callable[[sqlite3.Connection], T],
        kind: str,
        *,
        waited: bool = True,
        linger: float | None = None,
    ) -> Future[T]:
        """Queue one job for the db thread (:class:`Courier`)."""
        if self._closed:
            raise StoreError("store is closed")
        if self._executor is None:
            raise StoreError("store is not started")
        future = asyncio.get_running_loop().create_future()
        return self._courier.send(Job(op, fn, kind, future), waited=waited, linger=linger)

    def _connection(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise StoreError("store is closed")
        return conn

    async def write(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction on the db thread: for tables kept in
        modules of their own (``kernel/store/cron.py``)."""
        return await self._write(op, fn)

    def write_queued(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """:meth:`write`, queued the moment it is called (its hop leaves in this turn of
        the loop) and awaited when the caller likes: records queued behind it (``write_soon``)
        ride its hop and its transaction."""
        return self._submit(op, fn, WRITE)

    def write_soon(
        self, op: str, fn: Callable[[sqlite3.Connection], T], *, linger: float | None = None
    ) -> Future[T]:
        """:meth:`write` for a caller that need not wait for it (a record of what was
        done): queued now, in order behind every call before it, and written with the
        next hop together with what is queued meanwhile, at the latest ``LINGER`` seconds
        from now (``linger``: another bound, for a record whose loss in a crash is
        harmless). The future tells how it ended; StoreError at once when the store is
        closed."""
        return self._submit(op, fn, WRITE, waited=False, linger=linger)

    async def outside(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the db thread outside any transaction, once every call
        queued before it has committed (what it reads is on disk): for work whose effect
        outside the database must never lead it (the audit anchor)."""
        return await self._run(op, fn)

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


class Courier:
    """Carries queued jobs to the db thread: every job queued while a hop is on the db
    thread, or in the same turn of the event loop, goes with the next hop, in the order
    queued (group commit: :func:`run_hop`). A hop leaves at once for a job its caller
    waits for; jobs no one waits for (``Database.write_soon``) wait up to ``LINGER`` for
    company. A job whose caller was cancelled before its hop left never runs."""

    def __init__(
        self,
        executor: Callable[[], ThreadPoolExecutor | None],
        connection: Callable[[], sqlite3.Connection],
    ) -> None:
        self._executor = executor
        self._connection = connection
        self._queue: list[Job] = []  # waiting for the next hop, in order
        self._waited = False  # a caller waits for a job in the queue
        self._due: float | None = None  # the loop time the queue's records wait until
        self._flying = False  # a hop is on the db thread
        self._next: asyncio.Handle | None = None  # the next hop, scheduled
        self._next_at: float | None = None  # when ``_next`` is a lingering timer
        self.hops = 0  # hand-offs so far
        self.linger = LINGER

    def send(self, job: Job, *, waited: bool = True, linger: float | None = None) -> Future[Any]:
        """Queue ``job``; ``linger``: how long a job no one waits for may wait for company
        (``LINGER`` unless said): the hop leaves at the earliest of its jobs' bounds."""
        loop = job.future.get_loop()
        self._queue.append(job)
        self._waited = self._waited or waited
        if not waited:
            due = loop.time() + (self.linger if linger is None else linger)
            self._due = due if self._due is None else min(self._due, due)
        if not self._flying:
            self._schedule(loop)
        return job.future

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        timer, at = self._next, self._next_at  # a lingering timer: leave sooner now?
        sooner = at is not None and (self._waited or (self._due is not None and self._due < at))
        if timer is not None and sooner:
            timer.cancel()
            self._next = self._next_at = None
        if self._next is None:
            if self._waited or self._due is None:
                self._next = loop.call_soon(self._leave)
            else:
                self._next_at = self._due
                self._next = loop.call_at(self._due, self._leave)

    def _leave(self) -> None:
        self._next = self._next_at = None
        jobs = [job for job in self._queue if not job.future.done()]  # cancelled: never run
        self._queue.clear()
        self._waited = False
        self._due = None
        if not jobs:
            return
        loop = jobs[0].future.get_loop()
        executor = self._executor()
        try:
            if executor is None:
                raise RuntimeError("no executor")
            executor.submit(self._carry, loop, jobs)
        except RuntimeError:  # the db thread is gone (shut down): nothing runs
            for job in jobs:
                job.future.set_exception(StoreError("store is closed"))
            return
        self.hops += 1
        self._flying = True

    def _carry(self, loop: asyncio.AbstractEventLoop, jobs: list[Job]) -> None:
        """On the db thread: the hop's jobs, then one wake-up of the loop to land them."""
        try:
            outcomes = run_hop(self._connection, jobs)
        except BaseException as exc:  # handed to every caller of the hop
            outcomes = [(False, exc)] * len(jobs)
        with contextlib.suppress(RuntimeError):  # a closed loop: no caller is left
            loop.call_soon_threadsafe(self._landed, loop, jobs, outcomes)

    def _landed(
        self, loop: asyncio.AbstractEventLoop, jobs: list[Job], outcomes: list[Outcome]
    ) -> None:
        self._flying = False
        for job, (ok, value) in zip(jobs, outcomes, strict=True):
            if job.future.done():
                continue  # its caller was cancelled while the job ran: it ran to its end
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)
        if self._queue:
            self._schedule(loop)


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
        raise named(op, exc) from exc


def transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
    conn.execute(begin)
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return result


def run_hop(connection: Callable[[], sqlite3.Connection], jobs: list[Job]) -> list[Outcome]:
    """On the db thread: the jobs in order. Each run of consecutive WRITE/READ jobs is
    one transaction (BEGIN IMMEDIATE when one writes), each writing job in a SAVEPOINT of
    its own: a failing job is undone alone and the others commit (a read has nothing to
    undo); a RAW job runs between them."""
    outcomes: list[Outcome] = []
    start = 0
    while start < len(jobs):
        if jobs[start].kind == RAW:
            outcomes.append(attempt(jobs[start], jobs[start].fn, connection))
            start += 1
            continue
        end = start
        while end < len(jobs) and jobs[end].kind != RAW:
            end += 1
        outcomes.extend(run_group(connection, jobs[start:end]))
        start = end
    return outcomes


def attempt(
    job: Job, fn: Callable[[sqlite3.Connection], Any], connection: Callable[[], sqlite3.Connection]
) -> Outcome:
    try:
        with translated(job.op):
            return True, fn(connection())
    except Exception as exc:
        return False, exc


def run_group(connection: Callable[[], sqlite3.Connection], jobs: list[Job]) -> list[Outcome]:
    """One transaction for ``jobs``; alone, a job runs as it always did (no SAVEPOINT)."""
    begin = "BEGIN IMMEDIATE" if any(job.kind == WRITE for job in jobs) else "BEGIN"
    if len(jobs) == 1:
        job = jobs[0]
        return [attempt(job, lambda conn: transaction(conn, job.fn, begin), connection)]
    try:
        conn = connection()
        conn.execute(begin)
    except Exception as exc:
        return failed(jobs, exc)
    try:
        outcomes = savepoints(conn, jobs)
        if conn.in_transaction:
            conn.execute("COMMIT")
    except Exception as exc:
        rollback(conn)
        return failed(jobs, exc)
    except BaseException:
        rollback(conn)
        raise
    return outcomes


def failed(jobs: list[Job], exc: Exception) -> list[Outcome]:
    """Every job of a transaction that could not begin or commit fails, each named."""
    if not isinstance(exc, sqlite3.Error):
        return [(False, exc)] * len(jobs)
    return [(False, named(job.op, exc)) for job in jobs]


def named(op: str, exc: sqlite3.Error) -> StoreError:
    """:func:`translated`'s error for ``op``: its cause kept (a full disk is told as
    such, kernel/store/trouble.py)."""
    error = StoreError(f"{op} failed: {error_code(exc)}")
    error.__cause__ = exc
    return error


def savepoints(conn: sqlite3.Connection, jobs: list[Job]) -> list[Outcome]:
    """Each writing job in its own SAVEPOINT: a failing job is undone alone. A read runs
    as it is: it has nothing to undo (two statements fewer per read)."""
    outcomes: list[Outcome] = []
    for job in jobs:
        ok, value = in_savepoint(conn, job) if job.kind == WRITE else read_only(conn, job)
        outcomes.append((ok, value))
        if not ok and not conn.in_transaction:
            return ended_by(jobs, outcomes, value)
    return outcomes


def ended_by(jobs: list[Job], outcomes: list[Outcome], exc: BaseException) -> list[Outcome]:
    """An error that ended the whole transaction (SQLite rolls back on a full disk, say)
    undid the writes before it too: they and the jobs after it fail with its cause; the
    reads before it keep their results."""
    cause = exc.__cause__ if isinstance(exc.__cause__, sqlite3.Error) else exc
    lost = failed(jobs, cause) if isinstance(cause, Exception) else [(False, cause)] * len(jobs)
    ran = zip(jobs[: len(outcomes)], outcomes, strict=True)
    kept = [
        outcome if job.kind == READ or not outcome[0] else lost[n]
        for n, (job, outcome) in enumerate(ran)
    ]
    return kept + lost[len(outcomes) :]


def in_savepoint(conn: sqlite3.Connection, job: Job) -> Outcome:
    conn.execute(SAVEPOINT)
    try:
        with translated(job.op):
            result = job.fn(conn)
    except Exception as exc:
        if conn.in_transaction:
            conn.execute(UNDO)
            conn.execute(RELEASE)
        return False, exc
    conn.execute(RELEASE)
    return True, result


def read_only(conn: sqlite3.Connection, job: Job) -> Outcome:
    """A READ job of a group, without a savepoint. One that changed a row is a bug of
    its caller's (it must be a write): it fails, and its change is undone with the whole
    transaction, the group's other writes too (never committed unguarded)."""
    changes = conn.total_changes
    try:
        with translated(job.op):
            result = job.fn(conn)
    except Exception as exc:
        return False, exc
    if conn.total_changes != changes:
        raise StoreError(f"{job.op} changed rows in a read")
    return True, result


def rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            log.warning("rollback failed: %s", error_code(exc))


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
