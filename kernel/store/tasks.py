"""The ``agent_tasks`` table (migration 19): background tasks (issue 38), one row per
task: what it runs, the chat it belongs to, its status, progress and result.

The owner is told a task's result (and offered the tasks a restart cut) through the
durable outbox: :func:`claim` is the write that goes into the outbox's own transaction,
so the telling and its mark commit together, once.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from kernel.core.safejson import MAX_INT
from kernel.store.database import dump_json, last_id, parse_stamp, stamp, utcnow
from kernel.store.db import Store

TaskStatus = Literal["queued", "running", "done", "failed", "stopped", "interrupted"]
ENDED: frozenset[str] = frozenset({"done", "failed", "stopped", "interrupted"})
MAX_LISTED = 100
RESULT_CHARS = 20_000  # of a result kept in its row
PROGRESS_CHARS = 300

_COLUMNS = (
    "id, kind, session_id, conversation, title, spec, status, progress, result,"
    " created_at, started_at, ended_at, reported_at, offered_at"
)


class Claimed(Exception):
    """The owner was already told (another path got there first): nothing is queued."""


@dataclass(frozen=True, slots=True)
class TaskRow:
    id: int
    kind: str  # "agent" (a sub-agent) | "cli" (a coding CLI's delegation)
    session_id: int | None
    conversation: str
    title: str
    spec: dict[str, Any] = field(default_factory=dict)
    status: str = "queued"
    progress: str = ""
    result: str = ""
    created_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    reported_at: datetime | None = None
    offered_at: datetime | None = None

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "session_id": self.session_id,
            "conversation": self.conversation,
            "title": self.title,
            "status": self.status,
            "progress": self.progress,
            "result": self.result,
            "created_at": _text(self.created_at),
            "started_at": _text(self.started_at),
            "ended_at": _text(self.ended_at),
            "reported": self.reported_at is not None,
        }


def _text(value: datetime | None) -> str | None:
    return stamp(value) if value is not None else None


def _when(value: str | None) -> datetime | None:
    return parse_stamp(value) if value else None


def _row(row: sqlite3.Row | tuple[Any, ...]) -> TaskRow:
    spec = json.loads(row[5]) if row[5] else {}
    return TaskRow(
        id=row[0],
        kind=row[1],
        session_id=row[2],
        conversation=row[3],
        title=row[4],
        spec=spec if isinstance(spec, dict) else {},
        status=row[6],
        progress=row[7],
        result=row[8],
        created_at=_when(row[9]),
        started_at=_when(row[10]),
        ended_at=_when(row[11]),
        reported_at=_when(row[12]),
        offered_at=_when(row[13]),
    )


def claim(ids: list[int], column: Literal["reported_at", "offered_at"]) -> Callable[..., None]:
    """The write that marks ``ids`` told (their result, or the offer to run them again),
    run inside the outbox's transaction; raises :class:`Claimed` (rolling the outbox rows
    back with it) when one of them was told already."""
    now = stamp(utcnow())

    def op(conn: sqlite3.Connection) -> None:
        for task_id in ids:
            cur = conn.execute(
                f"UPDATE agent_tasks SET {column} = ? WHERE id = ? AND {column} IS NULL",
                (now, task_id),
            )
            if cur.rowcount != 1:
                raise Claimed(task_id)

    return op


class TaskStore:
    """Reads and writes ``agent_tasks`` through the Store's database thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(
        self, kind: str, session_id: int | None, conversation: str, title: str, spec: dict[str, Any]
    ) -> TaskRow:
        now = stamp(utcnow())
        body = dump_json(spec, "task spec")

        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "INSERT INTO agent_tasks (kind, session_id, conversation, title, spec, status,"
                " created_at) VALUES (?, ?, ?, ?, ?, 'queued', ?)",
                (kind, session_id, conversation, title, body, now),
            )
            return last_id(cur)

        task_id = await self.store.write("create a task", op)
        row = await self.get(task_id)
        assert row is not None
        return row

    async def get(self, task_id: int) -> TaskRow | None:
        """The task, or None (an id past SQLite's integers, as typed, is none too)."""
        if not 0 < task_id < MAX_INT:
            return None

        def op(conn: sqlite3.Connection) -> TaskRow | None:
            found = conn.execute(
                f"SELECT {_COLUMNS} FROM agent_tasks WHERE id = ?", (task_id,)
            ).fetchone()
            return _row(found) if found is not None else None

        return await self.store.read("read a task", op)

    async def listed(self, session_id: int | None = None, limit: int = MAX_LISTED) -> list[TaskRow]:
        """The newest tasks first (``session_id``: that session's only)."""
        where, args = ("", ()) if session_id is None else ("WHERE session_id = ?", (session_id,))
        limit = max(1, min(limit, MAX_LISTED))

        def op(conn: sqlite3.Connection) -> list[TaskRow]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM agent_tasks {where} ORDER BY id DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
            return [_row(row) for row in rows]

        return await self.store.read("list tasks", op)

    async def started(self, task_id: int) -> None:
        """Running (again): progress, result and the marks of an earlier run cleared."""
        now = stamp(utcnow())
        await self._update(
            "start a task",
            "status = 'running', started_at = ?, ended_at = NULL, progress = '', result = '',"
            " reported_at = NULL, offered_at = NULL",
            (now,),
            task_id,
        )

    async def progressed(self, task_id: int, text: str) -> None:
        await self._update(
            "note a task's progress", "progress = ?", (text[:PROGRESS_CHARS],), task_id
        )

    async def ended(self, task_id: int, status: TaskStatus, result: str) -> None:
        now = stamp(utcnow())
        await self._update(
            "end a task",
            "status = ?, result = ?, ended_at = ?",
            (status, result[:RESULT_CHARS], now),
            task_id,
        )

    async def _update(self, what: str, sets: str, args: tuple[Any, ...], task_id: int) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(f"UPDATE agent_tasks SET {sets} WHERE id = ?", (*args, task_id))

        await self.store.write(what, op)

    async def interrupt_running(self) -> int:
        """At start: the tasks a stopped process left queued or running become
        ``interrupted``; how many did."""
        now = stamp(utcnow())

        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "UPDATE agent_tasks SET status = 'interrupted', ended_at = ?"
                " WHERE status IN ('queued', 'running')",
                (now,),
            )
            return cur.rowcount

        return await self.store.write("interrupt running tasks", op)

    async def untold(self) -> list[TaskRow]:
        """Ended tasks whose result the owner was not told yet (oldest first)."""

        def op(conn: sqlite3.Connection) -> list[TaskRow]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM agent_tasks WHERE status IN ('done', 'failed')"
                " AND reported_at IS NULL ORDER BY id LIMIT ?",
                (MAX_LISTED,),
            ).fetchall()
            return [_row(row) for row in rows]

        return await self.store.read("list untold tasks", op)

    async def unoffered(self) -> list[TaskRow]:
        """Interrupted tasks not offered to the owner yet."""

        def op(conn: sqlite3.Connection) -> list[TaskRow]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM agent_tasks WHERE status = 'interrupted'"
                " AND offered_at IS NULL ORDER BY id LIMIT ?",
                (MAX_LISTED,),
            ).fetchall()
            return [_row(row) for row in rows]

        return await self.store.read("list unoffered tasks", op)
