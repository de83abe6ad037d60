"""Zip export and import of a :class:`Workspace`.

Export leaves out what the listing leaves out (dotfiles, links, protected paths, files
with more than one hard link unless ``gateway.allow_hard_links``); the hard-linked files
left out are named in the zip's comment (``unzip -z``), never silently dropped, and each
file is judged again on the descriptor it is read from.

Import is checked before anything is written: the archive opens, holds at most
``max_files`` entries declaring at most ``max_bytes`` in all, and every entry is a plain
relative path (no ``..``, no absolute path, no dotfile, no link, no encryption, no
protected path, no duplicate) whose target is not blocked by a link or a file. The
entries are then extracted to a staging folder in the data directory, counting the
bytes actually produced (a lying header cannot inflate past the limit), and only when
all of them came out whole are they written into the workspace, as one change
(:meth:`Workspace.commit`), under the workspace's lock. A damaged entry (bad deflate,
bzip2 or lzma data, a checksum that differs, a truncated archive) or an unsupported
compression method is refused naming the entry.
"""

from __future__ import annotations

import asyncio
import io
import lzma
import os
import shutil
import stat
import struct
import tempfile
import zipfile
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, BinaryIO

from kernel.core import platform
from kernel.core.errors import WorkspaceError
from kernel.core.i18n import t
from kernel.workspace.dirs import READ
from kernel.workspace.files import Workspace, Writer
from kernel.workspace.paths import Parts, Secrets, parts_of

_COPY = 64 * 1024
_MIN_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_MAX_COMMENT = 65535  # bytes, the most a zip comment holds
# What reading a damaged entry raises: zipfile's own errors, and the decompressors'
# (bz2 raises a bare OSError "Invalid data stream").
_DAMAGED = (
    zipfile.BadZipFile,
    EOFError,
    ValueError,
    OSError,
    zlib.error,
    lzma.LZMAError,
    struct.error,
)


def _too_large(max_bytes: int, max_files: int) -> WorkspaceError:
    return WorkspaceError(
        "archive_too_large",
        t("ws.archive_too_large", max_bytes=max_bytes, max_files=max_files),
        {"max_bytes": max_bytes, "max_files": max_files},
    )


def _unsafe(name: str, why: str) -> WorkspaceError:
    shown = name[:200]
    return WorkspaceError(
        "import_unsafe_entry", t("ws.unsafe_entry", name=shown, why=why), {"entry": shown}
    )


