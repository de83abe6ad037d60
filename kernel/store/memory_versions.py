"""A memory's earlier versions and its scope moves (issue 39, migration 23).

A fact keeps one row in ``memories`` (its id) holding the current text; every text it
had before is a row of ``memory_versions`` (``keep_version`` in kernel/store/memories.py,
called in the same transaction as the change). Recall and search read ``memories``
only, so an old version is never offered. A memory moved to global takes the place of
the same fact in every other scope (one row, not one per scope).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from kernel.store.database import Database
from kernel.store.memories import (
    _MEMORY_SELECT,
    How,
    MemoryRow,
    _memory_from_row,
    check_unique,
    delete_row,
)
from kernel.store.migrations import memory_key

GLOBAL_SCOPE = "global"


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """A text a memory had: from ``saved_at`` until ``replaced_at``, replaced ``how``."""

    memory_id: int
    text: str
    category: str | None
    scope: str
    saved_at: datetime
    replaced_at: datetime
    how: How


@dataclass(frozen=True, slots=True)
class Moved:
    """A memory moved to another scope: the row now, the scope it left, and the rows of
    the same fact it replaced (moved to global: the fact's copies in other scopes)."""

    row: MemoryRow
    before: str
    absorbed: tuple[int, ...] = ()


class MemoryVersionTables(Database):
    """The Store's methods for memory versions and moves."""

    async def memory_versions(self, memory_id: int) -> list[MemoryVersion]:
        """Memory ``memory_id``'s earlier versions, the latest first ([]: none)."""

        def op(conn: sqlite3.Connection) -> list[MemoryVersion]:
            rows = conn.execute(
                "SELECT memory_id, text, category, scope, saved_at, replaced_at, how"
                " FROM memory_versions WHERE memory_id = ? ORDER BY id DESC",
                (memory_id,),
            ).fetchall()
            return [
                MemoryVersion(
                    int(m),
                    str(text),
                    category,
                    str(scope),
                    datetime.fromisoformat(saved),
                    datetime.fromisoformat(replaced),
                    how,
                )
                for m, text, category, scope, saved, replaced, how in rows
            ]

        return await self._read("read memory versions", op)

    async def same_fact_elsewhere(self, text: str, scope: str) -> list[MemoryRow]:
        """Memories of the same fact as ``text`` (whitespace and case aside) outside
        ``scope`` and outside global, oldest first."""
        key = memory_key(text)

        def op(conn: sqlite3.Connection) -> list[MemoryRow]:
            rows = conn.execute(
                _MEMORY_SELECT + " WHERE key = ? AND scope NOT IN ('global', ?) ORDER BY id",
                (key, scope),
            ).fetchall()
            return [_memory_from_row(row) for row in rows]

        return await self._read("find memory", op)

    async def move_memory(
        self, memory_id: int, scope: str, *, scopes: Sequence[str] | None = None
    ) -> Moved | None:
        """Move a memory to ``scope`` (its text, id and history kept); None when there
        is no such memory within ``scopes`` (None: any). Raises DuplicateMemory when the
        fact is already a memory of ``scope`` or of global; moved to global, its copies
        in other scopes are deleted (global is seen everywhere)."""

        def op(conn: sqlite3.Connection) -> Moved | None:
            row = conn.execute(_MEMORY_SELECT + " WHERE id = ?", (memory_id,)).fetchone()
            if row is None:
                return None
            found = _memory_from_row(row)
            if scopes is not None and found.scope not in scopes:
                return None
            key = memory_key(found.text)
            check_unique(conn, key, scope, memory_id)
            absorbed: list[int] = []
            if scope == GLOBAL_SCOPE:
                copies = conn.execute(
                    "SELECT id, tokens FROM memories WHERE key = ? AND id != ?",
                    (key, memory_id),
                ).fetchall()
                for copy_id, tokens in copies:
                    delete_row(conn, int(copy_id), tokens, fts=self.fts5_available)
                    absorbed.append(int(copy_id))
            conn.execute("UPDATE memories SET scope = ? WHERE id = ?", (scope, memory_id))
            moved = conn.execute(_MEMORY_SELECT + " WHERE id = ?", (memory_id,)).fetchone()
            return Moved(_memory_from_row(moved), found.scope, tuple(absorbed))

        return await self._write("move memory", op)
