"""Long-term memories: the ``memories`` table and, when SQLite has FTS5, its
full-text index ``memories_fts``.

Kernel cuts the text into tokens (jieba, in kernel/memory); the store keeps the row in
``memories`` and, when FTS5 is in use, the same tokens in ``memories_fts``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kernel.core.errors import StoreError
from kernel.store.database import Database, check_non_negative, last_id
from kernel.store.migrations import memory_key

MEMORY_CATEGORIES: tuple[str, ...] = ("user", "feedback", "project", "reference")
# Each term costs one bound parameter and one LIKE scan; a pasted essay is not a query.
MAX_SEARCH_TERMS = 32


@dataclass(slots=True)
class MemoryRow:
    id: int
    text: str
    category: str | None
    created_at: datetime


_MEMORY_SELECT = "SELECT id, text, category, created_at FROM memories"


class MemoryTables(Database):
    """The Store's memory methods."""

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
            memory_id = last_id(cur)
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
        check_non_negative(limit=limit)

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
        check_non_negative(limit=limit)
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
        check_non_negative(limit=limit)
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
        check_non_negative(limit=limit)

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
            return indexed, has_backlog(conn)

        indexed, pending = await self._write("index memories", op)
        self.memory_index_pending = pending
        return indexed


def has_backlog(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM memories WHERE tokens IS NULL)").fetchone()
    return bool(row[0])


def _ascii_lower(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _memory_from_row(row: tuple[Any, ...]) -> MemoryRow:
    mid, text, category, created_at = row
    return MemoryRow(
        id=int(mid),
        text=str(text),
        category=category,
        created_at=datetime.fromisoformat(created_at),
    )
