"""``kernel export`` (issue 40): the owner's data in open formats, read from kernel.db on a
read-only connection in one read transaction (one snapshot; Kernel's writes go on).

- ``memories.jsonl``, ``sessions.jsonl``, ``cron_jobs.jsonl``: Kernel's own JSON Lines,
  what ``kernel import`` reads back (:mod:`kernel.backup.importer`). The first line of
  each names the format (``{"type": "kernel_export", "version": 1, …}``); every other
  line is one record named by its ``type``: a ``memory``, a ``session`` with its
  messages and branches, a ``cron_job``.
- ``memories.md`` and ``sessions/<id>.md``: the same memories and sessions to read.
- ``usage.csv`` (the usage ledger, one row per model call) and ``cron_jobs.csv``.

The console's download is the same folder as one zip (:func:`export_zip`).
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import zipfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, TextIO

from kernel import __version__
from kernel.core.clock import shown
from kernel.core.i18n import t
from kernel.store.audit import read_only
from kernel.store.migrations import MIGRATIONS, get_version

FORMAT = "kernel_export"
VERSION = 1
MEMORIES, SESSIONS, JOBS = "memories.jsonl", "sessions.jsonl", "cron_jobs.jsonl"
SESSION_FOLDER = "sessions"
ZIP_NAME = "kernel-export.zip"

_MEMORY_COLUMNS = ("text", "category", "scope", "created_at")
_SESSION_COLUMNS = (
    "id, channel, user_id, external_id, title, meta, mode, branch, created_at, updated_at"
)
_MESSAGE_COLUMNS = "id, role, content, starts_round, failed, cut, created_at"
_JOB_COLUMNS = ("id", "name", "enabled", "paused", "spec", "created_by", "created_at", "updated_at")


class ExportError(Exception):
    """The export cannot be made: the words say why and the fix."""


@dataclass(slots=True)
class ExportCounts:
    memories: int = 0
    sessions: int = 0
    messages: int = 0
    jobs: int = 0
    usage: int = 0

    def as_json(self) -> dict[str, int]:
        return asdict(self)


def header(schema: int, now: datetime) -> dict[str, Any]:
    """The first line of every JSON Lines file of an export."""
    return {
        "type": FORMAT,
        "version": VERSION,
        "schema": schema,
        "kernel": __version__,
        "exported_at": now.isoformat(),
    }


def export_folder(db: Path, out: Path, tz: tzinfo, now: datetime) -> ExportCounts:
    """Write the export into ``out``, a new folder or an empty one (0700: it holds the
    owner's conversations). Blocking: call it in a thread. Raises ExportError."""
    if not db.is_file():
        raise ExportError(t("client.audit_no_db", path=db))
    try:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)
        if any(out.iterdir()):
            raise ExportError(t("export.not_empty", path=out))
        (out / SESSION_FOLDER).mkdir(mode=0o700)
    except OSError as exc:
        raise ExportError(t("export.unwritable", path=out, detail=exc.strerror or exc)) from None
    wal = db.with_name(db.name + "-wal")
    try:
        return read_only(
            db, lambda conn: _write_all(conn, out, tz, now), immutable=not wal.exists()
        )
    except sqlite3.Error as exc:
        detail = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
        raise ExportError(t("client.audit_unreadable", path=db, detail=detail)) from None
    except OSError as exc:
        raise ExportError(t("export.unwritable", path=out, detail=exc.strerror or exc)) from None


def export_zip(db: Path, work: Path, tz: tzinfo, now: datetime) -> tuple[Path, ExportCounts]:
    """The export as one zip in ``work`` (a private folder the caller removes after);
    blocking."""
    folder = work / "export"
    counts = export_folder(db, folder, tz, now)
    target = work / ZIP_NAME
    try:
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(folder).as_posix())
    except OSError as exc:
        raise ExportError(t("export.unwritable", path=work, detail=exc.strerror or exc)) from None
    return target, counts


def _write_all(conn: sqlite3.Connection, out: Path, tz: tzinfo, now: datetime) -> ExportCounts:
    schema = get_version(conn)
    if schema != len(MIGRATIONS):
        raise ExportError(t("export.schema", version=schema, known=len(MIGRATIONS)))
    counts = ExportCounts()
    first = header(schema, now)
    counts.memories = _memories(conn, out, first, tz)
    counts.sessions, counts.messages = _sessions(conn, out, first, tz)
    counts.jobs = _jobs(conn, out, first)
    counts.usage = _usage(conn, out)
    return counts


def _open(path: Path) -> TextIO:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return open(fd, "w", encoding="utf-8", newline="")  # noqa: SIM115 - the caller closes it


def _line(out: TextIO, record: dict[str, Any]) -> None:
    out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


