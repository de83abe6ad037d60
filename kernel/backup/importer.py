"""``kernel import FILE.jsonl`` (issue 40): Kernel's own JSON Lines (an export's
``memories.jsonl``, ``sessions.jsonl`` or ``cron_jobs.jsonl``, :mod:`kernel.backup.export`)
written back into kernel.db: a move to another machine, or a partial restore.

Importing is idempotent: what is already here is left as it is and counted, never
added twice.

- A memory is here when the same fact (whitespace and case aside) is in its scope or in
  global: the rule :meth:`kernel.store.memories.MemoryTables.add_memory` keeps. It keeps
  its time; it joins the full-text index when Kernel next starts (a running Kernel finds
  it meanwhile by its words, as its search falls back to them).
- A session is here when one of the same channel and user began in the same second (its
  ``created_at``) with the channel id the record names or the same first message. A new
  one keeps its messages in order, with their times, branches and marks; its channel id
  too, unless another session holds it or it was the database's own row number
  (``session-<n>``), which the new row gets afresh.
- A job is here when one with its id is; a new one is planned when Kernel next starts.

Records go in batches of one transaction each (:data:`BATCH`), so a running Kernel's
writes wait for at most one batch; a cut import is finished by importing again. A line
that is not such a record is refused and counted; the others still go in.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernel.backup.export import FORMAT, VERSION
from kernel.core.i18n import t
from kernel.core.messages import content_from_json, content_to_json
from kernel.core.session_modes import mode_of
from kernel.memory.scopes import check_scope
from kernel.store.memories import MEMORY_CATEGORIES
from kernel.store.migrations import MIGRATIONS, get_version, memory_key, migrate

BATCH = 200
_OWN_NUMBER = re.compile(r"^session-[0-9]+$")


class ImportRefused(Exception):
    """The file cannot be imported at all: the words say why and the fix."""


class BadRecord(Exception):
    """One line is no record this version reads."""


@dataclass(slots=True)
class ImportCounts:
    memories: int = 0
    sessions: int = 0
    messages: int = 0
    jobs: int = 0
    present: int = 0  # records already here, left as they were
    refused: int = 0  # lines that are no record
    first_refused: int = 0  # the line number of the first one

    def as_json(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if k != "first_refused"}


def import_file(db: Path, source: Path) -> ImportCounts:
    """Import ``source`` into the database ``db`` (made when there is none yet).
    Blocking: call it in a thread. Raises ImportRefused."""
    try:
        with source.open(encoding="utf-8") as lines:
            return import_lines(db, lines, source)
    except OSError as exc:
        raise ImportRefused(t("import.unreadable", path=source, detail=exc.strerror)) from None
    except UnicodeDecodeError:
        raise ImportRefused(t("import.not_export", path=source)) from None


def import_lines(db: Path, lines: Iterable[str], source: Path) -> ImportCounts:
    numbered = ((n, line) for n, line in enumerate(lines, start=1) if line.strip())
    first = next(numbered, None)
    version = 0 if first is None else _header_version(first[1])
    if version > VERSION:
        raise ImportRefused(t("import.newer", path=source, version=version))
    if version < 1:
        raise ImportRefused(t("import.not_export", path=source))
    with closing(_connect(db)) as conn:
        counts = ImportCounts()
        for batch in _batches(numbered):
            conn.execute("BEGIN IMMEDIATE")
            try:
                for number, line in batch:
                    _one(conn, number, line, counts)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return counts


def _header_version(line: str) -> int:
    """The format version an export's header line names; 0 when it is none."""
    try:
        head = json.loads(line)
    except ValueError:
        return 0
    if not isinstance(head, dict) or head.get("type") != FORMAT:
        return 0
    version = head.get("version")
    return version if type(version) is int else 0


def _connect(db: Path) -> sqlite3.Connection:
    """The database as Kernel opens it; a new one is made at the code's schema, an older
    one is left for Kernel to upgrade (its start backs it up first)."""
    fresh = not db.exists()
    if fresh:
        db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("PRAGMA foreign_keys = ON")
        if fresh:
            conn.execute("PRAGMA journal_mode = WAL")
            migrate(conn, MIGRATIONS)
        version = get_version(conn)
        if version != len(MIGRATIONS):
            raise ImportRefused(t("import.schema", path=db, version=version, known=len(MIGRATIONS)))
    except BaseException:
        conn.close()
        raise
    return conn


def _batches(numbered: Iterator[tuple[int, str]]) -> Iterator[list[tuple[int, str]]]:
    batch: list[tuple[int, str]] = []
    for item in numbered:
        batch.append(item)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _one(conn: sqlite3.Connection, number: int, line: str, counts: ImportCounts) -> None:
    conn.execute("SAVEPOINT record")
    try:
        record = json.loads(line)
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "memory":
            added = _memory(conn, record)
            counts.memories += added
        elif kind == "session":
            messages = _session(conn, record)
            added = messages is not None
            counts.sessions += added
            counts.messages += messages or 0
        elif kind == "cron_job":
            added = _job(conn, record)
            counts.jobs += added
        else:
            raise BadRecord(kind)
        counts.present += not added
    except (BadRecord, ValueError, KeyError, TypeError, AttributeError, sqlite3.IntegrityError):
        conn.execute("ROLLBACK TO record")
        counts.refused += 1
        counts.first_refused = counts.first_refused or number
    conn.execute("RELEASE record")


def _text(record: dict[str, Any], name: str, *, empty: bool = False) -> str:
    value = record[name]
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise BadRecord(name)
    return value


