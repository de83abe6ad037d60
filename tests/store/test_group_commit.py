"""Group commit: store calls queued together reach the database thread in one hand-off
and one transaction, each call still getting its own result or its own error."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from kernel.core.errors import StoreError
from kernel.store.db import Store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store(tmp_path / "kernel.db")
    await s.start()
    await s._write("table", lambda c: c.execute("CREATE TABLE t (v TEXT UNIQUE)"))
    yield s
    await s.close()


def insert(value: str) -> object:
    def op(conn: sqlite3.Connection) -> int:
        cur = conn.execute("INSERT INTO t (v) VALUES (?)", (value,))
        assert cur.lastrowid is not None
        return cur.lastrowid

    return op


def on_disk(path: Path) -> list[tuple[int, str]]:
    """The rows another connection sees: what was committed."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT rowid, v FROM t ORDER BY rowid").fetchall()


class Hold:
    """Keeps the database thread busy until released, so that calls queue up."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, conn: sqlite3.Connection) -> None:
        self.entered.set()
        self.release.wait(30)

    async def start(self, store: Store) -> asyncio.Task[None]:
        task = asyncio.create_task(store._run("hold", self))
        assert await asyncio.to_thread(self.entered.wait, 30)
        return task


async def test_calls_queued_together_share_one_hop_and_each_gets_its_result(
    store: Store,
) -> None:
    hold = Hold()
    held = await hold.start(store)
    before = store._courier.hops
    calls = [asyncio.create_task(store._write("insert", insert(f"v{n}"))) for n in range(5)]
    read = asyncio.create_task(
        store._read("count", lambda c: c.execute("SELECT COUNT(*) FROM t").fetchone()[0])
    )
    await asyncio.sleep(0)
    hold.release.set()
    await held
    ids = await asyncio.gather(*calls)

    assert ids == [1, 2, 3, 4, 5]
    assert await read == 5  # queued after the writes: it sees them
    assert store._courier.hops - before == 1
    assert on_disk(store.path) == [(n, f"v{n - 1}") for n in range(1, 6)]


async def test_a_failing_call_is_undone_alone_and_the_others_commit(store: Store) -> None:
    await store._write("first", insert("taken"))
    hold = Hold()
    held = await hold.start(store)

    def half_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (v) VALUES ('half')")
        conn.execute("INSERT INTO t (v) VALUES ('taken')")  # UNIQUE: the call fails

    hops = store._courier.hops
    before = asyncio.create_task(store._write("before", insert("a")))
    failing = asyncio.create_task(store._write("clash", half_then_fail))
    after = asyncio.create_task(store._write("after", insert("b")))
    await asyncio.sleep(0)
    hold.release.set()
    await held

    assert await before == 2
    with pytest.raises(StoreError, match="clash failed: SQLITE_CONSTRAINT_UNIQUE"):
        await failing
    assert await after == 3  # 'half' was undone with its call: its rowid is free again
    assert store._courier.hops - hops == 1  # one transaction, the failure undone alone
    assert on_disk(store.path) == [(1, "taken"), (2, "a"), (3, "b")]
    assert not await store._run("test", lambda c: c.in_transaction)


async def test_an_exception_of_a_call_reaches_only_its_caller(store: Store) -> None:
    hold = Hold()
    held = await hold.start(store)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (v) VALUES ('gone')")
        raise ValueError("not this one")

    hops = store._courier.hops
    ok = asyncio.create_task(store._write("ok", insert("kept")))
    bad = asyncio.create_task(store._write("broken", broken))
    await asyncio.sleep(0)
    hold.release.set()
    await held
    assert await ok == 1
    with pytest.raises(ValueError, match="not this one"):
        await bad
    assert store._courier.hops - hops == 1
    assert on_disk(store.path) == [(1, "kept")]


async def test_a_read_beside_writes_takes_no_savepoint_and_its_failure_is_its_own(
    store: Store,
) -> None:
    statements: list[str] = []
    await store._run("trace", lambda c: c.set_trace_callback(statements.append))
    hold = Hold()
    held = await hold.start(store)

    def failing_read(conn: sqlite3.Connection) -> None:
        conn.execute("SELECT v FROM t").fetchall()
        raise ValueError("a read that fails")

    write = asyncio.create_task(store._write("write", insert("kept")))
    read = asyncio.create_task(
        store._read("read", lambda c: c.execute("SELECT v FROM t").fetchall())
    )
    bad = asyncio.create_task(store._read("bad read", failing_read))
    later = asyncio.create_task(store._write("later", insert("also kept")))
    await asyncio.sleep(0)
    hold.release.set()
    await held
    assert await write == 1
    assert await read == [("kept",)]  # the write before it, in the same transaction
    with pytest.raises(ValueError, match="a read that fails"):
        await bad
    assert await later == 2
    await store._run("trace", lambda c: c.set_trace_callback(None))
    assert on_disk(store.path) == [(1, "kept"), (2, "also kept")]
    assert statements.count("SAVEPOINT job") == 2  # the two writes', none for the reads
    assert statements.count("RELEASE job") == 2


async def test_a_read_that_changes_a_row_fails_its_whole_transaction(store: Store) -> None:
    hold = Hold()
    held = await hold.start(store)

    def writes_in_a_read(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (v) VALUES ('sneaked')")

    write = asyncio.create_task(store._write("write", insert("a")))
    sneaky = asyncio.create_task(store._read("sneaky", writes_in_a_read))
    await asyncio.sleep(0)
    hold.release.set()
    await held
    with pytest.raises(StoreError, match="sneaky changed rows in a read"):
        await sneaky
    with pytest.raises(StoreError, match="sneaky changed rows in a read"):
        await write  # undone with it: nothing unguarded is committed
    assert on_disk(store.path) == []
    assert not await store._run("test", lambda c: c.in_transaction)


async def test_an_error_that_ends_the_transaction_fails_the_writes_it_undid(
    store: Store,
) -> None:
    """SQLite rolls a whole transaction back on some errors (a full disk): the writes
    before it in the hop are gone too, and their callers are told so."""
    hold = Hold()
    held = await hold.start(store)

    def disk_full(conn: sqlite3.Connection) -> None:
        conn.execute("ROLLBACK")  # as SQLite does itself on SQLITE_FULL
        raise sqlite3.OperationalError("database or disk is full")

    hops = store._courier.hops
    write = asyncio.create_task(store._write("first", insert("a")))
    read = asyncio.create_task(store._read("count", lambda c: c.execute("SELECT 7").fetchone()[0]))
    full = asyncio.create_task(store._write("full", disk_full))
    later = asyncio.create_task(store._write("later", insert("b")))
    await asyncio.sleep(0)
    hold.release.set()
    await held

    with pytest.raises(StoreError, match="^first failed: OperationalError") as lost:
        await write
    assert isinstance(lost.value.__cause__, sqlite3.OperationalError)  # a full disk is named
    assert await read == 7
    with pytest.raises(StoreError, match="^full failed: OperationalError"):
        await full
    with pytest.raises(StoreError, match="^later failed: OperationalError"):
        await later
    assert store._courier.hops - hops == 1
    assert on_disk(store.path) == []
    assert await store._write("after", insert("c")) == 1  # the store goes on


async def test_writes_no_one_waits_for_keep_their_order_with_the_next_call(
    store: Store,
) -> None:
    before = store._courier.hops
    first = store.write_soon("soon", insert("first"))
    second = store.write_soon("soon", insert("second"))
    assert await store._write("waited", insert("third")) == 3
    assert (await first, await second) == (1, 2)
    assert store._courier.hops - before == 1  # they went with the call someone waited for
    assert on_disk(store.path) == [(1, "first"), (2, "second"), (3, "third")]


async def test_a_write_no_one_waits_for_is_written_on_its_own_too(store: Store) -> None:
    written = store.write_soon("soon", insert("alone"))
    assert await asyncio.wait_for(written, 30) == 1
    assert on_disk(store.path) == [(1, "alone")]


async def test_a_caller_cancelled_while_queued_never_runs_the_others_do(store: Store) -> None:
    hold = Hold()
    held = await hold.start(store)
    hops = store._courier.hops
    kept = asyncio.create_task(store._write("kept", insert("kept")))
    dropped = asyncio.create_task(store._write("dropped", insert("dropped")))
    also = asyncio.create_task(store._write("also", insert("also")))
    await asyncio.sleep(0)
    dropped.cancel()
    with pytest.raises(asyncio.CancelledError):
        await dropped
    hold.release.set()
    await held
    assert (await kept, await also) == (1, 2)
    assert store._courier.hops - hops == 1
    assert on_disk(store.path) == [(1, "kept"), (2, "also")]


async def test_close_writes_what_is_queued_first(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    await store._write("table", lambda c: c.execute("CREATE TABLE t (v TEXT UNIQUE)"))
    soon = store.write_soon("soon", insert("queued"))
    await store.close()
    assert await soon == 1
    assert on_disk(store.path) == [(1, "queued")]


async def test_a_record_given_a_longer_linger_waits_for_company_that_long(store: Store) -> None:
    """Issue 37: ``write_soon(linger=…)``: a record whose loss in a crash is harmless (a
    tidy row's "sent") waits past ``LINGER`` for a hop to ride, and goes with the next
    call that is waited for, in its transaction, in queue order."""
    hops = store._courier.hops
    record = store.write_soon("record", insert("later"), linger=3600)
    await asyncio.sleep(0.05)  # ten times LINGER: a record of the default bound is gone
    assert (store._courier.hops - hops, record.done()) == (0, False)
    count = await store._read("count", lambda c: c.execute("SELECT COUNT(*) FROM t").fetchone())
    assert (await record, count, store._courier.hops - hops) == (1, (1,), 1)


async def test_a_hop_leaves_at_the_earliest_bound_of_the_records_it_carries(
    store: Store,
) -> None:
    """A record of the default bound queued behind a long-lingering one takes it along
    at its own bound: the longest wait is never a later record's."""
    hops = store._courier.hops
    first = store.write_soon("first", insert("a"), linger=3600)
    second = store.write_soon("second", insert("b"))
    assert await asyncio.gather(first, second) == [1, 2]
    assert store._courier.hops - hops == 1
