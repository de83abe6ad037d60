"""The audit trail's tables (migration 16, issue 23): ``audit_events`` and ``audit_heads``.

Every row is appended inside one write transaction on the database thread, which also
reads the two chain heads it links to (its session's and the global one), so rows are
chained in exactly the order they were written. What a row holds:

- ``id``: the global sequence (1, 2, 3 … no gap); ``seq``: the sequence inside its
  session (NULL for an event of no session: a configuration change, a cron skip);
- ``digest`` = the hash of the canonical JSON of ``[id, session_id, seq, at, kind, actor,
  data_sha256]``;
- ``shash`` = the hash of (previous row of the session's ``shash`` + ``digest``) and
  ``ghash`` the same over the global chain, starting from :data:`GENESIS`;
- "the hash": HMAC-SHA256 under the audit key (kernel/audit/key.py, kept outside the
  data directory) for the rows written with one, so whoever can write ``kernel.db`` but
  not read the key cannot recompute them; plain SHA-256 for the rows written before the
  key existed (an older record) or without one (tests, a bare Store);
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
import hmac
import json
import sqlite3
from asyncio import Future
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kernel.store.database import Database, RowId

GENESIS = "0" * 64
GLOBAL = "global"
PRUNED = "audit.pruned"
KEYED = "audit.keyed"  # the first row chained under the audit key (kernel/audit/key.py)
MAX_LIMIT = 1000
T = TypeVar("T")

_COLUMNS = "id, session_id, seq, at, kind, actor, data, data_sha256, digest, shash, ghash, pruned"


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
    raw_data: str | None = None  # the column as stored
    data_sha256: str = ""  # of raw_data; what the digest covers, kept when it is emptied
    malformed: bool = False  # a column of the wrong type (written by hand): broken

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
class Prune:
    """One ``audit.pruned`` row: which sessions' rows it emptied, up to which sequence
    of each, and what verification needs to check the row itself (its global link)."""

    row: AuditRow
    previous: str  # the global chain's link before it (GENESIS for the first row)
    upto: dict[int, int]  # session id → the last sequence it emptied


@dataclass(frozen=True, slots=True)
class Chain:
    """What verification reads in one snapshot: the chain's rows in order, its head,
    the stored hashes of the messages its rows reference, the ``audit.pruned`` rows,
    and (for a session's chain) the first gap in the global numbering, if any."""

    session_id: int | None  # None: the global chain
    rows: list[AuditRow]
    head: tuple[int, str] | None  # (last seq, last hash) as audit_heads says
    messages: dict[int, tuple[int, str]]  # message id → (session id, sha256 of content)
    prunes: list[Prune]
    global_gap: int | None = None  # a global id missing (a row deleted elsewhere)
    keyed_at: int | None = None  # the global id of the first ``audit.keyed`` row, if any


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal(text: str, key: bytes | None) -> str:
    """HMAC-SHA256 of ``text`` under ``key`` (hex), or its SHA-256 without a key."""
    if key is None:
        return sha256(text)
    return hmac.digest(key, text.encode("utf-8"), "sha256").hex()


def digest_of(
    id: int,
    session_id: int | None,
    seq: int | None,
    at: str,
    kind: str,
    actor: str,
    data_sha256: str,
    key: bytes | None = None,
) -> str:
    """The row's own hash: its fields and its data's hash, so an emptied row (data gone,
    its hash kept) still proves its kind, actor and time. ``key``: the audit key."""
    canon = json.dumps(
        [id, session_id, seq, at, kind, actor, data_sha256],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    return seal(canon, key)


def link(previous: str, digest: str, key: bytes | None = None) -> str:
    return seal(previous + digest, key)


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
    key: bytes | None,
) -> AuditRow:
    """Append one row inside the caller's write transaction and move the heads;
    ``key``: the audit key the row is chained under (None: plain SHA-256)."""
    # A row another write of this hop made names it by its id, known only now.
    # (None when that write failed: the fact is left out.)
    facts: dict[str, Any] = {
        k: v.value if isinstance(v, RowId) else v
        for k, v in data.items()
        if not isinstance(v, RowId) or v.value is not None
    }
    ids = facts.pop("messages", None)
    if ids:
        ids = [i.value if isinstance(i, RowId) else i for i in ids]
        facts["messages"] = _message_refs(conn, [int(i) for i in ids if i is not None])
    # ASCII JSON: any fact (a lone surrogate in a model's tool name) is stored and hashed.
    text = json.dumps(facts, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    data_sha = sha256(text)
    gseq, gprev = _head(conn, GLOBAL)
    row_id = gseq + 1
    seq: int | None = None
    shash: str | None = None
    digest = ""
    if session_id is not None:
        sseq, sprev = _head(conn, session_chain(session_id))
        seq = sseq + 1
        digest = digest_of(row_id, session_id, seq, at, kind, actor, data_sha, key)
        shash = link(sprev, digest, key)
        _move(conn, session_chain(session_id), seq, shash)
    else:
        digest = digest_of(row_id, None, None, at, kind, actor, data_sha, key)
    ghash = link(gprev, digest, key)
    _move(conn, GLOBAL, row_id, ghash)
    conn.execute(
        f"INSERT INTO audit_events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
        (row_id, session_id, seq, at, kind, actor, text, data_sha, digest, shash, ghash),
    )
    return AuditRow(
        row_id,
        session_id,
        seq,
        at,
        kind,
        actor,
        facts,
        digest,
        shash,
        ghash,
        False,
        text,
        data_sha,
    )


def prune_in(
    conn: sqlite3.Connection, key: bytes | None, at: str, session_ids: Iterable[int], why: str
) -> int:
    """Empty the audit rows of sessions whose history is gone (in the caller's
    transaction) and record it; returns how many rows were emptied."""
    ids = sorted({int(i) for i in session_ids})
    if not ids:
        return 0
    marks = ", ".join("?" * len(ids))
    # How far each session's rows go now: the record says it emptied up to there, so a
    # row emptied later by hand is not covered (review R1).
    upto = {
        str(sid): int(last)
        for sid, last in conn.execute(
            f"SELECT session_id, MAX(seq) FROM audit_events WHERE session_id IN ({marks})"
            " GROUP BY session_id",
            ids,
        )
    }
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
            data={"sessions": ids, "rows": cur.rowcount, "why": why, "upto": upto},
            key=key,
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
    rid, sid, seq, at, kind, actor, data, data_sha, digest, shash, ghash, pruned = values
    parsed: dict[str, Any] | None = None
    if data is not None:
        try:
            loaded = json.loads(data)
        except (ValueError, TypeError):
            loaded = None
        parsed = loaded if isinstance(loaded, dict) else {}
    try:
        return AuditRow(
            _int(rid),
            None if sid is None else _int(sid),
            None if seq is None else _int(seq),
            _str(at),
            _str(kind),
            _str(actor),
            parsed,
            _str(digest),
            None if shash is None else _str(shash),
            _str(ghash),
            bool(pruned),
            None if data is None else _str(data),
            _str(data_sha),
        )
    except (TypeError, ValueError):
        # A column of another type (written by hand): kept where it stood, never a crash.
        number = rid if isinstance(rid, int) else 0
        return AuditRow(number, None, None, "", "?", "?", {}, "", None, "", False, malformed=True)


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("not an integer")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not text")
    return value


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
            f"SELECT {_COLUMNS} FROM audit_events WHERE session_id = ? ORDER BY seq, id",
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
    return Chain(
        session_id,
        rows,
        None if head is None else (int(head[0]), str(head[1])),
        _message_hashes(conn, refs),
        _prunes(conn),
        None if session_id is None else _global_gap(conn),
        keyed_at(conn),
    )


def keyed_at(conn: sqlite3.Connection) -> int | None:
    """The global id of the first ``audit.keyed`` row: from there on the record is
    chained under the audit key."""
    found = conn.execute(
        "SELECT MIN(id) FROM audit_events WHERE kind = ? AND session_id IS NULL", (KEYED,)
    ).fetchone()
    return None if found is None or found[0] is None else int(found[0])


def global_head(conn: sqlite3.Connection) -> tuple[int, str]:
    """The global chain's recorded end (last id, last hash)."""
    return _head(conn, GLOBAL)


def _prunes(conn: sqlite3.Connection) -> list[Prune]:
    found: list[Prune] = []
    for values in conn.execute(
        f"SELECT {_COLUMNS} FROM audit_events WHERE kind = ? AND session_id IS NULL ORDER BY id",
        (PRUNED,),
    ):
        row = _row(values)
        before = conn.execute(
            "SELECT ghash FROM audit_events WHERE id = ?", (row.id - 1,)
        ).fetchone()
        previous = GENESIS if row.id == 1 else (str(before[0]) if before else "")
        upto: dict[int, int] = {}
        marks = (row.data or {}).get("upto")
        if isinstance(marks, dict):
            for sid, last in marks.items():
                if str(sid).isdigit() and isinstance(last, int):
                    upto[int(sid)] = last
        found.append(Prune(row, previous, upto))
    return found


def _global_gap(conn: sqlite3.Connection) -> int | None:
    """The first global id missing (or past the recorded end), or None when the global
    numbering is whole: a session's chain cut at its end shows only here."""
    count, last = conn.execute("SELECT COUNT(*), MAX(id) FROM audit_events").fetchone()
    head = _head(conn, GLOBAL)[0]
    last = int(last or 0)
    if count == last and head <= last:
        return None
    if count != last:
        first = conn.execute("SELECT MIN(id) FROM audit_events").fetchone()[0]
        if first is not None and first > 1:
            return 1
        gap = conn.execute(
            "SELECT MIN(a.id) + 1 FROM audit_events a WHERE a.id < ? AND NOT EXISTS"
            " (SELECT 1 FROM audit_events b WHERE b.id = a.id + 1)",
            (last,),
        ).fetchone()[0]
        return int(gap) if gap is not None else last + 1
    return last + 1


def read_only(path: Path, fn: Callable[[sqlite3.Connection], T], *, immutable: bool = False) -> T:
    """``fn`` on its own read-only connection in one read transaction (blocking: run it
    in a thread): a long read never holds up the database thread's writes (WAL).
    ``immutable``: a file no process writes (read as it is, no -wal/-shm made)."""
    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    uri = f"{Path(path).resolve().as_uri()}?{flags}"  # file:///C:/… on Windows too
    with closing(sqlite3.connect(uri, uri=True, isolation_level=None)) as conn:
        conn.execute("PRAGMA query_only = 1")
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            conn.execute("ROLLBACK")


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
        op = self._appending(kind, session_id, actor, data)
        return await self.db.write("audit append", op)

    def append_soon(
        self,
        kind: str,
        *,
        session_id: int | None = None,
        actor: str = "kernel",
        data: dict[str, Any] | None = None,
        linger: float | None = None,
        after: RowId | None = None,
    ) -> Future[AuditRow | None]:
        """:meth:`append` queued without waiting for it (``Database.write_soon``);
        ``after``: only if the write queued before it that fills that row made it (a
        turn's ``message.received`` behind its optimistic start), else None."""
        op = self._appending(kind, session_id, actor, data)
        if after is None:
            return self.db.write_soon("audit append", op, linger=linger)

        def if_made(conn: sqlite3.Connection) -> AuditRow | None:
            return None if after.value is None else op(conn)

        return self.db.write_soon("audit append", if_made, linger=linger)

    def _appending(
        self, kind: str, session_id: int | None, actor: str, data: dict[str, Any] | None
    ) -> Callable[[sqlite3.Connection], AuditRow]:
        at = self.db._now()

        def op(conn: sqlite3.Connection) -> AuditRow:
            return append_in(
                conn,
                at,
                kind,
                session_id=session_id,
                actor=actor,
                data=data or {},
                key=self.db.audit_key,
            )

        return op

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


def ghash_of(conn: sqlite3.Connection, row_id: int) -> str | None:
    """The global link of row ``row_id``, or None when there is no such row (on the
    database thread, in a job of the caller's)."""
    found = conn.execute("SELECT ghash FROM audit_events WHERE id = ?", (row_id,)).fetchone()
    return str(found[0]) if found is not None else None


def last_row(conn: sqlite3.Connection) -> tuple[int, str] | None:
    """The global chain's last row as written: its id and link (None: no row)."""
    found = conn.execute("SELECT id, ghash FROM audit_events ORDER BY id DESC LIMIT 1").fetchone()
    return (int(found[0]), str(found[1])) if found is not None else None
