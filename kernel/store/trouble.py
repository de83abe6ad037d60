"""Why the database cannot be opened, in words a person acts on, and whether waiting
can fix it: a full or read-only disk passes once someone frees space or remounts; a
data directory that is a file does not.

SQLite names the symptom, not always the cause: on a full disk an existing database
fails with "disk I/O error" (its shared-memory file cannot grow). So the folder is
probed with a small write, whose OSError names the cause ("no space left on device").
The SQLite code names (``SQLITE_IOERR_SHMSIZE``) never reach the words.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from kernel.core.fileio import os_cause, passes, probe_writable

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


def diagnose(exc: BaseException, folder: Path) -> StorageTrouble:
    """What ``exc`` (raised opening the store in ``folder``) means. Blocking: probes
    the folder with a small write."""
    root = _root_cause(exc)
    if isinstance(root, OSError):
        return StorageTrouble(os_cause(root), passes(root))
    if not isinstance(root, sqlite3.Error):
        return StorageTrouble(str(exc), False)
    name = getattr(root, "sqlite_errorname", "") or ""
    family = _family(name, STORAGE_FAMILIES)
    if family is None:
        other = _family(name, OTHER_WORDS)
        return StorageTrouble(OTHER_WORDS[other] if other else str(root), False)
    probed = probe_writable(folder) if folder.is_dir() else None
    if probed is not None and passes(probed):
        return StorageTrouble(os_cause(probed), True)
    # The folder takes writes: a database that cannot be opened there is a path problem
    # (kernel.db is a folder), not the disk's state.
    return StorageTrouble(STORAGE_FAMILIES[family], family != "SQLITE_CANTOPEN")


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
