"""``restore_backup``: an archive back in place, changing nothing until it has passed.

1. The header: a Kernel backup, a format and schema this Kernel knows.
2. The whole archive read once (reader.py): every part into a staging folder in the
   data directory, each size and SHA-256 against the manifest, the body's against the
   header. Any failure removes the staging folder; nothing else was touched.
3. The staged database opened: SQLite's integrity check, then migrated forward when it
   is older than this Kernel (kernel/store/migrations.py), then its audit trail verified
   against the anchor restored with it and this machine's audit key (the words of
   ``kernel audit verify``, reported, not a refusal: a trail is proof, not data).
4. Kernel must not be running (the database is taken with an exclusive lock for a
   moment). The current files are moved aside into data/backups/before-restore-…,
   the staged ones moved into place; a failure in between moves everything back.

Blocking throughout.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kernel.audit.anchor import ANCHOR_FILE, load_anchor
from kernel.audit.key import BadKey, key_path, read_key
from kernel.audit.verify import verify_chain
from kernel.audit.words import verdict_words
from kernel.backup import crypto
from kernel.backup.format import CONFIG, DATA, DATABASE, BackupError, Manifest
from kernel.backup.parts import DATA_FILES, destination
from kernel.backup.reader import read_backup, read_header
from kernel.config import Config
from kernel.core.i18n import t
from kernel.store.audit import read_chain
from kernel.store.migrations import MIGRATIONS, migrate
from kernel.store.trouble import DB_SUFFIXES

STAGING_PREFIX = ".restore-"
ASIDE_PREFIX = "before-restore-"


@dataclass(frozen=True, slots=True)
class Restored:
    path: Path  # the archive
    manifest: Manifest
    schema: int  # the database's schema now (migrated forward from manifest.schema)
    files: int  # parts besides the database put back
    aside: Path  # where the data before was moved
    audit: str  # the audit trail's verdict, in words

    def describe(self) -> str:
        """The one line the owner reads."""
        counts = self.manifest.counts
        migrated = (
            t("backup.restored_migrated", old=self.manifest.schema)
            if self.schema != self.manifest.schema
            else ""
        )
        db = t(
            "backup.restored_db",
            schema=self.schema,
            migrated=migrated,
            messages=counts.get("messages", 0),
            memories=counts.get("memories", 0),
        )
        files = t("backup.restored_files", count=self.files)
        return t(
            "backup.restored",
            path=self.path,
            db=db,
            files=files,
            audit=self.audit,
            aside=self.aside,
        )


def restore_backup(
    config: Config,
    archive: Path,
    protection: crypto.Protection | None = None,
    *,
    now: datetime | None = None,
) -> Restored:
    """Verify ``archive`` whole, check its database, then put it in place of the current
    data (kept aside). BackupError, with nothing changed, when any step refuses."""
    now = now or datetime.now(UTC)
    known = len(MIGRATIONS)
    header = read_header(archive)
    if int(header.get("schema", 0)) > known:
        raise BackupError("backup.newer_schema", path=archive, schema=header["schema"], known=known)
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    config.data_dir.mkdir(parents=True, exist_ok=True)
    staging = config.data_dir / f"{STAGING_PREFIX}{stamp}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    try:
        _, manifest = read_backup(archive, protection, staging)
        if manifest.schema > known:
            raise BackupError(
                "backup.newer_schema", path=archive, schema=manifest.schema, known=known
            )
        schema, audit = _check_database(config, staging)
        if _in_use(config.db_path):
            raise BackupError("backup.restore_running", path=config.db_path)
        aside = config.backups_dir / f"{ASIDE_PREFIX}{stamp}"
        files = _swap(config, staging, manifest, aside)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Restored(archive, manifest, schema, files, aside, audit)


def _check_database(config: Config, staging: Path) -> tuple[int, str]:
    """The staged database's integrity, migrated forward; its schema and the audit
    trail's verdict in words."""
    db = staging / DATABASE
    anchor = load_anchor(staging / DATA / ANCHOR_FILE)
    key_file = staging / CONFIG / "audit.key"
    try:
        key = read_key(key_file if key_file.is_file() else key_path(config.base_dir))
    except BadKey:
        key = None
    try:
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
            found = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if found != "ok":
                raise BackupError("backup.restore_check_failed", detail=str(found)[:200])
            schema = migrate(conn, MIGRATIONS)
            chain = read_chain(conn, None)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except (sqlite3.Error, Exception) as exc:
        if isinstance(exc, BackupError):
            raise
        detail = getattr(exc, "sqlite_errorname", None) or str(exc)[:200]
        raise BackupError("backup.restore_check_failed", detail=detail) from exc
    return schema, verdict_words(verify_chain(chain, anchor, key=key))


def _in_use(db: Path) -> bool:
    """Whether another connection (a running Kernel) has the database open: an exclusive
    lock is refused at once. False when there is no database yet."""
    if not db.exists():
        return False
    conn = sqlite3.connect(db, isolation_level=None, timeout=0)
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("COMMIT")
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()
    return False


def _swap(config: Config, staging: Path, manifest: Manifest, aside: Path) -> int:
    """Move the current files aside and the staged ones into place; undo every move
    when one fails. Returns how many parts besides the database were put back."""
    moves: list[tuple[Path, Path]] = []
    places: list[tuple[Path, Path]] = [(staging / DATABASE, config.db_path)]
    for part in manifest.parts:
        target = destination(config, part.name)
        if target is not None:
            places.append((staging / part.name, target))
    try:
        aside.mkdir(parents=True, mode=0o700)
        db = config.db_path
        for suffix in DB_SUFFIXES:
            _move(db.with_name(db.name + suffix), aside / "data" / (db.name + suffix), moves)
        belong = [config.data_dir / name for name in DATA_FILES]
        for target in {*belong, *(target for _, target in places[1:])}:
            _move(target, aside / _relative(config, target), moves)
        for staged, target in places:
            _move(staged, target, moves)
    except OSError as exc:
        for source, target in reversed(moves):
            with contextlib.suppress(OSError):
                shutil.move(target, source)
        raise BackupError("backup.restore_check_failed", detail=exc.strerror or "") from exc
    return len(places) - 1


def _relative(config: Config, target: Path) -> Path:
    for name, root in (("data", config.data_dir), ("config", config.base_dir)):
        with contextlib.suppress(ValueError):
            return Path(name) / target.relative_to(root)
    return Path("other") / target.name


def _move(source: Path, target: Path, moves: list[tuple[Path, Path]]) -> None:
    if not source.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(source, target)  # a rename, or a copy across file systems
    moves.append((source, target))
