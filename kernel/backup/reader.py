"""Reading an archive (format.py): the header alone (``kernel backup --list``), or the
whole archive in one pass, every part's size and SHA-256 checked against the manifest
and the body's against the header, each part optionally written into a staging folder
as it is read (a restore, which changes nothing until this has passed).

Every refusal is a :class:`BackupError` whose text names the archive, the problem and
the fix. Blocking.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from kernel.backup import crypto
from kernel.backup.format import (
    BLOCK,
    HEADER_BYTES,
    MANIFEST,
    SUFFIX,
    VERSION,
    BackupError,
    HashingReader,
    Manifest,
    parse_header,
)
from kernel.store.snapshot import PRE_UPGRADE
from kernel.store.snapshot import SUFFIX as SNAPSHOT_SUFFIX

MAX_MANIFEST = 16 << 20


@dataclass(frozen=True, slots=True)
class Listed:
    """One file in the backups folder, newest first in :func:`list_backups`."""

    path: Path
    size: int
    modified: datetime
    kind: str  # "archive" or "snapshot" (before an upgrade)
    header: dict[str, Any] | None  # an archive's header; None: a snapshot or unreadable


def read_header(path: Path) -> dict[str, Any]:
    """The archive's header; BackupError when it is none of Kernel's, or newer."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(HEADER_BYTES)
    except OSError as exc:
        raise BackupError("backup.unreadable", path=path, detail=exc.strerror or "") from None
    fields = parse_header(raw)
    if fields is None:
        raise BackupError("backup.not_archive", path=path)
    if not isinstance(fields.get("version"), int) or fields["version"] > VERSION:
        raise BackupError("backup.newer_format", path=path, version=fields.get("version"))
    return fields


def read_backup(
    path: Path, protection: crypto.Protection | None = None, staging: Path | None = None
) -> tuple[dict[str, Any], Manifest]:
    """Read and check the whole archive; with ``staging`` (an empty folder), each part
    is written there under its name as it is read. Returns the header and manifest.
    BackupError (the staged files are then the caller's to remove): damaged, cut short,
    a part missing, changed or added, encrypted without the right key."""
    fields = read_header(path)
    key = _key(path, fields, protection)
    try:
        with open(path, "rb") as fh:
            fh.seek(HEADER_BYTES)
            hashed = HashingReader(fh)
            body: Any = hashed if key is None else crypto.OpeningReader(hashed, key)
            seen, manifest = _members(body, staging)
            while body.read(BLOCK):  # the tar's padding: part of what the hash covers
                pass
            hashed.drain()
    except crypto.Damaged as exc:
        raise BackupError("backup.damaged", path=path, detail=f"encrypted data: {exc}") from None
    except (tarfile.TarError, EOFError, ValueError, KeyError, TypeError) as exc:
        raise BackupError("backup.damaged", path=path, detail=type(exc).__name__) from None
    except OSError as exc:
        raise BackupError("backup.damaged", path=path, detail=exc.strerror or "") from None
    if hashed.hash.hexdigest() != fields.get("body_sha256"):
        raise BackupError("backup.damaged", path=path, detail="SHA-256 of the archive")
    _compare(path, manifest, seen)
    return fields, manifest


def _key(path: Path, fields: dict[str, Any], protection: crypto.Protection | None) -> bytes | None:
    encryption = fields.get("encryption")
    if encryption is None:
        return None
    if protection is None:
        raise BackupError("backup.needs_key", path=path)
    try:
        return crypto.key_for(protection, dict(encryption))
    except (crypto.WrongKey, ValueError, KeyError) as exc:
        raise BackupError("backup.wrong_key", path=path) from exc


def _members(body: Any, staging: Path | None) -> tuple[dict[str, tuple[int, str]], Manifest]:
    seen: dict[str, tuple[int, str]] = {}
    manifest: Manifest | None = None
    with tarfile.open(fileobj=body, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or not _safe(member.name) or member.name in seen:
                raise ValueError("unexpected member")
            source = tar.extractfile(member)
            if source is None:
                raise ValueError("unreadable member")
            if member.name == MANIFEST:
                raw = source.read(MAX_MANIFEST + 1)
                if len(raw) > MAX_MANIFEST:
                    raise ValueError("manifest too large")
                manifest = Manifest.from_json(json.loads(raw))
                continue
            if manifest is not None:
                raise ValueError("a part after the manifest")
            seen[member.name] = _copy(source, None if staging is None else staging / member.name)
    if manifest is None:
        raise ValueError("no manifest")
    return seen, manifest


def _copy(source: Any, target: Path | None) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    out = None
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        out = open(target, "xb")  # noqa: SIM115  # closed below
    try:
        while block := source.read(BLOCK):
            digest.update(block)
            size += len(block)
            if out is not None:
                out.write(block)
    finally:
        if out is not None:
            out.close()
    return size, digest.hexdigest()


def _safe(name: str) -> bool:
    pure = PurePosixPath(name)
    return not pure.is_absolute() and ".." not in pure.parts and "\\" not in name


def _compare(path: Path, manifest: Manifest, seen: dict[str, tuple[int, str]]) -> None:
    listed = {p.name: (p.size, p.sha256) for p in manifest.parts}
    for name, want in listed.items():
        got = seen.get(name)
        if got is None:
            raise BackupError("backup.damaged", path=path, detail=f"{name} missing")
        if got != want:
            raise BackupError("backup.damaged", path=path, detail=f"{name}: SHA-256")
    extra = sorted(set(seen) - set(listed))
    if extra:
        raise BackupError("backup.damaged", path=path, detail=f"{extra[0]} not in the manifest")


def list_backups(folder: Path) -> list[Listed]:
    """The archives and pre-upgrade snapshots in ``folder``, newest first."""
    found: list[Listed] = []
    if not folder.is_dir():
        return found
    for path in folder.iterdir():
        if path.name.startswith(".") or not path.is_file():
            continue
        if path.suffix == SUFFIX:
            kind = "archive"
        elif path.name.startswith(PRE_UPGRADE) and path.suffix == SNAPSHOT_SUFFIX:
            kind = "snapshot"
        else:
            continue
        stat = path.stat()
        header = None
        if kind == "archive":
            try:
                header = read_header(path)
            except BackupError:
                header = None
        modified = datetime.fromtimestamp(stat.st_mtime, UTC)
        found.append(Listed(path, stat.st_size, modified, kind, header))
    found.sort(key=lambda item: (item.modified, item.path.name), reverse=True)
    return found
