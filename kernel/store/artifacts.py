"""The ``artifacts`` table (migration 16, issue 23): the files a turn made or received.

Three kinds, each in its own folder of the data directory: ``cli_output`` (a delegated
CLI's output, ``cli_outputs/``), ``tool_output`` (a long tool result kept on disk,
``tool_outputs/``) and ``download`` (a file the owner sent, ``downloads/``). A row holds
the file's path relative to the data directory, its size and SHA-256 when it was made,
and ``removed_at`` once retention deleted it (or it was found gone).

Every row is written with its ``artifact.saved`` audit event in the same transaction
(facts only: the artifact's id, kind, size and hash; never its name), so the audit never
misses an artifact and never names one that was not stored.

Public API: :class:`ArtifactStore`, :class:`Artifact`, :data:`KINDS`, :data:`FOLDERS`,
:func:`file_facts`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from kernel.store.audit import append_in
from kernel.store.database import Database, last_id

log = logging.getLogger(__name__)

# kind → the data directory's folder it lives in (retention sweeps the same folders)
FOLDERS = {"cli_output": "cli_outputs", "tool_output": "tool_outputs", "download": "downloads"}
KINDS = tuple(FOLDERS)
MAX_LIMIT = 100  # rows one listing returns at most
SAVED = "artifact.saved"  # kernel/audit/kinds.py ARTIFACT_SAVED
MAX_NAME = 255
_CHUNK = 1024 * 1024

_COLUMNS = "id, session_id, kind, name, path, size, sha256, created_at, removed_at"


@dataclass(frozen=True, slots=True)
class Artifact:
    id: int
    session_id: int | None
    kind: str  # a key of FOLDERS
    name: str  # what the owner sees (a download's own name; Kernel's file name otherwise)
    path: str  # relative to the data directory, "/"-separated: "downloads/…"
    size: int
    sha256: str | None
    created_at: str  # ISO 8601, UTC
    removed_at: str | None = None

    @property
    def removed(self) -> bool:
        return self.removed_at is not None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "kind": self.kind,
            "name": self.name,
            "size": self.size,
            "sha256": self.sha256,
            "created_at": self.created_at,
            "removed": self.removed,
            "removed_at": self.removed_at,
        }


def _artifact(row: tuple[Any, ...]) -> Artifact:
    return Artifact(
        int(row[0]),
        None if row[1] is None else int(row[1]),
        str(row[2]),
        str(row[3]),
        str(row[4]),
        int(row[5]),
        None if row[6] is None else str(row[6]),
        str(row[7]),
        None if row[8] is None else str(row[8]),
    )


def file_facts(path: Path) -> tuple[int, str]:
    """(size, SHA-256) of the file at ``path``, read once, not following a final link.
    Blocking: call it in a thread."""
    digest = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def relative_path(data_dir: Path, file: Path, kind: str) -> str:
    """``file`` as a path relative to ``data_dir``, which must lie in the kind's folder
    (ValueError otherwise). Compared as text: the data directory's own links are the
    owner's; nothing under it is resolved."""
    base = Path(os.path.abspath(data_dir))
    full = Path(os.path.abspath(file))
    parts = full.relative_to(base).parts  # ValueError when outside
    if len(parts) < 2 or parts[0] != FOLDERS[kind]:
        raise ValueError(f"an artifact of kind {kind} must lie in data/{FOLDERS[kind]}")
    return PurePosixPath(*parts).as_posix()


def _short_name(name: str) -> str:
    name = "".join(ch if ch.isprintable() else "_" for ch in name).strip()
    return name[:MAX_NAME] or "file"


