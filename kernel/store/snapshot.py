"""A copy of the database taken with SQLite's online backup API (never a file copy of a
live database): page by page, into a new file, from one read snapshot, so that it is
consistent while Kernel keeps writing (WAL: readers never block the writer) and never
holds the database in memory (a step copies ``STEP_PAGES`` pages through SQLite's page
cache into the file).

Used by ``kernel backup`` (kernel/backup/) and by the store itself before a schema
upgrade (:func:`pre_upgrade_name`, kernel/store/db.py), which rolls a failed upgrade
back from it (:func:`copy_back`).
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from pathlib import Path

STEP_PAGES = 1024  # 4 MiB of 4 KiB pages per step of the online backup
PRE_UPGRADE = "pre-upgrade"  # the automatic snapshots' names start so
SUFFIX = ".db"


def copy_into(source: sqlite3.Connection, target: Path) -> None:
    """Copy the database ``source`` has open into the new file ``target`` (it must not
    exist), synced. ``source`` is held in one read transaction for the whole copy: the
    steps all read the same snapshot, and a writer on another connection neither waits
    nor restarts the copy. A failure (a full disk) removes the partial file and raises
    (OSError or sqlite3.Error); the database itself is only read. Blocking."""
    if target.exists():
        raise FileExistsError(f"the snapshot file already exists: {target.name}")
    began = not source.in_transaction
    if began:
        source.execute("BEGIN")
    # The read snapshot starts at the first read (a BEGIN alone reads nothing): without
    # it each step would read anew, and a write between steps would restart the copy.
    source.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    try:
        dest = sqlite3.connect(target, isolation_level=None)
        try:
            # Each step commits into the copy: no journal and no sync per step (a copy
            # that fails half-way is removed, and the whole file is synced at the end).
            dest.execute("PRAGMA journal_mode = OFF")
            dest.execute("PRAGMA synchronous = OFF")
            source.backup(dest, pages=STEP_PAGES)
        finally:
            dest.close()
        _sync(target)
    except BaseException:
        for suffix in ("", "-journal", "-wal", "-shm"):
            target.with_name(target.name + suffix).unlink(missing_ok=True)
        raise
    finally:
        if began and source.in_transaction:
            source.execute("ROLLBACK")


def copy_back(snapshot: Path, conn: sqlite3.Connection) -> None:
    """Put the database ``conn`` has open back to ``snapshot`` (every page replaced,
    through the same online backup API): a failed upgrade's way back. Blocking."""
    source = sqlite3.connect(f"{snapshot.resolve().as_uri()}?mode=ro", uri=True)
    try:
        source.backup(conn, pages=STEP_PAGES)
    finally:
        source.close()


def pre_upgrade_name(old: int, new: int, now: datetime) -> str:
    """``pre-upgrade-v19-to-v21-20261205T211500Z.db``."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    return f"{PRE_UPGRADE}-v{old}-to-v{new}-{stamp}{SUFFIX}"


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
