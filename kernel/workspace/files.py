"""Files under one root folder, reached only by relative paths that cannot leave it.

A path is checked twice. First as text (:func:`parts_of`): no absolute path, no ``..``
or ``.``, no empty part, no control character or backslash, no dotfile. Then on disk:
every folder on the way is opened relative to the one before with ``O_NOFOLLOW``, so a
symbolic link anywhere on the path is refused rather than followed, even if one appears
between a check and the use. ``config.toml`` and the data directory are never listed,
read or written, wherever they lie under the root.

Writes go to a temporary file in the target's folder, renamed over the target once
complete: a reader sees the old file or the new one. A change of several files (an
upload, an import) moves existing files aside first and puts them back if any write
fails, so it happens as a whole or not at all. Every method that touches the disk runs
in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from kernel.errors import WorkspaceError
from kernel.i18n import t

Parts = tuple[str, ...]
Writer = Callable[[BinaryIO], None]  # writes a new file's content

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 256 * 1024
MAX_PATH = 1024
_TEMP = ".kernel-"  # prefix of Kernel's own temporary names: dotfiles, so never served


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    kind: str  # "file" or "dir"
    size: int
    modified: datetime

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "type": self.kind,
            "size": self.size,
            "modified": self.modified.isoformat(timespec="seconds"),
        }


def _invalid(path: str, why: str) -> WorkspaceError:
    return WorkspaceError("path_invalid", t("ws.path_invalid", path=path[:200], why=why))


def _denied(path: str, why: str) -> WorkspaceError:
    return WorkspaceError("path_denied", t("ws.path_denied", path=path[:200], why=why))


def parts_of(path: str) -> Parts:
    """The parts of a relative path, refused (WorkspaceError) unless every one is a
    plain name: no way out of the root and no hidden file can be written as text."""
    if not path:
        raise _invalid(path, t("ws.why_empty"))
    if len(path) > MAX_PATH or any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise _invalid(path, t("ws.why_chars"))
    if path.startswith("/") or path.startswith("~"):
        raise _invalid(path, t("ws.why_absolute"))
    if "\\" in path:
        raise _invalid(path, t("ws.why_backslash"))
    parts = tuple(path.split("/"))
    for part in parts:
        if part in ("", ".", ".."):
            raise _invalid(path, t("ws.why_dots"))
        if part.startswith("."):
            raise _denied(path, t("ws.why_dotfile"))
        if len(part.encode("utf-8", "surrogateescape")) > 255:
            raise _invalid(path, t("ws.why_chars"))
    return parts


def _stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class OpenFile:
    """A regular file opened for reading (``O_NOFOLLOW``); read it in chunks, then close."""

    def __init__(self, fd: int, entry: Entry) -> None:
        self.fd = fd
        self.entry = entry

    async def chunks(self) -> AsyncIterator[bytes]:
        """The content, up to the size it had when opened (a file growing meanwhile
        does not overrun a Content-Length already sent)."""
        left = self.entry.size
        while left > 0:
            chunk = await asyncio.to_thread(os.read, self.fd, min(CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Workspace:
    """The files of ``root``, minus ``protected`` paths (config.toml, the data dir)."""

    def __init__(self, root: Path, protected: Sequence[Path] = ()) -> None:
        self.root = root.resolve()
        # A workspace may live inside the data directory (data/workspace): then only what
        # lies beside it there is Kernel's, and none of that is under the root.
        self.protected = [p.resolve() for p in protected if p.resolve() not in self.root.parents]

    # ----- checks --------------------------------------------------------------------

    def is_protected(self, parts: Parts) -> bool:
        """config.toml, the data directory, anything inside it."""
        target = self.root.joinpath(*parts)
        return any(target == p or p in target.parents for p in self.protected)

    def _protected_file(self, info: os.stat_result) -> bool:
        """The same file as config.toml under another name (a hard link)."""
        if info.st_nlink < 2:
            return False
        for path in self.protected:
            try:
                other = path.stat()
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino):
                return True
        return False

    def check(self, path: str) -> Parts:
        parts = parts_of(path)
        if self.is_protected(parts):
            raise _denied(path, t("ws.why_protected"))
        return parts

    def _root_fd(self) -> int:
        try:
            return os.open(self.root, _DIR)
        except OSError:
            raise WorkspaceError(
                "workspace_missing", t("ws.missing", root=str(self.root))
            ) from None

    def _folder(
        self, parts: Parts, *, create: bool = False, made: list[Parts] | None = None
    ) -> int:
        """An open fd of the folder holding ``parts[-1]``, each step taken without
        following links. ``create`` makes missing folders (listed in ``made``)."""
        shown = "/".join(parts)
        fd = self._root_fd()
        try:
            for depth, name in enumerate(parts[:-1], start=1):
                try:
                    step = os.open(name, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise WorkspaceError(
                            "not_found", t("ws.not_found", path=shown), {"path": shown}
                        ) from None
                    os.mkdir(name, 0o777, dir_fd=fd)
                    if made is not None:
                        made.append(parts[:depth])
                    step = os.open(name, _DIR, dir_fd=fd)
                except OSError as exc:
                    raise self._blocked(fd, name, shown, exc) from None
                os.close(fd)
                fd = step
            return fd
        except BaseException:
            os.close(fd)
            raise

    @staticmethod
    def _blocked(fd: int, name: str, shown: str, exc: OSError) -> WorkspaceError:
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        except OSError:
            mode = 0
        if stat.S_ISLNK(mode) or exc.errno == errno.ELOOP:
            return _denied(shown, t("ws.why_symlink"))
        return WorkspaceError("path_conflict", t("ws.not_a_folder", path=shown), {"path": shown})

    @staticmethod
    def _lstat(fd: int, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    # ----- reading -------------------------------------------------------------------

    async def open(self, path: str) -> OpenFile:
        parts = self.check(path)
        return await asyncio.to_thread(self._open, parts)

    def _open(self, parts: Parts) -> OpenFile:
        shown = "/".join(parts)
        folder = self._folder(parts)
        try:
            info = self._lstat(folder, parts[-1])
            if info is None:
                raise WorkspaceError("not_found", t("ws.not_found", path=shown), {"path": shown})
            if stat.S_ISLNK(info.st_mode):
                raise _denied(shown, t("ws.why_symlink"))
            if stat.S_ISDIR(info.st_mode):
                raise WorkspaceError("path_is_directory", t("ws.is_directory", path=shown))
            if not stat.S_ISREG(info.st_mode):
                raise _denied(shown, t("ws.why_special"))
            try:
                fd = os.open(parts[-1], _READ, dir_fd=folder)
            except OSError as exc:  # swapped for a link (ELOOP) or gone since the check
                raise self._blocked(folder, parts[-1], shown, exc) from None
        finally:
            os.close(folder)
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            os.close(fd)
            raise _denied(shown, t("ws.why_special"))
        if self._protected_file(opened):
            os.close(fd)
            raise _denied(shown, t("ws.why_protected"))
        os.set_blocking(fd, True)
        return OpenFile(fd, Entry(shown, "file", opened.st_size, _stamp(opened.st_mtime)))

    async def read(self, path: str) -> bytes:
        opened = await self.open(path)
        try:
            return b"".join([chunk async for chunk in opened.chunks()])
        finally:
            opened.close()

    async def listing(self, folder: str = "", limit: int = 1000) -> tuple[list[Entry], bool]:
        """Files and folders under ``folder`` (the root when ""), sorted by path;
        dotfiles, links and protected paths left out. True when cut at ``limit``."""
        parts = self.check(folder) if folder else ()
        return await asyncio.to_thread(self._list, parts, limit)

    def _list(self, parts: Parts, limit: int) -> tuple[list[Entry], bool]:
        out: list[Entry] = []
        fd = self._open_dir(parts)
        try:
            truncated = self._walk(fd, parts, out, limit)
        finally:
            os.close(fd)
        return out, truncated

    def _open_dir(self, parts: Parts) -> int:
        if not parts:
            return self._root_fd()
        shown = "/".join(parts)
        folder = self._folder(parts)
        try:
            return os.open(parts[-1], _DIR, dir_fd=folder)
        except FileNotFoundError:
            raise WorkspaceError(
                "not_found", t("ws.not_found", path=shown), {"path": shown}
            ) from None
        except OSError as exc:
            raise self._blocked(folder, parts[-1], shown, exc) from None
        finally:
            os.close(folder)

    def _walk(self, fd: int, prefix: Parts, out: list[Entry], limit: int) -> bool:
        for name in sorted(os.listdir(fd)):
            if name.startswith("."):
                continue
            parts = (*prefix, name)
            if self.is_protected(parts):
                continue
            info = self._lstat(fd, name)
            if info is None or stat.S_ISLNK(info.st_mode):
                continue
            if len(out) >= limit:
                return True
            shown = "/".join(parts)
            if stat.S_ISREG(info.st_mode):
                if self._protected_file(info):
                    continue
                out.append(Entry(shown, "file", info.st_size, _stamp(info.st_mtime)))
            elif stat.S_ISDIR(info.st_mode):
                out.append(Entry(shown, "dir", 0, _stamp(info.st_mtime)))
                try:
                    child = os.open(name, _DIR, dir_fd=fd)
                except OSError:  # unreadable or swapped for a link: left out
                    continue
                try:
                    if self._walk(child, parts, out, limit):
                        return True
                finally:
                    os.close(child)
        return False

    # ----- changes -------------------------------------------------------------------

    async def write(self, path: str, data: bytes) -> Entry:
        parts = self.check(path)
        await asyncio.to_thread(self.commit, [(parts, _bytes_writer(data))])
        return (await self.stat_many([parts]))[0]

    async def write_many(self, files: list[tuple[str, bytes]]) -> list[Entry]:
        """Several files, all or none."""
        planned = [(self.check(path), _bytes_writer(data)) for path, data in files]
        await asyncio.to_thread(self.commit, list(planned))
        return await self.stat_many([parts for parts, _ in planned])

    async def stat_many(self, paths: list[Parts]) -> list[Entry]:
        def stat_all() -> list[Entry]:
            out = []
            for parts in paths:
                opened = self._open(parts)
                opened.close()
                out.append(opened.entry)
            return out

        return await asyncio.to_thread(stat_all)

    async def delete(self, path: str) -> None:
        """A file, or an empty folder."""
        parts = self.check(path)
        await asyncio.to_thread(self._delete, parts)

    def _delete(self, parts: Parts) -> None:
        shown = "/".join(parts)
        folder = self._folder(parts)
        try:
            info = self._lstat(folder, parts[-1])
            if info is None:
                raise WorkspaceError("not_found", t("ws.not_found", path=shown), {"path": shown})
            if stat.S_ISLNK(info.st_mode):
                raise _denied(shown, t("ws.why_symlink"))
            if stat.S_ISDIR(info.st_mode):
                try:
                    os.rmdir(parts[-1], dir_fd=folder)
                except OSError as exc:
                    if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                        raise WorkspaceError(
                            "directory_not_empty", t("ws.not_empty", path=shown)
                        ) from None
                    raise
            else:
                os.unlink(parts[-1], dir_fd=folder)
        finally:
            os.close(folder)

    def check_target(self, parts: Parts, *, folder: bool) -> None:
        """Refuse (before anything is written) a target whose folders are links or
        files, or that is itself a link, or a folder where a file should go."""
        shown = "/".join(parts)
        fd = self._root_fd()
        try:
            for depth, name in enumerate(parts):
                info = self._lstat(fd, name)
                if info is None:
                    return  # the rest is created
                last = depth == len(parts) - 1
                if stat.S_ISLNK(info.st_mode):
                    raise _denied(shown, t("ws.why_symlink"))
                if last and not folder:
                    if stat.S_ISDIR(info.st_mode):
                        raise WorkspaceError("path_is_directory", t("ws.is_directory", path=shown))
                    if not stat.S_ISREG(info.st_mode):
                        raise _denied(shown, t("ws.why_special"))
                    return
                if not stat.S_ISDIR(info.st_mode):
                    raise WorkspaceError(
                        "path_conflict", t("ws.not_a_folder", path=shown), {"path": shown}
                    )
                step = os.open(name, _DIR, dir_fd=fd)
                os.close(fd)
                fd = step
        finally:
            os.close(fd)

    def commit(self, planned: list[tuple[Parts, Writer | None]]) -> None:
        """Write files (``None``: make a folder) as one change: every target is checked
        first; a file replaced is kept aside until all writes succeeded, and put back
        (new files and folders removed) if one fails."""
        for parts, writer in planned:
            self.check_target(parts, folder=writer is None)
        token = uuid.uuid4().hex[:12]
        done: list[tuple[Parts, str | None]] = []  # (target, its backup name or None)
        made: list[Parts] = []
        try:
            for parts, writer in planned:
                folder = self._folder(parts, create=True, made=made)
                try:
                    if writer is None:
                        if self._lstat(folder, parts[-1]) is None:
                            os.mkdir(parts[-1], 0o777, dir_fd=folder)
                            made.append(parts)
                        continue
                    backup = self._replace(folder, parts[-1], writer, token, len(done))
                    done.append((parts, backup))
                finally:
                    os.close(folder)
        except BaseException:
            self._roll_back(done, made)
            raise
        for parts, backup in done:
            if backup is not None:
                folder = self._folder(parts)
                try:
                    os.unlink(backup, dir_fd=folder)
                finally:
                    os.close(folder)

    @staticmethod
    def _replace(folder: int, name: str, writer: Writer, token: str, index: int) -> str | None:
        tmp = f"{_TEMP}tmp-{token}-{index}"
        old = Workspace._lstat(folder, name)
        fd = os.open(tmp, _CREATE, 0o666, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                if old is not None:
                    os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))  # keep the owner's mode
                writer(fh)
                fh.flush()
                os.fsync(fh.fileno())
            backup = None
            if old is not None:
                # A second name for the old file, so the rename below replaces it in
                # one step (readers never see it missing) and a rollback can restore it.
                backup = f"{_TEMP}bak-{token}-{index}"
                os.link(name, backup, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            try:
                os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                if backup is not None:
                    os.unlink(backup, dir_fd=folder)
                raise
            return backup
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            raise

    def _roll_back(self, done: list[tuple[Parts, str | None]], made: list[Parts]) -> None:
        for parts, backup in reversed(done):
            try:
                folder = self._folder(parts)
            except WorkspaceError:
                continue
            try:
                if backup is None:
                    os.unlink(parts[-1], dir_fd=folder)
                else:
                    os.rename(backup, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)
            except OSError:
                pass
            finally:
                os.close(folder)
        for parts in reversed(made):
            try:
                folder = self._folder(parts)
            except WorkspaceError:
                continue
            try:
                os.rmdir(parts[-1], dir_fd=folder)
            except OSError:
                pass
            finally:
                os.close(folder)


def _bytes_writer(data: bytes) -> Writer:
    def write(fh: BinaryIO) -> None:
        fh.write(data)

    return write
