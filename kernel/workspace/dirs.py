"""How a workspace folder is held while a path is walked: the one place POSIX and Windows
differ for :mod:`kernel.workspace.paths` and :mod:`kernel.workspace.files`.

A folder is an ``int`` handle either way, and every step names a child of a held folder:

- :class:`FdDirs` (POSIX): the handle is a real descriptor, each step an ``openat``
  with ``O_NOFOLLOW | O_DIRECTORY``, so no link is ever followed, even one swapped in
  between a check and the use.
- :class:`PathDirs` (Windows, or any platform whose ``os.open`` takes no ``dir_fd`` or
  lacks ``O_NOFOLLOW``): the handle (negative, never a descriptor) stands for a full
  path checked component by component with ``lstat``. A component that is a symbolic
  link or any reparse point (a junction, a mount point: :func:`is_link`) is refused as
  a link (``ELOOP``); before each use the held folder is checked again to be the same
  folder (``st_dev``, ``st_ino``, which Windows fills from the file ID) and not a link;
  a file is opened by its full path and kept only if ``fstat`` of the opened descriptor
  is the file that was checked, so a file swapped meanwhile is refused. What it cannot
  close: a folder on the way swapped for a junction between that check and the use of a
  path (a window of microseconds that ``openat`` has no equivalent of in the stdlib).

:func:`choose_dirs` picks one, once per workspace. Public API: ``Dirs``, ``FdDirs``,
``PathDirs``, ``choose_dirs``, ``is_link``, ``windows_alias``, ``READ``, ``CREATE``,
``FILE_ATTRIBUTE_REPARSE_POINT``.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import threading
from typing import Protocol

from kernel.core import platform

__all__ = [
    "CREATE",
    "FILE_ATTRIBUTE_REPARSE_POINT",
    "READ",
    "Dirs",
    "FdDirs",
    "PathDirs",
    "choose_dirs",
    "is_link",
    "windows_alias",
]

FILE_ATTRIBUTE_REPARSE_POINT = 0x400

_F = platform.flag
# Binary and not inherited on Windows; non-blocking (a FIFO cannot hang the open) and no
# link followed on POSIX. A flag the platform lacks is 0.
READ = os.O_RDONLY | _F("O_NOFOLLOW") | _F("O_CLOEXEC") | _F("O_NONBLOCK") | _F("O_BINARY")
READ |= _F("O_NOINHERIT")
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _F("O_NOFOLLOW") | _F("O_CLOEXEC")
CREATE |= _F("O_BINARY") | _F("O_NOINHERIT")


def is_link(info: os.stat_result) -> bool:
    """Whether an ``lstat`` result is a link of any kind: a symbolic link, or (Windows)
    any reparse point, which is how junctions and mount points show."""
    attributes = getattr(info, "st_file_attributes", 0) or 0
    return stat.S_ISLNK(info.st_mode) or bool(attributes & FILE_ATTRIBUTE_REPARSE_POINT)


_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"{kind}{n}" for kind in ("COM", "LPT") for n in "123456789¹²³"]
)


def windows_alias(name: str) -> bool:
    """Whether Windows may read ``name`` as another name or a device: a trailing dot or
    space (stripped: "data." is "data"), a stream ("a:b"), an 8.3 short name ("DATA~1")
    or a device name with any extension ("NUL.txt")."""
    if name != name.rstrip(". ") or ":" in name:
        return True
    if any(c == "~" and name[i + 1 : i + 2].isdigit() for i, c in enumerate(name)):
        return True
    return name.split(".")[0].rstrip(" ").upper() in _DEVICES


def _loop(name: str) -> OSError:
    return OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)


class Dirs(Protocol):
    """Folder handles and the operations on a child ``name`` of a held folder ``at``."""

    def root(self, path: str) -> int: ...
    def open_dir(self, name: str, at: int) -> int: ...
    def open_file(self, name: str, at: int, flags: int, mode: int = 0o666) -> int: ...
    def lstat(self, name: str, at: int) -> os.stat_result: ...
    def mkdir(self, name: str, at: int) -> None: ...
    def unlink(self, name: str, at: int) -> None: ...
    def rmdir(self, name: str, at: int) -> None: ...
    def rename(self, src: str, dst: str, at: int) -> None: ...
    def link(self, src: str, dst: str, at: int) -> None: ...
    def listdir(self, at: int) -> list[str]: ...
    def close(self, at: int) -> None: ...


class FdDirs:
    """Descriptors and ``*at`` calls: links are never followed (POSIX)."""

    @staticmethod
    def _dir_flags() -> int:
        return os.O_RDONLY | _F("O_DIRECTORY") | _F("O_NOFOLLOW") | _F("O_CLOEXEC")

    def root(self, path: str) -> int:
        return os.open(path, self._dir_flags())

    def open_dir(self, name: str, at: int) -> int:
        return os.open(name, self._dir_flags(), dir_fd=at)

    def open_file(self, name: str, at: int, flags: int, mode: int = 0o666) -> int:
        return os.open(name, flags, mode, dir_fd=at)

    def lstat(self, name: str, at: int) -> os.stat_result:
        return os.stat(name, dir_fd=at, follow_symlinks=False)

    def mkdir(self, name: str, at: int) -> None:
        os.mkdir(name, 0o777, dir_fd=at)

    def unlink(self, name: str, at: int) -> None:
        os.unlink(name, dir_fd=at)

    def rmdir(self, name: str, at: int) -> None:
        os.rmdir(name, dir_fd=at)

    def rename(self, src: str, dst: str, at: int) -> None:
        os.rename(src, dst, src_dir_fd=at, dst_dir_fd=at)

    def link(self, src: str, dst: str, at: int) -> None:
        os.link(src, dst, src_dir_fd=at, dst_dir_fd=at, follow_symlinks=False)

    def listdir(self, at: int) -> list[str]:
        return os.listdir(at)

    def close(self, at: int) -> None:
        os.close(at)


class PathDirs:
    """Checked full paths behind negative handles (Windows): see the module docstring."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[str, int, int]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _hold(self, path: str, info: os.stat_result) -> int:
        with self._lock:
            handle = -next(self._ids)
            self._held[handle] = (path, info.st_dev, info.st_ino)
        return handle

    def _path(self, at: int) -> str:
        """The held folder's path, after checking it is still that folder."""
        try:
            path, dev, ino = self._held[at]
        except KeyError:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF)) from None
        info = os.lstat(path)
        if is_link(info):
            raise _loop(path)  # swapped for a link since it was checked
        if (info.st_dev, info.st_ino) != (dev, ino):
            # Removed and another made in its place: as a descriptor of a removed folder.
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return path

    def _child(self, name: str, at: int) -> str:
        if not name or name in (".", "..") or "/" in name or "\\" in name or windows_alias(name):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), name)
        return os.path.join(self._path(at), name)

    def root(self, path: str) -> int:
        info = os.lstat(path)
        if is_link(info):
            raise _loop(path)
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return self._hold(path, info)

    def open_dir(self, name: str, at: int) -> int:
        path = self._child(name, at)
        info = os.lstat(path)
        if is_link(info):
            raise _loop(path)
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return self._hold(path, info)

    def open_file(self, name: str, at: int, flags: int, mode: int = 0o666) -> int:
        path = self._child(name, at)
        creating = bool(flags & os.O_CREAT)
        checked = None
        try:
            checked = os.lstat(path)
        except FileNotFoundError:
            if not creating:
                raise
        if checked is not None and is_link(checked):
            raise _loop(path)
        fd = os.open(path, flags, mode)
        try:
            opened = os.fstat(fd)
            same = checked is None or (opened.st_dev, opened.st_ino) == (
                checked.st_dev,
                checked.st_ino,
            )
            if not same or is_link(os.lstat(path)):
                raise _loop(path)  # swapped between the check and the open
            self._path(at)  # and the folder is still the one checked
        except BaseException:
            os.close(fd)
            raise
        return fd

    def lstat(self, name: str, at: int) -> os.stat_result:
        return os.lstat(self._child(name, at))

    def mkdir(self, name: str, at: int) -> None:
        os.mkdir(self._child(name, at), 0o777)

    def unlink(self, name: str, at: int) -> None:
        path = self._child(name, at)
        if stat.S_ISDIR(os.lstat(path).st_mode):  # a junction shows as a folder
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        os.unlink(path)

    def rmdir(self, name: str, at: int) -> None:
        path = self._child(name, at)
        if is_link(os.lstat(path)):  # never through a junction
            raise _loop(path)
        os.rmdir(path)

    def rename(self, src: str, dst: str, at: int) -> None:
        platform.replace(self._child(src, at), self._child(dst, at))

    def link(self, src: str, dst: str, at: int) -> None:
        path = self._child(src, at)
        if is_link(os.lstat(path)):
            raise _loop(path)
        os.link(path, self._child(dst, at))

    def listdir(self, at: int) -> list[str]:
        return os.listdir(self._path(at))

    def close(self, at: int) -> None:
        with self._lock:
            self._held.pop(at, None)


def choose_dirs() -> Dirs:
    """:class:`FdDirs` where ``os.open`` takes ``dir_fd`` and ``O_NOFOLLOW`` and
    ``O_DIRECTORY`` exist; :class:`PathDirs` elsewhere (Windows)."""
    fd_walk = (
        os.open in os.supports_dir_fd
        and os.stat in os.supports_dir_fd
        and hasattr(os, "O_NOFOLLOW")
        and hasattr(os, "O_DIRECTORY")
    )
    return FdDirs() if fd_walk else PathDirs()
