"""``create_backup``: one archive of the owner's data (format.py), taken while Kernel
runs: the database through SQLite's online backup API (kernel/store/snapshot.py) into a
temporary file beside the archive, then streamed with the other parts into the tar; the
archive is written under a temporary name and renamed into place once whole and synced,
so a failure (a full disk) leaves no archive, and the owner's data is only ever read.

Blocking throughout: run it in a thread from async code.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sqlite3
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from kernel import __version__
from kernel.audit.anchor import ANCHOR_FILE
from kernel.backup import crypto
from kernel.backup.format import (
    BLOCK,
    DATABASE,
    FORMAT,
    HEADER_BYTES,
    MANIFEST,
    SUFFIX,
    VERSION,
    BackupError,
    HashingWriter,
    Manifest,
    Part,
    header_bytes,
)
from kernel.backup.parts import sources, workspace_index
from kernel.config import Config
from kernel.core.fileio import os_cause
from kernel.core.platform import replace
from kernel.store.audit import read_only
from kernel.store.migrations import get_version
from kernel.store.snapshot import copy_into
from kernel.store.trouble import diagnose


@dataclass(frozen=True, slots=True)
class Backup:
    """A finished archive: where it is, its size in bytes, and its manifest."""

    path: Path
    size: int
    manifest: Manifest


def archive_name(label: str, now: datetime) -> str:
    """``kernel-20261205T211500Z-manual.kbackup``."""
    return f"kernel-{now.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}-{label}{SUFFIX}"


def create_backup(
    config: Config,
    out: Path | None = None,
    *,
    protection: crypto.Protection | None = None,
    with_secrets: bool = False,
    label: str = "manual",
    now: datetime | None = None,
) -> Backup:
    """Write one archive of ``config``'s data and return it.

    ``out``: the archive's path, or a folder to put it in under :func:`archive_name`
    (None: ``config.backups_dir``); an existing file is never overwritten. ``protection``:
    encrypt with a passphrase or key file (crypto.py). ``with_secrets``: also config.toml,
    kernel.env and the audit and sidecar keys (parts.py). ``label``: a word saying why it
    was taken (``manual``, ``daily`` …), in its name and manifest. ``now``: the time it
    is stamped with (an aware datetime; the system clock when None).

    Raises :class:`BackupError` (its text one line for the owner: no database, a full
    disk …), having removed every file it made. Blocking."""
    now = now or datetime.now(UTC)
    target = _target(config, out, label, now)
    partial = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        manifest = _write(config, partial, protection, with_secrets, label, now)
        if target.exists():
            raise BackupError("backup.exists", path=target)
        replace(partial, target)
    except FileExistsError as exc:
        if exc.filename is not None and Path(exc.filename) == partial:  # another one's
            raise BackupError("backup.exists", path=target) from None
        partial.unlink(missing_ok=True)
        raise BackupError("backup.failed", path=target, detail=os_cause(exc)) from exc
    except BackupError:
        partial.unlink(missing_ok=True)
        raise
    except (OSError, sqlite3.Error, tarfile.TarError) as exc:
        partial.unlink(missing_ok=True)
        detail = diagnose(exc, target.parent).cause  # "no space left on device"
        raise BackupError("backup.failed", path=target, detail=detail) from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return Backup(target, target.stat().st_size, manifest)


def _target(config: Config, out: Path | None, label: str, now: datetime) -> Path:
    if out is None:
        return config.backups_dir / archive_name(label, now)
    if out.is_dir():
        return out / archive_name(label, now)
    if out.exists():
        raise BackupError("backup.exists", path=out)
    return out


def _write(
    config: Config,
    partial: Path,
    protection: crypto.Protection | None,
    with_secrets: bool,
    label: str,
    now: datetime,
) -> Manifest:
    created = now.astimezone(UTC).isoformat(timespec="seconds")
    manifest = Manifest(__version__, 0, created, label, with_secrets)
    encryption: dict[str, Any] | None = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    with os.fdopen(os.open(partial, flags, 0o600), "wb") as fh:
        fh.write(b" " * HEADER_BYTES)  # the header, written last (it holds the body's hash)
        hashed = HashingWriter(fh)
        body: Any = hashed
        if protection is not None:
            encryption, key = crypto.new_header(protection)
            body = crypto.SealingWriter(hashed, key)
        with tarfile.open(fileobj=body, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            _add_parts(config, tar, manifest, partial.parent, with_secrets)
            data = _manifest_bytes(manifest)
            tar.addfile(_info(MANIFEST, len(data), now), io.BytesIO(data))
        body.close()
        fields = {
            "format": FORMAT,
            "version": VERSION,
            "kernel": manifest.kernel,
            "schema": manifest.schema,
            "created_at": created,
            "label": label,
            "with_secrets": with_secrets,
            "encryption": encryption,
            "body_sha256": hashed.hash.hexdigest(),
        }
        fh.seek(0)
        fh.write(header_bytes(fields))
        fh.flush()
        os.fsync(fh.fileno())
    return manifest


def _add_parts(
    config: Config, tar: tarfile.TarFile, manifest: Manifest, scratch: Path, with_secrets: bool
) -> None:
    # The anchor (the audit chain's end) is read before the database is copied: it may
    # lag behind the copy (as it may lag behind the database), never be ahead of it.
    found = sources(config, with_secrets)
    anchor = {s.name: s.path.read_bytes() for s in found if s.path.name == ANCHOR_FILE}
    _add_database(config, tar, manifest, scratch)
    for source in found:
        data = anchor.get(source.name)
        if data is None:
            try:
                data = source.path.read_bytes()
            except FileNotFoundError:
                continue  # deleted since it was listed
        _add_bytes(tar, manifest, source.name, data, source.secret)
    name, data = workspace_index(config)
    _add_bytes(tar, manifest, name, data, False)


def _add_database(config: Config, tar: tarfile.TarFile, manifest: Manifest, scratch: Path) -> None:
    db = config.db_path
    if not db.is_file():
        raise BackupError("backup.no_database", path=db)
    fd, name = tempfile.mkstemp(prefix=".kernel-backup-", suffix=".db", dir=scratch)
    os.close(fd)
    copy = Path(name)
    copy.unlink()
    try:
        read_only(db, lambda conn: copy_into(conn, copy), immutable=_stopped(db))
        manifest.schema, manifest.counts = _describe(copy)
        with open(copy, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            digest = hashlib.sha256()
            tar.addfile(_info(DATABASE, size, None), _Hashing(fh, digest.update))
        manifest.parts.append(Part(DATABASE, size, digest.hexdigest()))
    finally:
        copy.unlink(missing_ok=True)


def _stopped(db: Path) -> bool:
    """No write-ahead log beside it: no Kernel has it open (read as it is, no -shm made)."""
    return not db.with_name(db.name + "-wal").exists()


def _describe(copy: Path) -> tuple[int, dict[str, int]]:
    """The copy's schema version and how many messages and memories it holds."""
    with contextlib.closing(sqlite3.connect(copy)) as conn:
        version = get_version(conn)
        counts = {}
        for table in ("messages", "memories", "sessions"):
            with contextlib.suppress(sqlite3.Error):  # an early schema lacks a table
                counts[table] = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    return version, counts


def _add_bytes(
    tar: tarfile.TarFile, manifest: Manifest, name: str, data: bytes, secret: bool
) -> None:
    tar.addfile(_info(name, len(data), None), io.BytesIO(data))
    manifest.parts.append(Part(name, len(data), hashlib.sha256(data).hexdigest(), secret))


def _manifest_bytes(manifest: Manifest) -> bytes:
    return json.dumps(manifest.as_json(), ensure_ascii=False, indent=1).encode("utf-8")


def _info(name: str, size: int, now: datetime | None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o600
    info.mtime = int((now or datetime.now(UTC)).timestamp())
    return info


class _Hashing(io.RawIOBase):
    """A file read through, each block handed to ``update`` (the part's hash)."""

    def __init__(self, fh: BinaryIO, update: Callable[[bytes], None]) -> None:
        self._fh = fh
        self._update = update

    def read(self, size: int = -1) -> bytes:
        data = self._fh.read(BLOCK if size < 0 else size)
        self._update(data)
        return data