class ArtifactStore:
    """Reads and writes ``artifacts`` through the Store's database thread."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(
        self,
        *,
        session_id: int | None,
        kind: str,
        name: str,
        path: str,
        size: int,
        sha256: str | None,
        actor: str = "kernel",
    ) -> Artifact:
        """Record one artifact and its ``artifact.saved`` audit event, in one transaction."""
        if kind not in FOLDERS:
            raise ValueError(f"unknown artifact kind: {kind}")
        parts = PurePosixPath(path).parts
        if not parts or parts[0] != FOLDERS[kind] or ".." in parts or path.startswith("/"):
            raise ValueError(f"an artifact of kind {kind} must lie in data/{FOLDERS[kind]}")
        if size < 0:
            raise ValueError("size must not be negative")
        at = self.db._now()
        shown = _short_name(name)

        def op(conn: sqlite3.Connection) -> Artifact:
            cur = conn.execute(
                "INSERT INTO artifacts (session_id, kind, name, path, size, sha256, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, kind, shown, path, size, sha256, at),
            )
            row_id = last_id(cur)
            facts: dict[str, Any] = {"artifact": row_id, "kind": kind, "size": size}
            if sha256 is not None:  # as AuditLog.record leaves out what is unknown
                facts["sha256"] = sha256
            append_in(
                conn,
                at,
                SAVED,
                session_id=session_id,
                actor=actor,
                data=facts,
                key=self.db.audit_key,
            )
            return Artifact(row_id, session_id, kind, shown, path, size, sha256, at)

        return await self.db.write("record an artifact", op)

    async def save(
        self,
        data_dir: Path,
        file: Path,
        *,
        session_id: int | None,
        kind: str,
        name: str = "",
        actor: str = "kernel",
    ) -> Artifact | None:
        """Record a file Kernel just wrote under ``data_dir``: its size and hash are read
        off the loop. Never raises: the work that made the file goes on when it cannot
        be recorded (the failure is logged by type); None then."""
        try:
            rel = relative_path(data_dir, file, kind)
            size, digest = await asyncio.to_thread(file_facts, file)
            return await self.add(
                session_id=session_id,
                kind=kind,
                name=name or Path(rel).name,
                path=rel,
                size=size,
                sha256=digest,
                actor=actor,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("an artifact of kind %s was not recorded (%s)", kind, type(exc).__name__)
            return None

    async def save_all(
        self,
        data_dir: Path,
        files: Iterable[Path],
        *,
        session_id: int | None,
        kind: str,
        actor: str = "kernel",
    ) -> list[Artifact]:
        saved = []
        for file in files:
            found = await self.save(data_dir, file, session_id=session_id, kind=kind, actor=actor)
            if found is not None:
                saved.append(found)
        return saved

    async def list(self, session_id: int, limit: int = 50) -> list[Artifact]:
        """The session's artifacts, newest first, at most ``limit`` (≤ :data:`MAX_LIMIT`)."""
        limit = max(1, min(int(limit), MAX_LIMIT))

        def op(conn: sqlite3.Connection) -> list[Artifact]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM artifacts WHERE session_id = ? ORDER BY id DESC LIMIT ?",
                (session_id, limit),
            )
            return [_artifact(r) for r in rows]

        return await self.db.read("list artifacts", op)

    async def get(self, artifact_id: int) -> Artifact | None:
        def op(conn: sqlite3.Connection) -> Artifact | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM artifacts WHERE id = ?", (artifact_id,)
            ).fetchone()
            return None if row is None else _artifact(row)

        return await self.db.read("read an artifact", op)

    async def listed_paths(self) -> tuple[str, ...]:
        """The paths of every artifact not marked removed (what a sweep reconciles)."""

        def op(conn: sqlite3.Connection) -> tuple[str, ...]:
            return tuple(
                str(path)
                for (path,) in conn.execute(
                    "SELECT DISTINCT path FROM artifacts WHERE removed_at IS NULL"
                )
            )

        return await self.db.read("list artifact paths", op)

    async def mark_removed(self, paths: Iterable[str]) -> int:
        """Mark the artifacts at ``paths`` (relative to the data directory) removed, now;
        returns how many rows changed. Rows already marked keep their first time."""
        unique = sorted(set(paths))
        if not unique:
            return 0
        at = self.db._now()

        def op(conn: sqlite3.Connection) -> int:
            changed = 0
            for start in range(0, len(unique), 500):
                part = unique[start : start + 500]
                marks = ", ".join("?" * len(part))
                changed += conn.execute(
                    f"UPDATE artifacts SET removed_at = ? WHERE path IN ({marks})"
                    " AND removed_at IS NULL",
                    (at, *part),
                ).rowcount
            return changed

        return await self.db.write("mark artifacts removed", op)
