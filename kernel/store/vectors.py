"""Memories' vectors (issue 39): the ``memory_vectors`` table (migration 22) and the
nearest memories to a vector, within the scopes a reader may see.

Vectors are float32, unit length, stored as BLOBs with their signs packed beside them
(``bits``). The nearest are found in two steps: the Hamming-nearest sign bits (kept in
memory, :class:`Signs`: a few microseconds a memory in Python), then their exact cosine,
by sqlite-vec's ``vec_distance_cosine`` when the extension is loaded
(:meth:`MemoryVectorTables.load_vectors`), else in Python (a Python whose sqlite3 cannot
load extensions). Measured (bench/README.md, issue 39): ``vec_distance_cosine`` over
every row is far slower at 10K memories than the first cut. The scope filter is
:func:`kernel.store.memories._in_scopes`, the one every memory read uses.
"""

from __future__ import annotations

import heapq
import logging
import operator
import sqlite3
import sys
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernel.store.database import Database, check_non_negative
from kernel.store.memories import (
    MemoryRow,
    _containing,
    _found,
    _in_scopes,
    _matching,
    _memory_from_row,
    _newest,
)

log = logging.getLogger(__name__)

REREAD = 3600.0  # seconds the sign bits are kept before they are read again
RERANK = 4  # without sqlite-vec: the Hamming-nearest ``RERANK × limit`` get an exact cosine
_ROW = "m.id, m.text, m.category, m.created_at, m.scope"
_JOINED = " FROM memory_vectors v JOIN memories m ON m.id = v.memory_id"


@dataclass(frozen=True, slots=True)
class Ranked:
    """One recall's candidates: ``words`` (FTS5, else LIKE) best first, ``meaning`` the
    nearest by vector with their cosine, best first; ``newest`` the most recent (what
    recall offers when neither finds any, as before)."""

    words: list[MemoryRow]
    meaning: list[tuple[MemoryRow, float]]
    newest: list[MemoryRow]