class Archives:
    """Export to and import from zip files, within the given limits."""

    def __init__(
        self, workspace: Workspace, staging: Path, *, max_bytes: int, max_files: int
    ) -> None:
        self.workspace = workspace
        self.staging = staging  # a folder in the data directory
        self.max_bytes = max_bytes
        self.max_files = max_files

    # ----- export --------------------------------------------------------------------

    async def export(self) -> Path:
        """A zip of every listed file and folder, in a temporary file the caller deletes."""
        return await asyncio.to_thread(self._export)

    def _export(self) -> Path:
        skipped: list[str] = []
        secrets = Secrets(self.workspace)  # one look at the data dir for the whole export
        entries, truncated = self.workspace._list((), self.max_files, skipped, secrets)
        total = sum(e.size for e in entries)
        if truncated or total > self.max_bytes:
            raise _too_large(self.max_bytes, self.max_files)
        self.staging.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="export-", suffix=".zip", dir=self.staging)
        os.close(fd)
        path = Path(name)
        try:
            with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for entry in entries:
                    stamp = datetime.fromtimestamp(entry.modified.timestamp(), UTC)
                    when = max(stamp.timetuple()[:6], _MIN_ZIP_TIME)
                    if entry.kind == "dir":
                        info = zipfile.ZipInfo(entry.path + "/", when)
                        info.external_attr = (stat.S_IFDIR | 0o755) << 16
                        zf.writestr(info, b"")
                        continue
                    info = zipfile.ZipInfo(entry.path, when)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = (stat.S_IFREG | 0o644) << 16
                    if not self._add(zf, info, tuple(entry.path.split("/")), secrets):
                        skipped.append(entry.path)
                if skipped:
                    note = t("ws.export_skipped", count=len(skipped), paths=", ".join(skipped))
                    zf.comment = note.encode("utf-8")[:_MAX_COMMENT]
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path

    def _add(
        self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, parts: Parts, secrets: Secrets
    ) -> bool:
        """False: the file became one that is refused (a hard link) since it was listed."""
        try:
            folder = self.workspace._folder(parts)
        except WorkspaceError:  # a folder on the way gone or swapped since listed
            return True
        try:
            fd = self.workspace.dirs.open_file(parts[-1], folder, READ)
        except OSError:  # gone or swapped for a link since listed: left out
            return True
        finally:
            self.workspace.dirs.close(folder)
        with os.fdopen(fd, "rb") as src:
            opened = os.fstat(src.fileno())
            if not stat.S_ISREG(opened.st_mode):
                return True
            if self.workspace.refusal(opened, secrets) is not None:
                return False
            platform.set_blocking(src.fileno(), True)
            with zf.open(info, "w", force_zip64=True) as dst:
                shutil.copyfileobj(src, dst, _COPY)
        return True

    # ----- import --------------------------------------------------------------------

    async def import_zip(self, data: bytes) -> list[str]:
        """Write the archive's files into the workspace (replacing files of the same
        path, leaving others); returns the paths written. All or nothing."""
        return await self.workspace.locked(lambda: self._import(data))

    def _plan(self, zf: zipfile.ZipFile) -> list[tuple[Parts, zipfile.ZipInfo | None]]:
        infos = zf.infolist()
        if len(infos) > self.max_files:
            raise _too_large(self.max_bytes, self.max_files)
        if sum(i.file_size for i in infos) > self.max_bytes:
            raise _too_large(self.max_bytes, self.max_files)
        plan: list[tuple[Parts, zipfile.ZipInfo | None]] = []
        files: set[Parts] = set()
        folders: set[Parts] = set()
        for info in infos:
            name = info.filename
            if info.flag_bits & 0x1:
                raise _unsafe(name, t("ws.why_encrypted"))
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise _unsafe(name, t("ws.why_symlink"))
            is_dir = info.is_dir()
            try:
                parts = parts_of(name[:-1] if is_dir else name)
            except WorkspaceError as exc:
                raise _unsafe(name, str(exc)) from None
            if self.workspace.is_protected(parts):
                raise _unsafe(name, t("ws.why_protected"))
            if parts in files or (not is_dir and parts in folders):
                raise _unsafe(name, t("ws.why_duplicate"))
            (folders if is_dir else files).add(parts)
            plan.append((parts, None if is_dir else info))
        for parts in files:
            for depth in range(1, len(parts)):
                if parts[:depth] in files:
                    raise _unsafe("/".join(parts), t("ws.why_duplicate"))
        for parts, member in plan:
            try:
                self.workspace.check_target(parts, folder=member is None)
            except WorkspaceError as exc:
                raise _unsafe("/".join(parts), str(exc)) from None
        return plan

    def _import(self, data: bytes) -> list[str]:
        try:
            zf = zipfile.ZipFile(io.BytesIO(data))  # shares the bytes, no copy
        except (zipfile.LargeZipFile, NotImplementedError, *_DAMAGED):
            raise WorkspaceError("import_invalid", t("ws.bad_zip")) from None
        with zf:
            plan = self._plan(zf)
            self.staging.mkdir(parents=True, exist_ok=True)
            staged = Path(tempfile.mkdtemp(prefix="import-", dir=self.staging))
            try:
                planned = self._extract(zf, plan, staged)
                self.workspace.commit(planned)
            finally:
                shutil.rmtree(staged, ignore_errors=True)
        return ["/".join(parts) for parts, info in plan if info is not None]

    def _extract(
        self,
        zf: zipfile.ZipFile,
        plan: list[tuple[Parts, zipfile.ZipInfo | None]],
        staged: Path,
    ) -> list[tuple[Parts, Writer | None]]:
        planned: list[tuple[Parts, Writer | None]] = []
        total = 0
        for index, (parts, member) in enumerate(plan):
            if member is None:
                planned.append((parts, None))
                continue
            target = staged / str(index)
            with _entry(zf, member) as src, open(target, "wb") as dst:
                while True:
                    try:
                        chunk = src.read(_COPY)
                    except _DAMAGED:  # a write error is not the entry's fault: not caught
                        raise _unsafe(member.filename, t("ws.why_corrupt")) from None
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > self.max_bytes:
                        raise _too_large(self.max_bytes, self.max_files)
                    dst.write(chunk)
            planned.append((parts, _file_writer(target)))
        return planned


def _entry(zf: zipfile.ZipFile, member: zipfile.ZipInfo) -> IO[bytes]:
    """``member`` opened for reading, or the reason it cannot be (an entry error)."""
    try:
        return zf.open(member)
    except NotImplementedError:
        method = str(member.compress_type)
        raise _unsafe(member.filename, t("ws.why_method", method=method)) from None
    except (RuntimeError, *_DAMAGED):  # a bad local header, or a password needed
        raise _unsafe(member.filename, t("ws.why_corrupt")) from None


def _file_writer(path: Path) -> Writer:
    def write(fh: BinaryIO) -> None:
        with open(path, "rb") as src:
            shutil.copyfileobj(src, fh, _COPY)

    return write
