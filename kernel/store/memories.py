"""Long-term memories: the ``memories`` table and, when SQLite has FTS5, its
full-text index ``memories_fts``.

Kernel cuts the text into tokens (jieba, in kernel/memory); the store keeps the row in
``memories`` and, when FTS5 is in use, the same tokens in ``memories_fts``.

Each memory has a ``scope`` (kernel/memory/scopes.py). ``scopes``: the scopes a reader
may see, filtered in SQL; None = every scope, an empty tuple = none.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from kernel.core.errors import StoreError
from kernel.store.database import Database, check_non_negative, last_id
from kernel.store.migrations import memory_key

MEMORY_CATEGORIES: tuple[str, ...] = ("user", "feedback", "project", "reference")
# Each term costs one bound parameter and one LIKE scan; a pasted essay is not a query.
MAX_SEARCH_TERMS = 32
# How a memory's earlier text was replaced (kernel/store/memory_versions.py).
How = Literal["edited", "superseded", "restated"]


class DuplicateMemory(Exception):
    """An edit would make a memory the same fact as memory ``existing``."""

    def __init__(self, existing: int) -> None:
        super().__init__(f"the same fact is already memory {existing}")
        self.existing = existing


@dataclass(slots=True)
class MemoryRow:
    id: int
    text: str
    category: str | None
    created_at: datetime
    scope: str = "global"


_COLUMNS = "id, text, category, created_at, scope"
_MEMORY_SELECT = f"SELECT {_COLUMNS} FROM memories"


class MemoryTables(Database):
    """The Store's memory methods."""

    async def add_memory(
        self,
        text: str,
        category: str | None = None,
        *,
        tokens: str | None = None,
        scope: str = "global",
    ) -> tuple[MemoryRow, bool]:
        """Store a memory in ``scope``; returns (row, created). The same fact (whitespace
        and case aside) already in that scope or in global returns that row and False.

        ``tokens``: the text's search tokens; indexed at once when FTS5 is in use,
        otherwise the row waits in the backlog (:meth:`memory_backlog`).
        Raises ValueError for empty text, an unknown category or an empty scope.
        """
        if not scope:
            raise ValueError("memory scope is empty")
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
                _MEMORY_SELECT + " WHERE key = ? AND scope IN ('global', ?) ORDER BY id LIMIT 1",
                (key, scope),
            ).fetchone()
            if row is not None:
                return _memory_from_row(row), False
            cur = conn.execute(
                "INSERT INTO memories (text, category, created_at, key, tokens, scope)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (clean, category, now, key, tokens if index else None, scope),
            )
            memory_id = last_id(cur)
            if index:
                conn.execute(
                    "INSERT INTO memories_fts (rowid, tokens) VALUES (?, ?)", (memory_id, tokens)
                )
            created_at = datetime.fromisoformat(now)
            return MemoryRow(memory_id, clean, category, created_at, scope), True

        result = await self._write("add memory", op)
        if result[1] and not index and self.fts5_available:
            self.memory_index_pending = True
        return result

    async def list_memories(
        self,
        *,
        limit: int = 200,
        scopes: Sequence[str] | None = None,
        category: str | None = None,
        offset: int = 0,
    ) -> list[MemoryRow]:
        """Newest first; ``category``: only those of that category; ``offset``: skip
        that many of the newest."""
        check_non_negative(limit=limit, offset=offset)
        query = _newest(limit, scopes, category, offset)
        if query is None:
            return []
        return await self._read("list memories", lambda conn: _found(conn, query))

    async def count_memories(self, *, scopes: Sequence[str] | None = None) -> int:
        where, params = _in_scopes(scopes)
        if params is None:
            return 0
        sql = f"SELECT COUNT(*) FROM memories{where}"

        def op(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql, params).fetchone()[0])

        return await self._read("count memories", op)

    async def search_memories_fts(
        self, match: str, *, limit: int = 5, scopes: Sequence[str] | None = None
    ) -> list[MemoryRow]:
        """Memories matching an FTS5 query (built by kernel/memory/tokens.py), best
        BM25 rank first. Raises StoreError when FTS5 is not in use."""
        check_non_negative(limit=limit)
        if not self.fts5_available:
            raise StoreError("full-text search is not available (SQLite without FTS5)")
        query = _matching(match, limit, scopes)
        if query is None:
            return []
        return await self._read("search memories", lambda conn: _found(conn, query))

    async def search_memories_like(
        self,
        terms: Sequence[str],
        *,
        limit: int = 5,
        newest: int | None = None,
        scopes: Sequence[str] | None = None,
    ) -> list[MemoryRow]:
        """Memories containing any of ``terms`` (substring match, the fallback without
        FTS5). Ranked by how many distinct terms match, then newest first.
        Case-insensitive for ASCII only (SQLite LIKE). ``newest``: look only at that
        many of the most recent memories in ``scopes`` (a scan's cost grows with the
        table)."""
        check_non_negative(limit=limit)
        query = _containing(terms, limit, newest, scopes)
        if query is None:
            return []
        return await self._read("search memories", lambda conn: _found(conn, query))

    async def recall_memories(
        self,
        terms: Sequence[str],
        match: str,
        *,
        limit: int,
        newest: int,
        scopes: Sequence[str] | None = None,
    ) -> list[MemoryRow]:
        """A turn's recall in one store call: the FTS5 matches of ``match`` (when FTS5
        is in use), else those containing ``terms`` (among the ``newest`` memories with
        FTS5, all without), else the newest ``limit``: the first that finds any."""
        check_non_negative(limit=limit)
        fts = self.fts5_available
        queries = [
            _matching(match, limit, scopes) if fts else None,
            _containing(terms, limit, newest if fts else None, scopes),
            _newest(limit, scopes),
        ]
        chosen = [query for query in queries if query is not None]
        if not chosen:
            return []

        def op(conn: sqlite3.Connection) -> list[MemoryRow]:
            for query in chosen:
                found = _found(conn, query)
                if found:
                    return found
            return []

        return await self._read("recall memories", op)

    async def get_memory(self, memory_id: int) -> MemoryRow | None:
        def op(conn: sqlite3.Connection) -> MemoryRow | None:
            row = conn.execute(_MEMORY_SELECT + " WHERE id = ?", (memory_id,)).fetchone()
            return _memory_from_row(row) if row is not None else None

        return await self._read("read memory", op)

    async def update_memory(
        self,
        memory_id: int,
        *,
        text: str | None = None,
        category: str | None = None,
        tokens: str | None = None,
        how: How = "edited",
        replacing: int | None = None,
    ) -> MemoryRow | None:
        """Change a memory's text (re-indexed with ``tokens``, else left to the backlog)
        and/or category, in place (same id and scope); None when there is no such memory.
        A changed text keeps the one before as an earlier version, replaced ``how``.
        Raises ValueError for empty text or an unknown category, and
        :class:`DuplicateMemory` when the new text is another memory's fact in the same
        scope or in global (what :meth:`add_memory` would have returned instead).
        ``replacing``: a newer memory whose fact this one takes, deleted in the same
        transaction (a kill between the two never loses the fact)."""
        clean = None if text is None else text.strip()
        if clean is not None and not clean:
            raise ValueError("memory text is empty")
        if category is not None and category not in MEMORY_CATEGORIES:
            raise ValueError(f"memory category must be one of {', '.join(MEMORY_CATEGORIES)}")
        fts = self.fts5_available
        index = tokens is not None and fts
        now = self._now()

        def op(conn: sqlite3.Connection) -> MemoryRow | None:
            found = conn.execute(
                "SELECT scope, tokens, text FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if found is None:
                return None
            scope, old_tokens, old_text = found
            if replacing is not None:
                newer = conn.execute(
                    "SELECT tokens FROM memories WHERE id = ?", (replacing,)
                ).fetchone()
                if newer is not None:
                    delete_row(conn, replacing, newer[0], fts=fts)
            if clean is not None and clean != old_text:  # undone with the rest on a refusal
                keep_version(conn, memory_id, how, now)
            if category is not None:
                conn.execute("UPDATE memories SET category = ? WHERE id = ?", (category, memory_id))
            if clean is not None:
                key = memory_key(clean)
                check_unique(conn, key, scope, memory_id)
                if fts and old_tokens is not None:
                    conn.execute(
                        "INSERT INTO memories_fts (memories_fts, rowid, tokens)"
                        " VALUES ('delete', ?, ?)",
                        (memory_id, old_tokens),
                    )
                conn.execute(
                    "UPDATE memories SET text = ?, key = ?, tokens = ? WHERE id = ?",
                    (clean, key, tokens if index else None, memory_id),
                )
                if index:
                    conn.execute(
                        "INSERT INTO memories_fts (rowid, tokens) VALUES (?, ?)",
                        (memory_id, tokens),
                    )
            row = conn.execute(_MEMORY_SELECT + " WHERE id = ?", (memory_id,)).fetchone()
            return _memory_from_row(row)

        result = await self._write("update memory", op)
        if result is not None and clean is not None and not index and fts:
            self.memory_index_pending = True
        return result

    async def delete_memories(
        self, ids: Sequence[int], *, scopes: Sequence[str] | None = None
    ) -> int:
        """Delete memories (and their index entries); returns how many were deleted.
        A memory outside ``scopes`` is left alone, as if it did not exist."""
        unique = sorted({int(i) for i in ids})
        where, params = _in_scopes(scopes, joiner=" AND")
        if not unique or params is None:
            return 0
        fts = self.fts5_available
        sql = f"SELECT tokens FROM memories WHERE id = ?{where}"

        def op(conn: sqlite3.Connection) -> int:
            deleted = 0
            for memory_id in unique:
                row = conn.execute(sql, [memory_id, *params]).fetchone()
                if row is None:
                    continue
                delete_row(conn, memory_id, row[0], fts=fts)
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


def check_unique(conn: sqlite3.Connection, key: str, scope: str, memory_id: int) -> None:
    """Raise DuplicateMemory when the fact ``key`` is another memory of ``scope`` or of
    global than ``memory_id``."""
    other = conn.execute(
        "SELECT id FROM memories WHERE key = ? AND scope IN ('global', ?) AND id != ?"
        " ORDER BY id LIMIT 1",
        (key, scope, memory_id),
    ).fetchone()
    if other is not None:
        raise DuplicateMemory(int(other[0]))


def keep_version(conn: sqlite3.Connection, memory_id: int, how: How, now: str) -> None:
    """Keep memory ``memory_id``'s current text as an earlier version (before a change)."""
    conn.execute(
        "INSERT INTO memory_versions"
        " (memory_id, text, category, scope, saved_at, replaced_at, how)"
        " SELECT m.id, m.text, m.category, m.scope, COALESCE(("
        "   SELECT v.replaced_at FROM memory_versions v WHERE v.memory_id = m.id"
        "   ORDER BY v.id DESC LIMIT 1), m.created_at), ?, ?"
        " FROM memories m WHERE m.id = ?",
        (now, how, memory_id),
    )


def delete_row(conn: sqlite3.Connection, memory_id: int, tokens: str | None, *, fts: bool) -> None:
    """Delete one memory and its full-text entry (its versions and vector go with it)."""
    if fts and tokens is not None:
        conn.execute(
            "INSERT INTO memories_fts (memories_fts, rowid, tokens) VALUES ('delete', ?, ?)",
            (memory_id, tokens),
        )
    conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))


