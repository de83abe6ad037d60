"""The ``cron_jobs`` table: scheduled jobs and their scheduler state (migration 5), and
``cron_runs``: each job's newest runs (migration 15, at most :data:`KEEP_RUNS` a job).

Rows are plain values; what a spec means (schedules, workflows) is kernel.cron's business.
Times are stored as UTC ISO strings.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kernel.store.db import Store

_COLUMNS = (
    "id, name, enabled, spec, created_by, created_at, updated_at, paused, next_run_at,"
    " last_run_at, last_status, last_result, last_error, last_execution, run_count"
)


KEEP_RUNS = 50  # runs kept per job, newest first


@dataclass(frozen=True, slots=True)
class CronRun:
    """One run of a job: when it began (or was due, when missed), its outcome
    (succeeded, failed, skipped, missed, interrupted), why, and what it answered."""

    at: datetime
    outcome: str
    reason: str | None = None
    result: str | None = None


@dataclass(slots=True)
class CronRow:
    id: str
    name: str
    enabled: bool
    spec: dict[str, Any]  # schedule, task_type, text, workflow, dispatch, runtime, meta
    created_by: str  # "api", "agent" (its cron tools) or "system" (the default job)
    created_at: datetime
    updated_at: datetime
    paused: bool = False
    next_run_at: datetime | None = None
    last_run_at: datetime | None = None
    last_status: str | None = None  # running, succeeded, failed, skipped, interrupted
    last_result: str | None = None
    last_error: str | None = None
    last_execution: dict[str, Any] | None = field(default=None)
    run_count: int = 0


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec="seconds")


def _parse_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _values(row: CronRow) -> tuple[Any, ...]:
    execution = None if row.last_execution is None else json.dumps(row.last_execution)
    return (
        row.id,
        row.name,
        int(row.enabled),
        json.dumps(row.spec, ensure_ascii=False, separators=(",", ":")),
        row.created_by,
        _time(row.created_at),
        _time(row.updated_at),
        int(row.paused),
        _time(row.next_run_at),
        _time(row.last_run_at),
        row.last_status,
        row.last_result,
        row.last_error,
        execution,
        row.run_count,
    )


def _row(values: tuple[Any, ...]) -> CronRow:
    created_at = _parse_time(values[5])
    updated_at = _parse_time(values[6])
    assert created_at is not None and updated_at is not None
    return CronRow(
        id=values[0],
        name=values[1],
        enabled=bool(values[2]),
        spec=json.loads(values[3]),
        created_by=values[4],
        created_at=created_at,
        updated_at=updated_at,
        paused=bool(values[7]),
        next_run_at=_parse_time(values[8]),
        last_run_at=_parse_time(values[9]),
        last_status=values[10],
        last_result=values[11],
        last_error=values[12],
        last_execution=None if values[13] is None else json.loads(values[13]),
        run_count=values[14],
    )


class CronStore:
    """Reads and writes ``cron_jobs`` through the Store's database thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def list(self) -> list[CronRow]:
        def op(conn: sqlite3.Connection) -> list[CronRow]:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM cron_jobs ORDER BY created_at, id")
            return [_row(r) for r in rows]

        return await self.store.read("list cron jobs", op)

    async def get(self, job_id: str) -> CronRow | None:
        def op(conn: sqlite3.Connection) -> CronRow | None:
            found = conn.execute(
                f"SELECT {_COLUMNS} FROM cron_jobs WHERE id = ?", (job_id,)
            ).fetchone()
            return None if found is None else _row(found)

        return await self.store.read("get cron job", op)

    async def insert(self, row: CronRow) -> bool:
        """Add the row; False (and nothing written) when its id is taken."""
        values = _values(row)

        def op(conn: sqlite3.Connection) -> bool:
            placeholders = ", ".join("?" * len(values))
            cur = conn.execute(
                f"INSERT OR IGNORE INTO cron_jobs ({_COLUMNS}) VALUES ({placeholders})", values
            )
            return cur.rowcount == 1

        return await self.store.write("add cron job", op)

    async def save(self, row: CronRow, run: CronRun | None = None) -> None:
        """Write every field of an existing row (a deleted row stays deleted) and, in
        the same transaction, ``run`` to its runs (the oldest beyond KEEP_RUNS go)."""
        values = _values(row)
        assignments = ", ".join(f"{c.strip()} = ?" for c in _COLUMNS.split(",")[1:])

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                f"UPDATE cron_jobs SET {assignments} WHERE id = ?", (*values[1:], row.id)
            )
            if run is None or cur.rowcount != 1:
                return
            conn.execute(
                "INSERT INTO cron_runs (job_id, at, outcome, reason, result)"
                " VALUES (?, ?, ?, ?, ?)",
                (row.id, _time(run.at), run.outcome, run.reason, run.result),
            )
            conn.execute(
                "DELETE FROM cron_runs WHERE job_id = ? AND id NOT IN"
                " (SELECT id FROM cron_runs WHERE job_id = ? ORDER BY id DESC LIMIT ?)",
                (row.id, row.id, KEEP_RUNS),
            )

        await self.store.write("save cron job", op)

    async def runs(self, job_id: str, limit: int = KEEP_RUNS) -> builtins.list[CronRun]:
        """A job's runs, newest first."""

        def op(conn: sqlite3.Connection) -> builtins.list[CronRun]:
            rows = conn.execute(
                "SELECT at, outcome, reason, result FROM cron_runs WHERE job_id = ?"
                " ORDER BY id DESC LIMIT ?",
                (job_id, limit),
            )
            return [CronRun(datetime.fromisoformat(at), o, r, x) for at, o, r, x in rows]

        return await self.store.read("list cron runs", op)

    async def delete(self, job_id: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM cron_runs WHERE job_id = ?", (job_id,))
            return conn.execute("DELETE FROM cron_jobs WHERE id = ?", (job_id,)).rowcount == 1

        return await self.store.write("delete cron job", op)
