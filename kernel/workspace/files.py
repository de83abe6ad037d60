"""Files under one root folder, reached only by relative paths that cannot leave it.

A path is checked twice. First as text (:func:`parts_of`): no absolute path, no ``..``
or ``.``, no empty part, no control character or backslash, no dotfile, and none of
these after Unicode compatibility folding either (a fullwidth dot is a dot). Then on
disk: every folder on the way is opened relative to the one before with ``O_NOFOLLOW``,
so a symbolic link anywhere on the path is refused rather than followed, even if one
appears between a check and the use. ``config.toml`` and the data directory are never
listed, read or written, wherever they lie under the root (names compared without
regard to case, for case-insensitive file systems).

Hard links: a file is judged on the descriptor it was opened by (``fstat`` after an
``O_NOFOLLOW`` open, so nothing can be swapped in between). One with more than one
link is refused unless ``gateway.allow_hard_links`` is on; even then, never one that is
the same file (``st_dev``, ``st_ino``) as config.toml or as any file under the data
directory at that moment (walked when such a file is met). This holds for reads, the
listing, exports and overwrites.

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
import unicodedata
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from kernel.core.errors import WorkspaceError
from kernel.core.i18n import t

Parts = tuple[str, ...]
Writer = Callable[[BinaryIO], None]  # writes a new file's content
T = TypeVar("T")

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


def _raced(path: str) -> WorkspaceError:
    return WorkspaceError("path_conflict", t("ws.changed_meanwhile", path=path), {"path": path})


def _fold(name: str) -> str:
    """A name as a case-insensitive, normalising file system may see it."""
    return unicodedata.normalize("NFKC", name).casefold()


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
        folded = unicodedata.normalize("NFKC", part)
        if folded != part:  # a lookalike, harmless here but not where names get folded
            if folded in (".", "..") or "/" in folded or "\\" in folded:
                raise _invalid(path, t("ws.why_lookalike"))
            if folded.startswith("."):
                raise _denied(path, t("ws.why_lookalike"))
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


class _Secrets:
    """The (st_dev, st_ino) of config.toml and of every file under the data directory,
    found on first need (a walk, links not followed, the workspace itself left out) and
    kept for one operation only: a file created there later is found by the next one."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._named: set[tuple[int, int]] | None = None
        self._found: set[tuple[int, int]] | None = None

    def named(self, info: os.stat_result) -> bool:
        """The same file as config.toml (or another protected file, by its own name)."""
        if self._named is None:
            self._named = set()
            for path in self.workspace.secrets:
                with contextlib.suppress(OSError):
                    other = os.stat(path)
                    self._named.add((other.st_dev, other.st_ino))
        return (info.st_dev, info.st_ino) in self._named

    def __contains__(self, info: os.stat_result) -> bool:
        if self._found is None:
            self._found = self._walk()
        return (info.st_dev, info.st_ino) in self._found

    def _walk(self) -> set[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        try:
            root = os.stat(self.workspace.root)
            skip = (root.st_dev, root.st_ino)
        except OSError:
            skip = (-1, -1)
        for top in self.workspace.secrets:
            try:
                info = os.stat(top, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                found.add((info.st_dev, info.st_ino))
                continue
            for folder, dirs, files in os.walk(top, followlinks=False):
                here = os.stat(folder, follow_symlinks=False)
                if (here.st_dev, here.st_ino) == skip:
                    dirs.clear()  # the workspace inside the data dir: its own files
                    continue
                for name in files:
                    with contextlib.suppress(OSError):
                        entry = os.stat(os.path.join(folder, name), follow_symlinks=False)
                        if stat.S_ISREG(entry.st_mode) and entry.st_nlink > 1:
                            found.add((entry.st_dev, entry.st_ino))
        return found


class Workspace:
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
        self.root = root.resolve()
        # Every protected path, for the hard-link check (a workspace inside the data dir
        # included: the files beside it there are Kernel's).
        self.secrets = [p.resolve() for p in protected]
        # A workspace may live inside the data directory (data/workspace): then only what
        # lies beside it there is Kernel's, and none of that is under the root.
        self.protected = [p for p in self.secrets if p not in self.root.parents]
        self._protected_parts = [
            tuple(_fold(name) for name in p.relative_to(self.root).parts)
            for p in self.protected
            if p == self.root or self.root in p.parents
        ]
        self.allow_hard_links = allow_hard_links
        self.lock = lock or asyncio.Lock()

    # ----- checks --------------------------------------------------------------------

    def is_protected(self, parts: Parts) -> bool:
        """config.toml, the data directory, anything inside it (whatever the case)."""
        folded = tuple(_fold(name) for name in parts)
        return any(folded[: len(p)] == p for p in self._protected_parts)

    def refusal(self, info: os.stat_result, secrets: _Secrets | None = None) -> str | None:
        """Why the file ``info`` describes (an ``fstat`` of an open descriptor) may not be
        served or replaced, or None: it is config.toml under another name, has more than
        one hard link while they are not allowed, or is a file of the data directory."""
        secrets = secrets or _Secrets(self)
        # Whatever its link count: on a case-insensitive file system, CONFIG.TOML is it.
        if secrets.named(info):
            return t("ws.why_protected")
        if info.st_nlink < 2:
            return None
        if not self.allow_hard_links:
            return t("ws.why_hard_link")
        if info in secrets:
            return t("ws.why_protected")
        return None

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
                    with contextlib.suppress(FileExistsError):  # made meanwhile: fine
                        os.mkdir(name, 0o777, dir_fd=fd)
                        if made is not None:
                            made.append(parts[:depth])
                    try:
                        step = os.open(name, _DIR, dir_fd=fd)
                    except FileNotFoundError:  # removed again meanwhile
                        raise _raced(shown) from None
                    except OSError as exc:
                        raise self._blocked(fd, name, shown, exc) from None
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
            except FileNotFoundError:  # removed since the check
                raise WorkspaceError(
                    "not_found", t("ws.not_found", path=shown), {"path": shown}
                ) from None
            except OSError as exc:  # swapped for a link (ELOOP) since the check
                raise self._blocked(folder, parts[-1], shown, exc) from None
        finally:
            os.close(folder)
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            os.close(fd)
            raise _denied(shown, t("ws.why_special"))
        why = self.refusal(opened)
        if why is not None:
            os.close(fd)
            raise _denied(shown, why)
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

    def _list(
        self,
        parts: Parts,
        limit: int,
        skipped: list[str] | None = None,
        secrets: _Secrets | None = None,
    ) -> tuple[list[Entry], bool]:
        """``skipped``: gets the paths of files left out for their hard links."""
        out: list[Entry] = []
        fd = self._open_dir(parts)
        try:
            truncated = self._walk(fd, parts, out, limit, secrets or _Secrets(self), skipped)
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

    def _walk(
        self,
        fd: int,
        prefix: Parts,
        out: list[Entry],
        limit: int,
        secrets: _Secrets,
        skipped: list[str] | None,
    ) -> bool:
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
                if self.refusal(info, secrets) is not None:
                    if skipped is not None:
                        skipped.append(shown)
                    continue
                out.append(Entry(shown, "file", info.st_size, _stamp(info.st_mtime)))
            elif stat.S_ISDIR(info.st_mode):
                out.append(Entry(shown, "dir", 0, _stamp(info.st_mtime)))
                try:
                    child = os.open(name, _DIR, dir_fd=fd)
                except OSError:  # unreadable or swapped for a link: left out
                    continue
                try:
                    if self._walk(child, parts, out, limit, secrets, skipped):
                        return True
                finally:
                    os.close(child)
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
            if stat.S_ISLNK(info.st_mode):
                raise _denied(shown, t("ws.why_symlink"))
            try:
                if stat.S_ISDIR(info.st_mode):
                    os.rmdir(parts[-1], dir_fd=folder)
                else:
                    os.unlink(parts[-1], dir_fd=folder)
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
                    raise _raced(shown) from None  # swapped for a folder or a file
                raise
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
                    why = self.refusal(info)  # checked again on the open file when written
                    if why is not None:
                        raise _denied(shown, why)
                    return
                if not stat.S_ISDIR(info.st_mode):
                    raise WorkspaceError(
                        "path_conflict", t("ws.not_a_folder", path=shown), {"path": shown}
                    )
                try:
                    step = os.open(name, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    return  # removed meanwhile: the rest is created
                except OSError as exc:
                    raise self._blocked(fd, name, shown, exc) from None
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
        token = uuid.uuid4().hex  # unique per change: no two writes share a temporary name
        done: list[tuple[Parts, str | None]] = []  # (target, its backup name or None)
        made: list[Parts] = []
        try:
            for parts, writer in planned:
                folder = self._folder(parts, create=True, made=made)
                try:
                    if writer is None:
                        if self._lstat(folder, parts[-1]) is None:
                            with contextlib.suppress(FileExistsError):
                                os.mkdir(parts[-1], 0o777, dir_fd=folder)
                                made.append(parts)
                        continue
                    backup = self._replace(folder, parts, writer, token, len(done))
                    done.append((parts, backup))
                finally:
                    os.close(folder)
        except BaseException:
            self._roll_back(done, made)
            raise
        for parts, backup in done:
            if backup is not None:
                with contextlib.suppress(WorkspaceError, FileNotFoundError):
                    folder = self._folder(parts)
                    try:
                        os.unlink(backup, dir_fd=folder)
                    finally:
                        os.close(folder)

    def _existing(self, folder: int, parts: Parts) -> os.stat_result | None:
        """The file a write would replace, judged on its open descriptor (None: none)."""
        shown = "/".join(parts)
        try:
            fd = os.open(parts[-1], _READ, dir_fd=folder)
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
            if stat.S_ISLNK(info.st_mode):
                raise _denied(shown, t("ws.why_symlink"))
        else:
            try:
                info = os.fstat(fd)
            finally:
                os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise WorkspaceError("path_is_directory", t("ws.is_directory", path=shown))
        if not stat.S_ISREG(info.st_mode):
            raise _denied(shown, t("ws.why_special"))
        why = self.refusal(info)
        if why is not None:
            raise _denied(shown, why)
        return info

    def _replace(
        self, folder: int, parts: Parts, writer: Writer, token: str, index: int
    ) -> str | None:
        name = parts[-1]
        tmp = f"{_TEMP}tmp-{token}-{index}"
        old = self._existing(folder, parts)
        try:
            fd = os.open(tmp, _CREATE, 0o666, dir_fd=folder)
        except FileNotFoundError:  # the folder was removed meanwhile
            raise _raced("/".join(parts)) from None
        try:
            with os.fdopen(fd, "wb") as fh:
                if old is not None:
                    os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))  # keep the owner's mode
                writer(fh)
                fh.flush()
                os.fsync(fh.fileno())
            backup: str | None = None
            if old is not None:
                # A second name for the old file, so the rename below replaces it in
                # one step (readers never see it missing) and a rollback can restore it.
                backup = f"{_TEMP}bak-{token}-{index}"
                try:
                    os.link(
                        name, backup, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False
                    )
                except FileNotFoundError:  # removed meanwhile: now a new file
                    backup = None
            try:
                os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            except OSError as exc:
                if backup is not None:
                    os.unlink(backup, dir_fd=folder)
                if exc.errno in (errno.EISDIR, errno.ENOTDIR, errno.ENOTEMPTY, errno.ENOENT):
                    raise _raced("/".join(parts)) from None  # a folder put there meanwhile
                raise
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
