"""The stored /v1 responses (``v1_responses``) stay bounded: each new row prunes the rows
older than the retention age and, while the table holds more than its byte cap, the
oldest; a response larger than the cap is not stored at all."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kernel.retention import RetentionJob
from kernel.store.db import Store
from kernel.store.responses import ResponseStore


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_old_rows_go_after_the_retention_age(tmp_path: Path) -> None:
    clock = Clock()
    store = Store(tmp_path / "kernel.db", clock=clock)
    await store.start()
    try:
        responses = ResponseStore(store, max_age_days=7)
        assert await responses.save({"id": "resp_old", "output": []}, [])
        clock.now += timedelta(days=6)
        assert await responses.save({"id": "resp_mid", "output": []}, [])
        assert await responses.get("resp_old") is not None  # 6 days: kept
        clock.now += timedelta(days=2)
        assert await responses.save({"id": "resp_new", "output": []}, [])
        assert await responses.get("resp_old") is None  # 8 days: pruned
        assert await responses.get("resp_mid") is not None
        assert await responses.get("resp_new") is not None
    finally:
        await store.close()


async def test_the_oldest_rows_go_past_the_byte_cap(tmp_path: Path) -> None:
    clock = Clock()
    store = Store(tmp_path / "kernel.db", clock=clock)
    await store.start()
    try:
        responses = ResponseStore(store, total_max=3000)
        for n in range(4):
            clock.now += timedelta(seconds=1)
            assert await responses.save({"id": f"resp_{n}", "output": []}, ["x" * 900])
        kept = [n for n in range(4) if await responses.get(f"resp_{n}") is not None]
        assert kept == [1, 2, 3]  # ~930 bytes each: the oldest went
        assert not await responses.save({"id": "resp_big", "output": []}, ["x" * 4000])
        assert await responses.get("resp_big") is None
    finally:
        await store.close()


async def count_rows(store: Store) -> int:
    def op(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT COUNT(*) FROM v1_responses").fetchone()[0])

    return await store.read("count", op)


async def test_an_expired_response_is_not_found_before_any_prune(tmp_path: Path) -> None:
    """No new row came to prune it: past the retention age it is gone all the same."""
    clock = Clock()
    store = Store(tmp_path / "kernel.db", clock=clock)
    await store.start()
    try:
        responses = ResponseStore(store, max_age_days=7)
        assert await responses.save({"id": "resp_old", "output": []}, [])
        clock.now += timedelta(days=6, hours=23)
        assert await responses.get("resp_old") is not None
        clock.now += timedelta(hours=2)
        assert await responses.get("resp_old") is None  # as an unknown id
        assert await ResponseStore(store).get("resp_old") is not None  # 0 days: kept by size
        assert not await responses.delete("resp_old")  # the same 404 on DELETE
    finally:
        await store.close()


async def test_the_daily_retention_sweep_prunes_stored_responses(tmp_path: Path) -> None:
    clock = Clock()
    store = Store(tmp_path / "kernel.db", clock=clock)
    await store.start()
    try:
        responses = ResponseStore(store, max_age_days=7)
        assert await responses.save({"id": "resp_old", "output": []}, [])
        clock.now += timedelta(days=5)
        assert await responses.save({"id": "resp_new", "output": []}, [])
        clock.now += timedelta(days=3)  # resp_old is 8 days old, resp_new 3
        job = RetentionJob(
            tmp_path / "data", 7, clock=lambda: clock.now.timestamp(), responses=responses
        )
        result = await job.run_once()
        assert result.responses == 1
        assert await count_rows(store) == 1
        assert await responses.get("resp_new") is not None
    finally:
        await store.close()
