"""Small file helpers shared by the parts of Kernel that own files."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from kernel.core import platform

# Storage trouble that can pass without Kernel changing anything: a full disk or quota,
# a file system mounted read-only, permissions, a failing device. Anything else (a path
# that is a file, a name too long) needs a person.
PASSING_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
)
PROBE_NAME = ".kernel-write-probe"
PROBE_BYTES = 8192  # more than a page: a full file system refuses it at write time


def os_cause(exc: OSError) -> str:
    """The cause in words, without the path: "no space left on device"."""
    words = os.strerror(exc.errno) if exc.errno else (exc.strerror or type(exc).__name__)
    return words[:1].lower() + words[1:]


def passes(exc: OSError) -> bool:
    """Whether retrying later may succeed with nothing changed on Kernel's side."""
    return exc.errno in PASSING_ERRNOS


def probe_writable(folder: Path) -> OSError | None:
    """Write, sync and remove a small file in ``folder``: the OSError that says why
    the folder cannot take a write, or None. Blocking."""
    path = folder / PROBE_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, bytes(PROBE_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        return exc
    finally:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
    return None


def _synced_temp(path: Path, data: bytes, mode: int) -> str:
    """A temporary file beside ``path`` (same filesystem) holding ``data``, with
    ``mode`` whatever the umask, synced: the name of it. Removed if writing fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fchmod = getattr(os, "fchmod", None)  # Windows (before 3.13) has none
            if fchmod is not None:
                fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` atomically: readers see the old file or the new one, never half
    of either. The temporary file is synced before the rename; it is removed if
    anything fails. Blocking: run it in a thread from async code."""
    tmp = _synced_temp(path, data, mode)
    try:
        platform.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def create_whole(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Create ``path`` holding ``data``, whole or not at all, and never over an
    existing file: FileExistsError when the name exists (two processes creating it at
    once: one wins, the other reads the winner's). Made as a synced temporary file,
    then hard-linked to its name; where a file system has no hard links, the name is
    created directly (exclusively, not symlink-followed). Blocking."""
    tmp = _synced_temp(path, data, mode)
    try:
        try:
            os.link(tmp, path)  # atomic and exclusive
            return
        except FileExistsError:
            raise
        except OSError:
            pass  # no hard links here
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    finally:
        Path(tmp).unlink(missing_ok=True)
