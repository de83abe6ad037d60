"""Zip export and import of a :class:`Workspace`.

Import is checked before anything is written: the archive opens, holds at most
``max_files`` entries declaring at most ``max_bytes`` in all, and every entry is a plain
relative path (no ``..``, no absolute path, no dotfile, no link, no encryption, no
protected path, no duplicate) whose target is not blocked by a link or a file. The
entries are then extracted to a staging folder in the data directory, counting the
bytes actually produced (a lying header cannot inflate past the limit), and only when
all of them came out whole are they written into the workspace, as one change
(:meth:`Workspace.commit`).
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import stat
import tempfile
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from kernel.errors import WorkspaceError
from kernel.i18n import t
from kernel.workspace.files import _READ, Parts, Workspace, Writer, parts_of

_COPY = 64 * 1024
_MIN_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


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
        self._lock = asyncio.Lock()  # one import at a time

    # ----- export --------------------------------------------------------------------

    async def export(self) -> Path:
        """A zip of every listed file and folder, in a temporary file the caller deletes."""
        return await asyncio.to_thread(self._export)

    def _export(self) -> Path:
        entries, truncated = self.workspace._list((), self.max_files)
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
                    self._add(zf, info, tuple(entry.path.split("/")))
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path

    def _add(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, parts: Parts) -> None:
        folder = self.workspace._folder(parts)
        try:
            fd = os.open(parts[-1], _READ, dir_fd=folder)
        except OSError:  # gone or swapped for a link since listed: left out
            return
        finally:
            os.close(folder)
        with os.fdopen(fd, "rb") as src:
            if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                return
            os.set_blocking(src.fileno(), True)
            with zf.open(info, "w", force_zip64=True) as dst:
                shutil.copyfileobj(src, dst, _COPY)

    # ----- import --------------------------------------------------------------------

    async def import_zip(self, data: bytes) -> list[str]:
        """Write the archive's files into the workspace (replacing files of the same
        path, leaving others); returns the paths written. All or nothing."""
        async with self._lock:
            return await asyncio.to_thread(self._import, data)

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
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
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
            try:
                with zf.open(member) as src, open(target, "wb") as dst:
                    while chunk := src.read(_COPY):
                        total += len(chunk)
                        if total > self.max_bytes:
                            raise _too_large(self.max_bytes, self.max_files)
                        dst.write(chunk)
            except (zipfile.BadZipFile, EOFError, NotImplementedError, ValueError):
                raise _unsafe(member.filename, t("ws.why_corrupt")) from None
            planned.append((parts, _file_writer(target)))
        return planned


def _file_writer(path: Path) -> Writer:
    def write(fh: BinaryIO) -> None:
        with open(path, "rb") as src:
            shutil.copyfileobj(src, fh, _COPY)

    return write