def _memory(conn: sqlite3.Connection, record: dict[str, Any]) -> bool:
    text = _text(record, "text").strip()
    scope = check_scope(_text(record, "scope"))  # ValueError: refused, counted
    category = record.get("category")
    if category is not None and category not in MEMORY_CATEGORIES:
        raise BadRecord("category")
    key = memory_key(text)
    here = conn.execute(
        "SELECT 1 FROM memories WHERE key = ? AND scope IN ('global', ?) LIMIT 1", (key, scope)
    ).fetchone()
    if here is not None:
        return False
    conn.execute(
        "INSERT INTO memories (text, category, created_at, key, tokens, scope)"
        " VALUES (?, ?, ?, ?, NULL, ?)",
        (text, category, _text(record, "created_at"), key, scope),
    )
    return True


def _session(conn: sqlite3.Connection, record: dict[str, Any]) -> int | None:
    """The messages added with a new session; None when it is here already."""
    channel, user = _text(record, "channel"), _text(record, "user_id", empty=True)
    created = _text(record, "created_at")
    if _here(conn, record, channel, user, created):
        return None
    external = record.get("external_id")
    if not _own(external) or _taken(conn, record):
        external = None
    mode = mode_of(record.get("mode"))
    meta = record.get("meta") if isinstance(record.get("meta"), dict) else {}
    title = record.get("title") if isinstance(record.get("title"), str) else None
    cur = conn.execute(
        "INSERT INTO sessions (channel, user_id, external_id, title, meta, created_at,"
        " updated_at, mode, branch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            channel,
            user,
            external,
            title,
            json.dumps(meta, ensure_ascii=False),
            created,
            _text(record, "updated_at"),
            mode,
            int(record.get("branch") or 0),
        ),
    )
    session_id = int(cur.lastrowid or 0)
    if external is None:
        conn.execute(
            "UPDATE sessions SET external_id = ? WHERE id = ?",
            (f"session-{session_id}", session_id),
        )
    ids = _messages(conn, session_id, record["messages"])
    for branch in record.get("branches") or []:
        conn.execute(
            "INSERT INTO branches (session_id, branch, fork, how, at) VALUES (?, ?, ?, ?, ?)",
            (
                session_id,
                int(branch["branch"]),
                ids.get(branch["fork"], 0),
                _text(branch, "how"),
                _text(branch, "at"),
            ),
        )
    return len(ids)


def _here(
    conn: sqlite3.Connection, record: dict[str, Any], channel: str, user: str, created: str
) -> bool:
    """Whether a session of the same channel and user that began in the same second is
    this one: by the channel's own ids when both have one (a cron job's session is its
    job's), else by the same first message (two chats begun in one second differ there)."""
    external = record.get("external_id")
    first = _first(record["messages"])
    for session_id, has in conn.execute(
        "SELECT id, external_id FROM sessions WHERE channel = ? AND user_id = ? AND created_at = ?",
        (channel, user, created),
    ).fetchall():
        if _own(has) and _own(external):
            if has == external:
                return True
            continue
        row = conn.execute(
            "SELECT created_at, content FROM messages WHERE session_id = ? ORDER BY id LIMIT 1",
            (session_id,),
        ).fetchone()
        if (None if row is None else (row[0], json.loads(row[1]))) == first:
            return True
    return False


def _own(external: Any) -> bool:
    """A channel's own id for a session, not the database's row number."""
    return isinstance(external, str) and not _OWN_NUMBER.match(external)


def _first(messages: Any) -> tuple[str, Any] | None:
    """A record's first message as stored: its time and its content."""
    if not isinstance(messages, list) or not messages:
        return None
    message = messages[0]
    return _text(message, "created_at"), content_to_json(content_from_json(message["content"]))


def _taken(conn: sqlite3.Connection, record: dict[str, Any]) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sessions WHERE channel = ? AND user_id = ? AND external_id = ?",
            (record["channel"], record["user_id"], record["external_id"]),
        ).fetchone()
        is not None
    )


def _messages(conn: sqlite3.Connection, session_id: int, messages: Any) -> dict[int, int]:
    """Each message inserted in order; the exported id → the new id."""
    if not isinstance(messages, list):
        raise BadRecord("messages")
    ids: dict[int, int] = {}
    for message in messages:
        role = message["role"]
        if role not in ("user", "assistant"):
            raise BadRecord("role")
        content = content_to_json(content_from_json(message["content"]))  # as Kernel reads it
        cur = conn.execute(
            "INSERT INTO messages (session_id, role, content, starts_round, failed, cut,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                role,
                json.dumps(content, ensure_ascii=False),
                int(bool(message.get("starts_round"))),
                int(bool(message.get("failed"))),
                int(message.get("cut") or 0),
                _text(message, "created_at"),
            ),
        )
        ids[int(message.get("id") or 0)] = int(cur.lastrowid or 0)
    return ids


def _job(conn: sqlite3.Connection, record: dict[str, Any]) -> bool:
    job_id = _text(record, "id")
    if conn.execute("SELECT 1 FROM cron_jobs WHERE id = ?", (job_id,)).fetchone() is not None:
        return False
    spec = record.get("spec")
    if not isinstance(spec, dict):
        raise BadRecord("spec")
    conn.execute(
        "INSERT INTO cron_jobs (id, name, enabled, paused, spec, created_by, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            job_id,
            _text(record, "name"),
            int(bool(record.get("enabled", True))),
            int(bool(record.get("paused"))),
            json.dumps(spec, ensure_ascii=False),
            _text(record, "created_by"),
            _text(record, "created_at"),
            _text(record, "updated_at"),
        ),
    )
    return True
