"""An artifact's file (issue 23), opened with the workspace's safety rules: what the
sidecar's ``GET /agent/artifacts/{id}`` and Telegram's ``/files`` send.

The recorded path must lie in one of the data directory's artifact folders
(``downloads``, ``cli_outputs``, ``tool_outputs``) and is walked from the data directory
as a workspace path is (:class:`kernel.workspace.paths.Root`): every folder opened without
following links, the file opened ``O_NOFOLLOW`` and judged on its descriptor (a regular
file with one link). Its size must still be the recorded one: a file changed since is
refused, never served. Refusals are :class:`CodedError` with ``artifact_removed`` (gone:
retention or someone deleted it), ``artifact_refused`` (a link, not a plain file, outside
the folders) or ``artifact_changed``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import unicodedata
from pathlib import Path

from kernel.core.errors import CodedError, WorkspaceError
from kernel.core.i18n import t
from kernel.store.artifacts import FOLDERS, Artifact
from kernel.workspace.files import OpenFile, Workspace

REMOVED = "artifact_removed"
REFUSED = "artifact_refused"
CHANGED = "artifact_changed"
_GONE = ("not_found", "workspace_missing")


def removed(artifact: Artifact, days: int) -> CodedError:
    """The refusal of an artifact retention removed (or that is gone), with the fix."""
    return CodedError(
        REMOVED,
        t("art.removed", id=artifact.id, name=artifact.name, days=days),
        {"id": artifact.id, "retention_days": days, "removed_at": artifact.removed_at},
    )


class ArtifactFiles:
    """Opens artifacts' files under ``data_dir`` (never following a link on the way)."""

    def __init__(self, data_dir: Path, retention_days: int) -> None:
        self.files = Workspace(data_dir)
        self.retention_days = retention_days

    async def open(self, artifact: Artifact) -> OpenFile:
        """The artifact's file, open for reading (the caller closes it); CodedError when
        it is removed, refused or changed since it was recorded."""
        if artifact.removed:
            raise removed(artifact, self.retention_days)
        parts = artifact.path.split("/")
        if len(parts) < 2 or parts[0] not in FOLDERS.values():
            raise self._refused(artifact, t("art.why_outside"))
        try:
            opened = await self.files.open(artifact.path)
        except WorkspaceError as exc:
            if exc.code in _GONE:
                raise removed(artifact, self.retention_days) from None
            raise self._refused(artifact, str(exc)) from None
        if opened.entry.size != artifact.size:
            opened.close()
            raise CodedError(
                CHANGED,
                t("art.changed", id=artifact.id, size=opened.entry.size, recorded=artifact.size),
                {"id": artifact.id},
            )
        if artifact.sha256:
            # Same size, other bytes (rewritten in place): the content is what was recorded,
            # read from the descriptor that is served, off the loop (review R2).
            try:
                seen = await asyncio.to_thread(_sha256_of, opened.fd, artifact.size)
            except OSError as exc:
                opened.close()
                raise self._refused(artifact, type(exc).__name__) from None
            if seen != artifact.sha256:
                opened.close()
                raise CodedError(
                    CHANGED, t("art.changed_content", id=artifact.id), {"id": artifact.id}
                )
        return opened

    @staticmethod
    def _refused(artifact: Artifact, why: str) -> CodedError:
        return CodedError(REFUSED, t("art.refused", id=artifact.id, why=why), {"id": artifact.id})


def _sha256_of(fd: int, size: int) -> str:
    """SHA-256 of the file's first ``size`` bytes, read through ``fd``, which is left at
    its start again for the caller to serve."""
    digest = hashlib.sha256()
    left = size
    while left > 0:
        chunk = os.read(fd, min(1 << 20, left))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)
    os.lseek(fd, 0, os.SEEK_SET)
    return digest.hexdigest()


def safe_name(name: str) -> str:
    """The last part of ``name``, without control or format characters (bidi overrides
    included), path separators or a leading dot."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    kept = "".join(ch for ch in name if unicodedata.category(ch)[0] not in "CZ" or ch == " ")
    return kept.strip().lstrip(".")[:200]