def _memories(conn: sqlite3.Connection, out: Path, first: dict[str, Any], tz: tzinfo) -> int:
    count = 0
    rows = conn.execute(f"SELECT {', '.join(_MEMORY_COLUMNS)} FROM memories ORDER BY scope, id")
    with _open(out / MEMORIES) as lines, _open(out / "memories.md") as md:
        _line(lines, first)
        md.write(f"# {t('export.memories_title')}\n")
        scope = None
        for text, category, row_scope, created_at in rows:
            record = dict(
                zip(_MEMORY_COLUMNS, (text, category, row_scope, created_at), strict=True)
            )
            _line(lines, {"type": "memory", **record})
            if row_scope != scope:
                scope = row_scope
                md.write(f"\n## {scope}\n\n")
            about = " · ".join(p for p in (category, shown(created_at, tz)) if p)
            md.write(f"- {_indented(text)} _({about})_\n")
            count += 1
    return count


def _indented(text: str) -> str:
    return "\n  ".join(text.splitlines() or [""])


def _sessions(
    conn: sqlite3.Connection, out: Path, first: dict[str, Any], tz: tzinfo
) -> tuple[int, int]:
    sessions = messages = 0
    with _open(out / SESSIONS) as lines:
        _line(lines, first)
        for record in _session_records(conn):
            _line(lines, record)
            with _open(out / SESSION_FOLDER / f"{record['id']}.md") as md:
                _session_markdown(md, record, tz)
            sessions += 1
            messages += len(record["messages"])
    return sessions, messages


def _session_records(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    names = [c.strip() for c in _SESSION_COLUMNS.split(",")]
    for row in conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY id").fetchall():
        record: dict[str, Any] = {"type": "session", **dict(zip(names, row, strict=True))}
        record["meta"] = _json_or(record["meta"], {})
        record["messages"] = [
            {
                "id": mid,
                "role": role,
                "content": _json_or(content, []),
                "starts_round": bool(starts),
                "failed": bool(failed),
                "cut": cut,
                "created_at": created_at,
            }
            for mid, role, content, starts, failed, cut, created_at in conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY id",
                (record["id"],),
            )
        ]
        record["branches"] = [
            {"branch": branch, "fork": fork, "how": how, "at": at}
            for branch, fork, how, at in conn.execute(
                "SELECT branch, fork, how, at FROM branches WHERE session_id = ? ORDER BY branch",
                (record["id"],),
            )
        ]
        yield record


def _json_or(raw: Any, default: Any) -> Any:
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return default


def _session_markdown(md: TextIO, record: dict[str, Any], tz: tzinfo) -> None:
    title = record["title"] or t("export.untitled", id=record["id"])
    md.write(f"# {title}\n\n")
    md.write(
        f"{record['channel']} · {record['external_id']} · "
        f"{shown(record['created_at'], tz)} – {shown(record['updated_at'], tz)}\n"
    )
    for message in record["messages"]:
        marks = [message["role"], shown(message["created_at"], tz)]
        if message["failed"]:
            marks.append(t("export.failed"))
        if message["cut"]:
            marks.append(t("export.cut", branch=message["cut"]))
        md.write(f"\n## {' · '.join(marks)}\n\n")
        for block in message["content"] if isinstance(message["content"], list) else []:
            md.write(_block_markdown(block) + "\n")


def _block_markdown(block: Any) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False, indent=2)
        return f"🔧 `{block.get('name', '')}`\n\n{_fenced(arguments, 'json')}"
    if kind == "tool_result":
        return _fenced(str(block.get("content", "")))
    if kind == "image":
        return f"[{t('export.image')}]"
    return ""


def _fenced(text: str, lang: str = "") -> str:
    """A code block whose fence is longer than any run of backticks in ``text``."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _jobs(conn: sqlite3.Connection, out: Path, first: dict[str, Any]) -> int:
    rows = conn.execute(
        f"SELECT {', '.join(_JOB_COLUMNS)} FROM cron_jobs ORDER BY created_at, id"
    ).fetchall()
    with _open(out / JOBS) as lines, _open(out / "cron_jobs.csv") as table:
        _line(lines, first)
        writer = csv.writer(table)
        writer.writerow(_JOB_COLUMNS)
        for row in rows:
            record = dict(zip(_JOB_COLUMNS, row, strict=True))
            writer.writerow(row)
            record["spec"] = _json_or(record["spec"], {})
            record["enabled"], record["paused"] = bool(record["enabled"]), bool(record["paused"])
            _line(lines, {"type": "cron_job", **record})
    return len(rows)


def _usage(conn: sqlite3.Connection, out: Path) -> int:
    cursor = conn.execute("SELECT * FROM usage ORDER BY id")
    count = 0
    with _open(out / "usage.csv") as table:
        writer = csv.writer(table)
        writer.writerow([c[0] for c in cursor.description])
        for row in cursor:
            writer.writerow(row)
            count += 1
    return count
