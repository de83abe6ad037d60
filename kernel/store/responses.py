"""The ``v1_responses`` table (migration 18): the responses ``/v1/responses`` stored
(``store`` true, the API's default), so that ``previous_response_id`` continues one and
``GET``/``DELETE /v1/responses/{id}`` find it.

A row holds the response as answered and its context: the input items of its whole
chain, then its own output items (a continuation reads one row, never walks a chain).
Bounded two ways, pruned in the same transaction as each new row and by the daily
retention sweep (kernel/retention.py): rows older than ``max_age``
(``general.retention_days``, as the sweep keeps the files Kernel made for a moment; 0
keeps them by size alone) go, and are not found meanwhile; and while the table holds
more than :data:`TOTAL_MAX` bytes of JSON the oldest rows go. A context larger than :data:`ROW_MAX`
is not stored at all (:meth:`ResponseStore.row` says so).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kernel.store.database import stamp
from kernel.store.db import Store

ROW_MAX = 16 * 1024 * 1024  # bytes of JSON one stored response may hold
TOTAL_MAX = 256 * 1024 * 1024  # bytes of JSON the table holds at most


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    response: dict[str, Any]
    context: list[Any]


@dataclass(frozen=True, slots=True)
class Row:
    """A response and its context as stored: JSON text, and their size in bytes."""

    id: str
    response: str
    context: str
    size: int


class ResponseStore:
    """Reads and writes ``v1_responses`` through the Store's database thread."""

    def __init__(self, store: Store, max_age_days: int = 0, total_max: int = TOTAL_MAX) -> None:
        self.store = store
        self.max_age_days = max_age_days
        self.total_max = total_max

    def row(self, response: dict[str, Any], context: list[Any]) -> Row | None:
        """``response`` and its ``context`` as the row :meth:`put` writes; None when too
        large to keep (said before the answer goes out, so it can say ``store: false``)."""
        body = json.dumps(response, ensure_ascii=False)
        items = json.dumps(context, ensure_ascii=False)
        size = len(body.encode()) + len(items.encode())
        if size > min(ROW_MAX, self.total_max):
            return None
        return Row(response["id"], body, items, size)

    async def save(self, response: dict[str, Any], context: list[Any]) -> bool:
        """Store ``response`` with its ``context``; False when it is too large to keep."""
        row = self.row(response, context)
        if row is None:
            return False
        await self.put(row)
        return True

    async def put(self, row: Row) -> None:
        now = self.store.now()
        cutoff = self._cutoff()

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO v1_responses (id, created_at, response, context, size)"
                " VALUES (?, ?, ?, ?, ?)",
                (row.id, stamp(now), row.response, row.context, row.size),
            )
            if cutoff:
                conn.execute("DELETE FROM v1_responses WHERE created_at < ?", (cutoff,))
            _trim(conn, self.total_max)

        await self.store.write("store a /v1 response", op)

    def _cutoff(self) -> str:
        """The stamp before which a row is past ``max_age`` ("" when ages are kept)."""
        if not self.max_age_days:
            return ""
        return stamp(self.store.now() - timedelta(days=self.max_age_days))

    async def get(self, response_id: str) -> StoredResponse | None:
        """The stored response, None when unknown or past ``max_age`` (the daily sweep,
        kernel/retention.py, deletes those rows; until then they are not found)."""
        cutoff = self._cutoff()

        def op(conn: sqlite3.Connection) -> tuple[str, str] | None:
            row = conn.execute(
                "SELECT response, context FROM v1_responses WHERE id = ? AND created_at >= ?",
                (response_id, cutoff),
            ).fetchone()
            return None if row is None else (row[0], row[1])

        row = await self.store.read("read a /v1 response", op)
        if row is None:
            return None
        return StoredResponse(response_id, json.loads(row[0]), json.loads(row[1]))

    async def delete(self, response_id: str) -> bool:
        """Forget it; False when unknown or already past ``max_age`` (as :meth:`get`)."""
        cutoff = self._cutoff()

        def op(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT created_at FROM v1_responses WHERE id = ?", (response_id,)
            ).fetchone()
            conn.execute("DELETE FROM v1_responses WHERE id = ?", (response_id,))
            return row is not None and row[0] >= cutoff

        return await self.store.write("delete a /v1 response", op)

    async def prune(self, before: datetime) -> int:
        """Forget responses stored before ``before``; returns how many."""
        cutoff = stamp(before)

        def op(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM v1_responses WHERE created_at < ?", (cutoff,)).rowcount

        return await self.store.write("prune /v1 responses", op)


def _trim(conn: sqlite3.Connection, total_max: int) -> None:
    """The oldest rows out while the table holds more than ``total_max`` bytes."""
    total = conn.execute("SELECT COALESCE(SUM(size), 0) FROM v1_responses").fetchone()[0]
    if total <= total_max:
        return
    rows = conn.execute("SELECT id, size FROM v1_responses ORDER BY created_at, id").fetchall()
    doomed = []
    for response_id, size in rows:
        if total <= total_max:
            break
        doomed.append((response_id,))
        total -= size
    conn.executemany("DELETE FROM v1_responses WHERE id = ?", doomed)
