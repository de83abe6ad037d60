"""The audit trail's tables (migration 16, issue 23): ``audit_events`` and ``audit_heads``.

Every row is appended inside one write transaction on the database thread, which also
reads the two chain heads it links to (its session's and the global one), so rows are
chained in exactly the order they were written. What a row holds:

- ``id``: the global sequence (1, 2, 3 … no gap); ``seq``: the sequence inside its
  session (NULL for an event of no session: a configuration change, a cron skip);
- ``digest`` = SHA-256 of the canonical JSON of ``[id, session_id, seq, at, kind, actor,
  data]``;
- ``shash`` = SHA-256(previous row of the session's ``shash`` + ``digest``) and ``ghash``
  the same over the global chain, starting from :data:`GENESIS`;
- ``data``: small facts (names, counts, codes, hashes), never message text: a stored
  message is referenced as ``{"id": …, "sha256": …}`` of its ``content`` column, computed
  here from the ``messages`` key of the data (a list of message ids).

When history goes (a session deleted, ``/del_history``), :func:`prune_in` empties the
``data`` of that session's rows in the same transaction (``pruned`` = 1, the hashes
kept) and appends one ``audit.pruned`` row naming the sessions, so the chains still
verify and a row emptied any other way does not. Verification is kernel/audit/verify.py.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kernel.store.database import Database

GENESIS = "0" * 64
GLOBAL = "global"
PRUNED = "audit.pruned"
MAX_LIMIT = 1000

_COLUMNS = "id, session_id, seq, at, kind, actor, data, digest, shash, ghash, pruned"


@dataclass(frozen=True, slots=True)
class AuditRow:
    id: int  # the global sequence
    session_id: int | None
    seq: int | None  # the sequence in its session
    at: str  # ISO 8601, UTC, seconds
    kind: str  # "tool.call", "cron.missed" … (kernel/audit/kinds.py)
    actor: str  # owner | model | kernel | cron | guest:<id> | api …
    data: dict[str, Any] | None  # None once pruned
    digest: str
    shash: str | None
    ghash: str
    pruned: bool
    raw_data: str | None = None  # the column as stored, what the digest covers

    def as_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "id": self.id,
            "session_id": self.session_id,
            "at": self.at,
            "kind": self.kind,
            "actor": self.actor,
            "data": self.data,
            "pruned": self.pruned,
            "hash": self.shash if self.session_id is not None else self.ghash,
        }


@dataclass(frozen=True, slots=True)
class Chain:
    """What verification reads in one snapshot: the chain's rows in order, its head,
    the stored hashes of the messages its rows reference, and the sessions an
    ``audit.pruned`` row covers."""

    session_id: int | None  # None: the global chain
    rows: list[AuditRow]
    head: tuple[int, str] | None  # (last seq, last hash) as audit_heads says
    messages: dict[int, tuple[int, str]]  # message id → (session id, sha256 of content)
    pruned_sessions: set[int]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest_of(
    id: int, session_id: int | None, seq: int | None, at: str, kind: str, actor: str, data: str
) -> str:
    canon = json.dumps(
        [id, session_id, seq, at, kind, actor, data], ensure_ascii=True, separators=(",", ":")
    )
    return sha256(canon)


def link(previous: str, digest: str) -> str:
    return sha256(previous + digest)


def session_chain(session_id: int) -> str:
    return f"session:{session_id}"


def append_in(
    conn: sqlite3.Connection,
    at: str,
    kind: str,
    *,
    session_id: int | None,
    actor: str,
    data: dict[str, Any],
) -> AuditRow:
    """Append one row inside the caller's write transaction and move the heads."""
    facts = dict(data)
    ids = facts.pop("messages", None)
    if ids:
        facts["messages"] = _message_refs(conn, [int(i) for i in ids])
    # ASCII JSON: any fact (a lone surrogate in a model's tool name) is stored and hashed.
    text = json.dumps(facts, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    gseq, gprev = _head(conn, GLOBAL)
    row_id = gseq + 1
    seq: int | None = None
    shash: str | None = None
    digest = ""
    if session_id is not None:
        sseq, sprev = _head(conn, session_chain(session_id))
        seq = sseq + 1
        digest = digest_of(row_id, session_id, seq, at, kind, actor, text)
        shash = link(sprev, digest)
        _move(conn, session_chain(session_id), seq, shash)
    else:
        digest = digest_of(row_id, None, None, at, kind, actor, text)
    ghash = link(gprev, digest)
    _move(conn, GLOBAL, row_id, ghash)
    conn.execute(
        f"INSERT INTO audit_events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
        (row_id, session_id, seq, at, kind, actor, text, digest, shash, ghash),
    )
    return AuditRow(
        row_id, session_id, seq, at, kind, actor, facts, digest, shash, ghash, False, text
    )


def prune_in(conn: sqlite3.Connection, at: str, session_ids: Iterable[int], why: str) -> int:
    """Empty the audit rows of sessions whose history is gone (in the caller's
    transaction) and record it; returns how many rows were emptied."""
    ids = sorted({int(i) for i in session_ids})
    if not ids:
        return 0
    marks = ", ".join("?" * len(ids))
    cur = conn.execute(
        f"UPDATE audit_events SET data = NULL, pruned = 1 WHERE session_id IN ({marks})"
        " AND pruned = 0",
        ids,
    )
    if cur.rowcount:
        append_in(
            conn,
            at,
            PRUNED,
            session_id=None,
            actor="kernel",
            data={"sessions": ids, "rows": cur.rowcount, "why": why},
        )
    return cur.rowcount


def _message_refs(conn: sqlite3.Connection, ids: Sequence[int]) -> list[dict[str, Any]]:
    found = _message_hashes(conn, ids)
    return [{"id": i, "sha256": found[i][1] if i in found else None} for i in ids]


def _message_hashes(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[int, str]]:
    found: dict[int, tuple[int, str]] = {}
    unique = sorted(set(ids))
    for start in range(0, len(unique), 500):
        part = unique[start : start + 500]
        marks = ", ".join("?" * len(part))
        for mid, sid, content in conn.execute(
            f"SELECT id, session_id, content FROM messages WHERE id IN ({marks})", part
        ):
            found[int(mid)] = (int(sid), sha256(content))
    return found


def _head(conn: sqlite3.Connection, chain: str) -> tuple[int, str]:
    row = conn.execute("SELECT seq, hash FROM audit_heads WHERE chain = ?", (chain,)).fetchone()
    return (int(row[0]), str(row[1])) if row is not None else (0, GENESIS)


def _move(conn: sqlite3.Connection, chain: str, seq: int, value: str) -> None:
    conn.execute(
        "INSERT INTO audit_heads (chain, seq, hash) VALUES (?, ?, ?)"
        " ON CONFLICT(chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
        (chain, seq, value),
    )


def _row(values: Sequence[Any]) -> AuditRow:
    rid, sid, seq, at, kind, actor, data, digest, shash, ghash, pruned = values
    parsed: dict[str, Any] | None = None
    if data is not None:
        try:
            loaded = json.loads(data)
        except ValueError:
            loaded = None
        parsed = loaded if isinstance(loaded, dict) else {}
    return AuditRow(
        int(rid),
        None if sid is None else int(sid),
        None if seq is None else int(seq),
        str(at),
        str(kind),
        str(actor),
        parsed,
        str(digest),
        None if shash is None else str(shash),
        str(ghash),
        bool(pruned),
        None if data is None else str(data),
    )


def read_events(
    conn: sqlite3.Connection,
    session_id: int | None = None,
    limit: int = 100,
    before: int | None = None,
    kinds: Sequence[str] = (),
) -> list[AuditRow]:
    """The newest ``limit`` rows (of a session, or of every chain), oldest first;
    ``before``: only rows with a smaller global id (paging back). Reads only: also
    what ``kernel audit`` runs on a read-only connection."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    where: list[str] = []
    args: list[Any] = []
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    if before is not None:
        where.append("id < ?")
        args.append(int(before))
    if kinds:
        where.append(f"kind IN ({', '.join('?' * len(kinds))})")
        args.extend(kinds)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM audit_events {clause} ORDER BY id DESC LIMIT ?",
        (*args, limit),
    ).fetchall()
    return [_row(r) for r in reversed(rows)]


def read_chain(conn: sqlite3.Connection, session_id: int | None = None) -> Chain:
    """One chain (a session's, or with None the global one) as verification reads it;
    in one read transaction for a consistent snapshot."""
    if session_id is None:
        cur = conn.execute(f"SELECT {_COLUMNS} FROM audit_events ORDER BY id")
        name = GLOBAL
    else:
        cur = conn.execute(
            f"SELECT {_COLUMNS} FROM audit_events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        name = session_chain(session_id)
    rows = [_row(r) for r in cur]
    head = conn.execute("SELECT seq, hash FROM audit_heads WHERE chain = ?", (name,)).fetchone()
    refs: list[int] = []
    for row in rows:
        for ref in (row.data or {}).get("messages") or []:
            if isinstance(ref, dict) and isinstance(ref.get("id"), int):
                refs.append(ref["id"])
    pruned: set[int] = set()
    for (data,) in conn.execute(
        "SELECT data FROM audit_events WHERE kind = ? AND session_id IS NULL", (PRUNED,)
    ):
        try:
            sessions = json.loads(data or "{}").get("sessions") or []
        except (ValueError, AttributeError):
            continue
        pruned.update(int(s) for s in sessions if isinstance(s, int))
    return Chain(
        session_id,
        rows,
        None if head is None else (int(head[0]), str(head[1])),
        _message_hashes(conn, refs),
        pruned,
    )


def has_chain(conn: sqlite3.Connection, session_id: int) -> bool:
    """Whether the session ever had an audit row (its head is kept, even emptied)."""
    found = conn.execute(
        "SELECT 1 FROM audit_heads WHERE chain = ?", (session_chain(session_id),)
    ).fetchone()
    if found is not None:
        return True
    return (
        conn.execute(
            "SELECT 1 FROM audit_events WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone()
        is not None
    )


class AuditStore:
    """Reads and appends ``audit_events`` through the Store's database thread."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def append(
        self,
        kind: str,
        *,
        session_id: int | None = None,
        actor: str = "kernel",
        data: dict[str, Any] | None = None,
    ) -> AuditRow:
        at = self.db._now()

        def op(conn: sqlite3.Connection) -> AuditRow:
            return append_in(conn, at, kind, session_id=session_id, actor=actor, data=data or {})

        return await self.db.write("audit append", op)

    async def events(
        self,
        *,
        session_id: int | None = None,
        limit: int = 100,
        before: int | None = None,
        kinds: Sequence[str] = (),
    ) -> list[AuditRow]:
        """The newest ``limit`` rows (of a session, or of every chain), oldest first;
        ``before``: only rows with a smaller global id (paging back)."""

        def op(conn: sqlite3.Connection) -> list[AuditRow]:
            return read_events(conn, session_id, limit, before, kinds)

        return await self.db.read("audit events", op)

    async def chain(self, session_id: int | None = None) -> Chain:
        """One chain in one snapshot, for verification."""

        def op(conn: sqlite3.Connection) -> Chain:
            return read_chain(conn, session_id)

        return await self.db.read("audit chain", op)

    async def sessions(self, limit: int = 100) -> list[tuple[int, int]]:
        """(session id, events) of the sessions with audit rows, newest first."""

        def op(conn: sqlite3.Connection) -> list[tuple[int, int]]:
            return [
                (int(s), int(n))
                for s, n in conn.execute(
                    "SELECT session_id, COUNT(*) FROM audit_events WHERE session_id IS NOT NULL"
                    " GROUP BY session_id ORDER BY MAX(id) DESC LIMIT ?",
                    (max(1, min(limit, MAX_LIMIT)),),
                )
            ]

        return await self.db.read("audit sessions", op)

    async def has_chain(self, session_id: int) -> bool:
        return await self.db.read("audit has chain", lambda conn: has_chain(conn, session_id))
