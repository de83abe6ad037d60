"""The owner's workspace: files under one root folder, read, listed and changed
through :class:`Workspace`, only by the relative paths :mod:`kernel.workspace.paths`
lets through.

Writes go to a temporary file (a unique name) in the target's folder, renamed over the
target once complete: a reader sees the old file or the new one. A change of several
files (an upload, an import) moves existing files aside first and puts them back if any
write fails, so it happens as a whole or not at all. Every method that touches the disk
runs in a worker thread; every change runs under :attr:`Workspace.lock`, which SelfOps
shares, so a change checked against the content it saw cannot overwrite a write made
after that check.
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
from typing import Any, BinaryIO, TypeVar

from kernel.core import platform
from kernel.core.errors import WorkspaceError
from kernel.core.i18n import t
from kernel.workspace.dirs import CREATE, READ, is_link
from kernel.workspace.paths import Parts, Root, Secrets, denied, parts_of, raced

__all__ = ["CHUNK", "Entry", "OpenFile", "Parts", "Workspace", "Writer", "parts_of"]

Writer = Callable[[BinaryIO], None]  # writes a new file's content
T = TypeVar("T")

CHUNK = 256 * 1024
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


class Workspace(Root):
    """The files of ``root``, minus ``protected`` paths (config.toml, the data dir).

    ``allow_hard_links``: serve files with more than one link (never one that is also a
    protected file). ``lock``: the lock every change takes; give two workspaces over
    overlapping folders the same one."""

    def __init__(
        self,
        root: Path,
        protected: Sequence[Path] = (),
        *,
        allow_hard_links: bool = False,
        lock: asyncio.Lock | None = None,
    ) -> None:
        super().__init__(root, protected, allow_hard_links=allow_hard_links)
        self.lock = lock or asyncio.Lock()

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
            if is_link(info):
                raise denied(shown, t("ws.why_symlink"))
            if stat.S_ISDIR(info.st_mode):
                raise WorkspaceError("path_is_directory", t("ws.is_directory", path=shown))
            if not stat.S_ISREG(info.st_mode):
                raise denied(shown, t("ws.why_special"))
            try:
                fd = self.dirs.open_file(parts[-1], folder, READ)
            except FileNotFoundError:  # removed since the check
                raise WorkspaceError(
                    "not_found", t("ws.not_found", path=shown), {"path": shown}
                ) from None
            except OSError as exc:  # swapped for a link (ELOOP) since the check
                raise self._blocked(folder, parts[-1], shown, exc) from None
        finally:
            self.dirs.close(folder)
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            os.close(fd)
            raise denied(shown, t("ws.why_special"))
        why = self.refusal(opened)
        if why is not None:
            os.close(fd)
            raise denied(shown, why)
        platform.set_blocking(fd, True)
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

    def _list(
        self,
        parts: Parts,
        limit: int,
        skipped: list[str] | None = None,
        secrets: Secrets | None = None,
    ) -> tuple[list[Entry], bool]:
        """``skipped``: gets the paths of files left out for their hard links."""
        out: list[Entry] = []
        fd = self._open_dir(parts)
        try:
            truncated = self._walk(fd, parts, out, limit, secrets or Secrets(self), skipped)
        finally:
            self.dirs.close(fd)
        return out, truncated

    def _walk(
        self,
        fd: int,
        prefix: Parts,
        out: list[Entry],
        limit: int,
        secrets: Secrets,
        skipped: list[str] | None,
    ) -> bool:
        for name in sorted(self.dirs.listdir(fd)):
            if name.startswith("."):
                continue
            parts = (*prefix, name)
            if self.is_protected(parts):
                continue
            info = self._lstat(fd, name)
            if info is None or is_link(info):
                continue
            if len(out) >= limit:
                return True
            shown = "/".join(parts)
            if stat.S_ISREG(info.st_mode):
                if self.refusal(info, secrets) is not None:
                    if skipped is not None:
                        skipped.append(shown)
                    continue
                out.append(Entry(shown, "file", info.st_size, _stamp(info.st_mtime)))
            elif stat.S_ISDIR(info.st_mode):
                out.append(Entry(shown, "dir", 0, _stamp(info.st_mtime)))
                try:
                    child = self.dirs.open_dir(name, fd)
                except OSError:  # unreadable or swapped for a link: left out
                    continue
                try:
                    if self._walk(child, parts, out, limit, secrets, skipped):
                        return True
                finally:
                    self.dirs.close(child)
        return False

    # ----- changes -------------------------------------------------------------------

    async def locked(self, work: Callable[[], T]) -> T:
        """``work()`` in a thread under :attr:`lock`. A caller cancelled meanwhile stops
        waiting, but the lock is kept until the thread has finished."""
        await self.lock.acquire()
        try:
            task = asyncio.ensure_future(asyncio.to_thread(work))
        except BaseException:
            self.lock.release()
            raise
        task.add_done_callback(self._release)
        return await asyncio.shield(task)

    def _release(self, task: asyncio.Future[Any]) -> None:
        self.lock.release()
        if not task.cancelled():
            task.exception()  # retrieved here: the caller may have gone

    async def write(self, path: str, data: bytes) -> Entry:
        return (await self.write_many([(path, data)]))[0]

    async def write_many(self, files: list[tuple[str, bytes]]) -> list[Entry]:
        """Several files, all or none."""
        planned: list[tuple[Parts, Writer | None]] = [
            (self.check(path), _bytes_writer(data)) for path, data in files
        ]

        def commit_and_stat() -> list[Entry]:
            self.commit(planned)
            return self._stat_all([parts for parts, _ in planned])

        return await self.locked(commit_and_stat)

    def _stat_all(self, paths: list[Parts]) -> list[Entry]:
        out = []
        for parts in paths:
            opened = self._open(parts)
            opened.close()
            out.append(opened.entry)
        return out

    def read_now(self, parts: Parts) -> bytes | None:
        """A file's content (None: there is none), read in the calling thread."""
        try:
            opened = self._open(parts)
        except WorkspaceError as exc:
            if exc.code == "not_found":
                return None
            raise
        try:
            chunks = []
            while chunk := os.read(opened.fd, CHUNK):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            opened.close()

    async def delete(self, path: str) -> None:
        """A file, or an empty folder."""
        parts = self.check(path)
        await self.locked(lambda: self._delete(parts))

    def _delete(self, parts: Parts) -> None:
        shown = "/".join(parts)
        folder = self._folder(parts)
        try:
            info = self._lstat(folder, parts[-1])
            if info is None:
                raise WorkspaceError("not_found", t("ws.not_found", path=shown), {"path": shown})
            if is_link(info):
                raise denied(shown, t("ws.why_symlink"))
            try:
                if stat.S_ISDIR(info.st_mode):
                    self.dirs.rmdir(parts[-1], folder)
                else:
                    self.dirs.unlink(parts[-1], folder)
            except FileNotFoundError:  # removed meanwhile (by another program)
                raise WorkspaceError(
                    "not_found", t("ws.not_found", path=shown), {"path": shown}
                ) from None
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise WorkspaceError(
                        "directory_not_empty", t("ws.not_empty", path=shown)
                    ) from None
                if exc.errno in (errno.EISDIR, errno.ENOTDIR, errno.EPERM):
                    raise raced(shown) from None  # swapped for a folder or a file
                raise
        finally:
            self.dirs.close(folder)

    def commit(self, planned: list[tuple[Parts, Writer | None]]) -> None:
        """Write files (``None``: make a folder) as one change: every target is checked
        first; a file replaced is kept aside until all writes succeeded, and put back
        (new files and folders removed) if one fails."""
        for parts, writer in planned:
            self.check_target(parts, folder=writer is None)
        token = uuid.uuid4().hex  # unique per change: no two writes share a temporary name
        done: list[tuple[Parts, str | None]] = []  # (target, its backup name or None)
        made: list[Parts] = []
        try:
            for parts, writer in planned:
                folder = self._folder(parts, create=True, made=made)
                try:
                    if writer is None:
                        if self._lstat(folder, parts[-1]) is None:
                            try:
                                self.dirs.mkdir(parts[-1], folder)
                                made.append(parts)
                            except FileExistsError:  # made meanwhile: fine
                                pass
                            except FileNotFoundError:  # its folder was removed meanwhile
                                raise raced("/".join(parts)) from None
                        continue
                    backup = self._replace(folder, parts, writer, token, len(done))
                    done.append((parts, backup))
                finally:
                    self.dirs.close(folder)
        except BaseException:
            self._roll_back(done, made)
            raise
        for parts, backup in done:
            if backup is not None:
                with contextlib.suppress(WorkspaceError, FileNotFoundError):
                    folder = self._folder(parts)
                    try:
                        self.dirs.unlink(backup, folder)
                    finally:
                        self.dirs.close(folder)

    def _existing(self, folder: int, parts: Parts) -> os.stat_result | None:
        """The file a write would replace, judged on its open descriptor (None: none)."""
        shown = "/".join(parts)
        try:
            fd = self.dirs.open_file(parts[-1], folder, READ)
        except FileNotFoundError:
            return None
        except PermissionError:  # unreadable, so nothing to leak: judged by its name
            fd = -1
        except OSError as exc:
            raise self._blocked(folder, parts[-1], shown, exc) from None
        if fd < 0:
            info = self._lstat(folder, parts[-1])
            if info is None:
                return None
            if is_link(info):
                raise denied(shown, t("ws.why_symlink"))
        else:
            try:
                info = os.fstat(fd)
            finally:
                os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise WorkspaceError("path_is_directory", t("ws.is_directory", path=shown))
        if not stat.S_ISREG(info.st_mode):
            raise denied(shown, t("ws.why_special"))
        why = self.refusal(info)
        if why is not None:
            raise denied(shown, why)
        return info

    def _replace(
        self, folder: int, parts: Parts, writer: Writer, token: str, index: int
    ) -> str | None:
        name = parts[-1]
        tmp = f"{_TEMP}tmp-{token}-{index}"
        old = self._existing(folder, parts)
        try:
            fd = self.dirs.open_file(tmp, folder, CREATE)
        except FileNotFoundError:  # the folder was removed meanwhile
            raise raced("/".join(parts)) from None
        try:
            with os.fdopen(fd, "wb") as fh:
                if old is not None:
                    _keep_mode(fh.fileno(), old)
                writer(fh)
                fh.flush()
                os.fsync(fh.fileno())
            backup: str | None = None
            if old is not None:
                # A second name for the old file, so the rename below replaces it in
                # one step (readers never see it missing) and a rollback can restore it.
                backup = f"{_TEMP}bak-{token}-{index}"
                try:
                    self.dirs.link(name, backup, folder)
                except FileNotFoundError:  # removed meanwhile: now a new file
                    backup = None
                except OSError as exc:
                    if exc.errno == errno.ELOOP:  # swapped for a link meanwhile (Windows walk)
                        raise raced("/".join(parts)) from None
                    raise
            try:
                self.dirs.rename(tmp, name, folder)
            except OSError as exc:
                if backup is not None:
                    with contextlib.suppress(OSError):  # the folder itself swapped (Windows)
                        self.dirs.unlink(backup, folder)
                # A folder put there meanwhile; ELOOP: the folder swapped for a link.
                raced_errnos = (errno.EISDIR, errno.ENOTDIR, errno.ENOTEMPTY, errno.ENOENT)
                if exc.errno in (*raced_errnos, errno.ELOOP):
                    raise raced("/".join(parts)) from None
                raise
            except BaseException:
                if backup is not None:
                    self.dirs.unlink(backup, folder)
                raise
            return backup
        except BaseException:
            # FileNotFoundError: gone; ELOOP: the folder swapped for a link (Windows walk),
            # the temporary file (a dotfile, never served) left where the folder went.
            with contextlib.suppress(OSError):
                self.dirs.unlink(tmp, folder)
            raise

    def _roll_back(self, done: list[tuple[Parts, str | None]], made: list[Parts]) -> None:
        for parts, backup in reversed(done):
            try:
                folder = self._folder(parts)
            except WorkspaceError:
                continue
            try:
                if backup is None:
                    self.dirs.unlink(parts[-1], folder)
                else:
                    self.dirs.rename(backup, parts[-1], folder)
            except OSError:
                pass
            finally:
                self.dirs.close(folder)
        for parts in reversed(made):
            try:
                folder = self._folder(parts)
            except WorkspaceError:
                continue
            try:
                self.dirs.rmdir(parts[-1], folder)
            except OSError:
                pass
            finally:
                self.dirs.close(folder)


def _keep_mode(fd: int, old: os.stat_result) -> None:
    """The replaced file's mode on its successor (POSIX; Windows keeps no such mode)."""
    fchmod = getattr(os, "fchmod", None)
    if fchmod is not None:
        fchmod(fd, stat.S_IMODE(old.st_mode))


def _bytes_writer(data: bytes) -> Writer:
    def write(fh: BinaryIO) -> None:
        fh.write(data)

    return write