def has_backlog(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM memories WHERE tokens IS NULL)").fetchone()
    return bool(row[0])


def _ascii_lower(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# A memory query: its SQL and parameters; None when it cannot find anything.
Query = tuple[str, list[Any]]


def _found(conn: sqlite3.Connection, query: Query) -> list[MemoryRow]:
    return [_memory_from_row(row) for row in conn.execute(*query).fetchall()]


def _newest(
    limit: int, scopes: Sequence[str] | None, category: str | None = None, offset: int = 0
) -> Query | None:
    where, params = _in_scopes(scopes)
    if params is None or limit == 0:
        return None
    if category is not None:
        where += f"{' AND' if where else ' WHERE'} category = ?"
        params = [*params, category]
    return f"{_MEMORY_SELECT}{where} ORDER BY id DESC LIMIT ? OFFSET ?", [*params, limit, offset]


def _matching(match: str, limit: int, scopes: Sequence[str] | None) -> Query | None:
    where, params = _in_scopes(scopes, column="m.scope", joiner=" AND")
    if not match or limit == 0 or params is None:
        return None
    # Joined with memories: a row deleted while FTS5 was unavailable may linger in
    # the index (ids are never reused, so it can never match another memory).
    sql = (
        "SELECT m.id, m.text, m.category, m.created_at, m.scope"
        " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
        f" WHERE memories_fts MATCH ?{where} ORDER BY memories_fts.rank LIMIT ?"
    )
    return sql, [match, *params, limit]


def _containing(
    terms: Sequence[str], limit: int, newest: int | None, scopes: Sequence[str] | None
) -> Query | None:
    # LIKE folds ASCII case only, so terms are deduplicated the same way.
    unique: dict[str, str] = {}
    for term in terms:
        if term:
            unique.setdefault(_ascii_lower(term), term)
    chosen = list(unique.values())[:MAX_SEARCH_TERMS]
    where, visible = _in_scopes(scopes)
    if not chosen or limit == 0 or visible is None:
        return None
    score = " + ".join(["(text LIKE ? ESCAPE '\\')"] * len(chosen))
    window = "" if newest is None else " ORDER BY id DESC LIMIT ?"
    sql = (
        f"SELECT {_COLUMNS} FROM"
        f" (SELECT *, {score} AS score FROM memories{where}{window})"
        " WHERE score > 0 ORDER BY score DESC, id DESC LIMIT ?"
    )
    params: list[Any] = [f"%{_escape_like(t)}%" for t in chosen]
    params.extend(visible)
    if newest is not None:
        params.append(newest)
    params.append(limit)
    return sql, params


def _in_scopes(
    scopes: Sequence[str] | None, *, column: str = "scope", joiner: str = " WHERE"
) -> tuple[str, list[str] | None]:
    """The SQL condition (after ``joiner``) keeping rows in ``scopes`` and its
    parameters: ("", []) for every scope, ("", None) when no scope is visible."""
    if scopes is None:
        return "", []
    unique = list(dict.fromkeys(scopes))
    if not unique:
        return "", None
    marks = ", ".join("?" * len(unique))
    return f"{joiner} {column} IN ({marks})", unique


def _memory_from_row(row: tuple[Any, ...]) -> MemoryRow:
    mid, text, category, created_at, scope = row
    return MemoryRow(
        id=int(mid),
        text=str(text),
        category=category,
        created_at=datetime.fromisoformat(created_at),
        scope=str(scope),
    )