def pack(vector: Sequence[float]) -> tuple[bytes, bytes]:
    """A unit vector as stored: float32 little-endian, and its signs packed (bit i set:
    component i > 0)."""
    floats = array("f", vector)
    if sys.byteorder != "little":
        floats.byteswap()
    return floats.tobytes(), _sign_bits(vector).to_bytes((len(vector) + 7) // 8, "little")


def unpack(blob: bytes) -> array[float]:
    floats = array("f")
    floats.frombytes(blob)
    if sys.byteorder != "little":
        floats.byteswap()
    return floats


def _sign_bits(vector: Sequence[float]) -> int:
    value = 0
    for i, x in enumerate(vector):
        if x > 0:
            value |= 1 << i
    return value


class MemoryVectorTables(Database):
    """The Store's vector methods."""

    # Set by load_vectors: whether sqlite-vec's functions are in the connection.
    vec_loaded = False
    _signs: Signs | None = None  # the first cut's sign bits (db thread)

    async def load_vectors(self) -> bool:
        """Load the sqlite-vec extension into the connection (only when embeddings are
        configured); False where this Python's sqlite3 cannot load extensions."""

        def op(conn: sqlite3.Connection) -> bool:
            import sqlite_vec  # noqa: PLC0415 (loaded only when configured)

            enable = getattr(conn, "enable_load_extension", None)
            if enable is None:
                return False
            try:
                enable(True)
                try:
                    sqlite_vec.load(conn)
                finally:
                    enable(False)
            except sqlite3.Error as exc:
                log.warning("sqlite-vec could not be loaded: %s", type(exc).__name__)
                return False
            return True

        self.vec_loaded = await self._run("load sqlite-vec", op)
        return self.vec_loaded

    async def vector_backlog(self, model: str, limit: int) -> list[tuple[int, str]]:
        """(id, text) of memories without a vector of ``model``, newest first (a fresh
        save goes before the backfill of old ones)."""
        check_non_negative(limit=limit)

        def op(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            rows = conn.execute(
                "SELECT m.id, m.text FROM memories m LEFT JOIN memory_vectors v"
                " ON v.memory_id = m.id AND v.model = ? WHERE v.memory_id IS NULL"
                " ORDER BY m.id DESC LIMIT ?",
                (model, limit),
            ).fetchall()
            return [(int(i), str(text)) for i, text in rows]

        return await self._read("read vector backlog", op)

    async def put_vectors(
        self, model: str, rows: Sequence[tuple[int, str, Sequence[float]]]
    ) -> int:
        """Store (id, the text embedded, its unit vector); a memory deleted or given
        other text meanwhile is skipped. Returns how many were stored."""
        packed = [(memory_id, text, *pack(vector)) for memory_id, text, vector in rows]

        def op(conn: sqlite3.Connection) -> int:
            stored = 0
            for memory_id, text, blob, bits in packed:
                cur = conn.execute(
                    "INSERT OR REPLACE INTO memory_vectors (memory_id, model, vector, bits)"
                    " SELECT ?, ?, ?, ? WHERE EXISTS"
                    " (SELECT 1 FROM memories WHERE id = ? AND text = ?)",
                    (memory_id, model, blob, bits, memory_id, text),
                )
                stored += cur.rowcount
                if cur.rowcount and self._signs is not None:
                    self._signs.put(model, memory_id, bits)
            return stored

        return await self._write("store vectors", op)

    async def vector_progress(self, model: str) -> tuple[int, int]:
        """(memories with a vector of ``model``, memories)."""
        return await self._read("read vector progress", lambda conn: progress(conn, model))

    async def recall_ranked(
        self,
        terms: Sequence[str],
        match: str,
        vector: Sequence[float],
        model: str,
        *,
        limit: int,
        newest: int,
        floor: float = -1.0,
        scopes: Sequence[str] | None = None,
    ) -> Ranked:
        """A hybrid recall's candidates in one store call: the best ``limit`` by words
        (FTS5 when in use, else LIKE, as :meth:`recall_memories`) and by meaning (those
        at least ``floor`` close)."""
        check_non_negative(limit=limit)
        fts = self.fts5_available
        words = [
            _matching(match, limit, scopes) if fts else None,
            _containing(terms, limit, newest if fts else None, scopes),
        ]
        chosen = [query for query in words if query is not None]
        fallback = _newest(limit, scopes)
        floats, bits = pack(vector)
        if self._signs is None:
            self._signs = Signs()
        signs, vec = self._signs, self.vec_loaded

        def op(conn: sqlite3.Connection) -> Ranked:
            found: list[MemoryRow] = []
            for query in chosen:
                found = _found(conn, query)
                if found:
                    break
            near = [
                (row, similarity)
                for row, similarity in _nearest(
                    conn, floats, bits, model, limit, scopes, signs, vec
                )
                if similarity >= floor
            ]
            return Ranked(found, near, [] if fallback is None else _found(conn, fallback))

        return await self._read("recall memories", op)


def progress(conn: sqlite3.Connection, model: str) -> tuple[int, int]:
    """(memories with a vector of ``model``, memories)."""
    done = conn.execute(
        f"SELECT COUNT(*){_JOINED} WHERE v.model = ?",
        (model,),
    ).fetchone()[0]
    total = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    return int(done), int(total)


def _nearest(
    conn: sqlite3.Connection,
    floats: bytes,
    bits: bytes,
    model: str,
    limit: int,
    scopes: Sequence[str] | None,
    signs: Signs,
    vec: bool,
) -> list[tuple[MemoryRow, float]]:
    """The ``limit`` nearest in ``scopes`` by cosine: the Hamming-nearest of ``signs``
    re-ranked exactly (the whole table when too few of them are in ``scopes``)."""
    where, params = _in_scopes(scopes, column="m.scope", joiner=" AND")
    if params is None or limit == 0:
        return []
    near = signs.nearest(conn, model, int.from_bytes(bits, "little"), limit * RERANK)
    if not near:
        return []
    marks = ", ".join("?" * len(near))
    scored = _exact(conn, floats, f" WHERE v.memory_id IN ({marks}){where}", [*near, *params], vec)
    if len(scored) < limit and len(near) == limit * RERANK:  # scopes left too few: all
        scored = _exact(conn, floats, f" WHERE v.model = ?{where}", [model, *params], vec)
    return scored[:limit]


def _exact(
    conn: sqlite3.Connection, floats: bytes, where: str, params: list[Any], vec: bool
) -> list[tuple[MemoryRow, float]]:
    """Cosine of each memory ``where`` says: sqlite-vec's ``vec_distance_cosine`` when
    loaded, else in Python; best first."""
    if vec:
        sql = f"SELECT {_ROW}, 1 - vec_distance_cosine(v.vector, ?){_JOINED}{where} ORDER BY 6 DESC"
        return [
            (_memory_from_row(r[:5]), float(r[5])) for r in conn.execute(sql, [floats, *params])
        ]
    mine = unpack(floats)
    rows = conn.execute(f"SELECT {_ROW}, v.vector{_JOINED}{where}", params).fetchall()
    scored = [
        (_memory_from_row(row[:5]), sum(map(operator.mul, mine, unpack(row[5])))) for row in rows
    ]
    scored.sort(key=lambda pair: -pair[1])
    return scored


class Signs:
    """The sign bits of every vector of one model, kept on the db thread (without
    sqlite-vec): read once, then kept current by :meth:`MemoryVectorTables.put_vectors`,
    and read again when another connection (another process) committed, or
    ``REREAD`` seconds on. A memory deleted or changed meanwhile only costs a slot: the
    exact step reads from the tables."""

    def __init__(self) -> None:
        self.model = ""
        self.version = -1
        self.read_at = 0.0
        self.by_id: dict[int, int] = {}

    def nearest(self, conn: sqlite3.Connection, model: str, probe: int, count: int) -> list[int]:
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        stale = time.monotonic() - self.read_at > REREAD
        if stale or (model, version) != (self.model, self.version):
            rows = conn.execute(
                "SELECT memory_id, bits FROM memory_vectors WHERE model = ?", (model,)
            ).fetchall()
            self.by_id = {int(i): int.from_bytes(b, "little") for i, b in rows}
            self.model, self.version, self.read_at = model, version, time.monotonic()
        ids = list(self.by_id)
        distance = list(map(int.bit_count, map(probe.__xor__, self.by_id.values())))
        return [ids[i] for i in heapq.nsmallest(count, range(len(ids)), key=distance.__getitem__)]

    def put(self, model: str, memory_id: int, bits: bytes) -> None:
        if model == self.model:
            self.by_id[memory_id] = int.from_bytes(bits, "little")
