"""Why the database cannot be opened or written, in words a person acts on, and whether
waiting can fix it: a full or read-only disk passes once someone frees space or remounts;
a data directory that is a file, or a database file (``kernel.db``, its ``-wal`` or
``-shm``) that refuses writes in a folder that takes them, does not: a person must fix
that path (:func:`unwritable_file`, checked before SQLite opens the database, since
SQLite would open it read-only and fail only at the first write).

SQLite names the symptom, not always the cause: on a full disk an existing database
fails with "disk I/O error" (its shared-memory file cannot grow). So the folder is
probed with a small write, whose OSError names the cause ("no space left on device").
The SQLite code names (``SQLITE_IOERR_SHMSIZE``) never reach the words.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from kernel.core.fileio import os_cause, passes, probe_writable

DB_SUFFIXES = ("", "-wal", "-shm")  # the database file and the two SQLite keeps beside it
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

# SQLite failures a disk's state explains, by code family, with SQLite's own words.
STORAGE_FAMILIES = {
    "SQLITE_FULL": "database or disk is full",
    "SQLITE_READONLY": "attempt to write a readonly database",
    "SQLITE_IOERR": "disk I/O error",
    "SQLITE_CANTOPEN": "unable to open database file",
    "SQLITE_PERM": "access permission denied",
}
OTHER_WORDS = {
    "SQLITE_CORRUPT": "the database file is damaged",
    "SQLITE_NOTADB": "the file is not an SQLite database",
}


@dataclass(frozen=True, slots=True)
class StorageTrouble:
    cause: str  # in words, e.g. "no space left on device"
    passing: bool  # retrying later may succeed with nothing changed on Kernel's side
    full: bool = False  # the disk (or quota) is full: freeing space fixes it
    path: Path | None = None  # the one database file that refuses writes, if that is it


def diagnose(exc: BaseException, folder: Path) -> StorageTrouble:
    """What ``exc`` (raised opening or writing the store in ``folder``) means.
    Blocking: probes the folder with a small write."""
    root = _root_cause(exc)
    if isinstance(root, OSError):
        return _os_trouble(root, folder)
    if not isinstance(root, sqlite3.Error):
        return StorageTrouble(str(exc), False)
    name = getattr(root, "sqlite_errorname", "") or ""
    family = _family(name, STORAGE_FAMILIES)
    if family is None:
        other = _family(name, OTHER_WORDS)
        return StorageTrouble(OTHER_WORDS[other] if other else str(root), False)
    probed = probe_writable(folder) if folder.is_dir() else None
    if probed is not None and passes(probed):
        return _from_os(probed)
    # The folder takes writes: a database that cannot be opened there is a path problem
    # (kernel.db is a folder), not the disk's state.
    full = family == "SQLITE_FULL"
    return StorageTrouble(STORAGE_FAMILIES[family], family != "SQLITE_CANTOPEN", full)


def storage_trouble(exc: BaseException, folder: Path) -> StorageTrouble | None:
    """The disk's state behind a failed store call (full, read-only, failing), or None
    when ``exc`` is not about storage (a lock, a bug). Blocking: see :func:`diagnose`."""
    root = _root_cause(exc)
    if isinstance(root, OSError):
        storage = passes(root)
    elif isinstance(root, sqlite3.Error):
        storage = _family(getattr(root, "sqlite_errorname", "") or "", STORAGE_FAMILIES) is not None
    else:
        storage = False
    return diagnose(exc, folder) if storage else None


def unwritable_file(db_path: Path) -> OSError | None:
    """The first of the database's files (``kernel.db``, its ``-wal`` and ``-shm``)
    that exists but cannot be opened for writing, as the OSError that says why (its
    ``filename`` the file), else None. Blocking; writes nothing."""
    for suffix in DB_SUFFIXES:
        path = db_path.with_name(db_path.name + suffix)
        try:
            fd = os.open(path, os.O_RDWR)  # no O_CREAT: a missing one is SQLite's to make
        except (FileNotFoundError, IsADirectoryError):
            continue  # a folder in its place is SQLite's to refuse (SQLITE_CANTOPEN)
        except OSError as exc:
            exc.filename = str(path)
            return exc
        os.close(fd)
    return None


def _os_trouble(root: OSError, folder: Path) -> StorageTrouble:
    """A file of the database refusing writes (:func:`unwritable_file`) is that file's
    problem when its folder takes writes; else the folder's (a full or read-only disk)."""
    named = Path(root.filename) if isinstance(root.filename, str) else None
    if named is None or named.parent != folder or not folder.is_dir():
        return _from_os(root)
    probed = probe_writable(folder)
    if probed is not None and passes(probed):
        return _from_os(probed)
    return StorageTrouble(os_cause(root), False, path=named)


def _from_os(exc: OSError) -> StorageTrouble:
    return StorageTrouble(os_cause(exc), passes(exc), exc.errno in FULL_ERRNOS)


def _root_cause(exc: BaseException) -> BaseException:
    """The first OSError or sqlite3.Error along the chain of causes, else ``exc``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError | sqlite3.Error):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return exc


def _family(name: str, families: dict[str, str]) -> str | None:
    for family in families:
        if name == family or name.startswith(family + "_"):
            return family
    return None
