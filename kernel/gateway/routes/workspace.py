"""``/workspace/*``: the files of ``general.default_workspace`` (SPEC §8).

Paths are relative to the workspace and checked by :mod:`kernel.workspace.files`: no
``..`` (however encoded), no absolute path, no link on the way, no dotfile, never
config.toml or the data directory, by name or by hard link. Writes, uploads and imports
take the workspace's lock (SelfOps applies take it too). Bodies are bounded by
``gateway.max_body_bytes``; archives also by ``gateway.archive_max_bytes`` /
``archive_max_files``.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from kernel.agent.scope import project_folder
from kernel.core.errors import WorkspaceError
from kernel.core.i18n import t
from kernel.gateway.api import (
    MAX_BODY,
    READ_TIMEOUT,
    Param,
    PathPart,
    Router,
    bounded,
    deps_of,
    invalid,
    json_response,
    query_int,
    query_param,
    read_bytes,
    refusal,
)
from kernel.gateway.schema import Shape
from kernel.workspace import Workspace
from kernel.workspace.files import CHUNK, parts_of

router = Router("workspace", "Files of general.default_workspace")


class Entry(Shape):
    path: str
    type: Literal["file", "dir"]
    size: int
    modified: str


class Listing(Shape):
    entries: list[Entry]
    truncated: bool


class FileDeleted(Shape):
    deleted: bool | None = None
    path: str | None = None


class Upload(Shape):
    """multipart/form-data: one part per file."""

    file: list[bytes] = []


class Uploaded(Shape):
    files: list[Entry]


class Imported(Shape):
    imported: list[str]
    count: int | None = None


PATH = Param("path", "path", PathPart, "relative to the workspace", required=True)
FILE_PATH = "/workspace/files/{path:.+}"  # the rest of the URL, slashes included
BINARY = bytes  # documented as {"type": "string", "format": "binary"}
MAX_LIST = 10000


PROJECT = query_param("project", str, "a project: paths are relative to its folder instead")


async def _workspace(request: web.Request) -> Workspace:
    """The workspace, or with ``?project=NAME`` the project's working folder (its
    default folder, as for delegate_to_cli): only one inside the workspace, under the
    same checks and lock; a project without a folder works in the workspace."""
    deps = deps_of(request)
    name = request.query.get("project")
    if name is None:
        return deps.workspace
    project = await deps.agent.profiles.projects.get(name)
    folder = project_folder(project, deps.config.base_dir)
    if not folder:
        return deps.workspace
    return await asyncio.to_thread(_project_workspace, deps.workspace, Path(folder), name)


def _project_workspace(workspace: Workspace, folder: Path, name: str) -> Workspace:
    real = folder.resolve()
    if real == workspace.root:
        return workspace
    if workspace.root not in real.parents:
        why = t("ws.why_project_outside", project=name)
        raise WorkspaceError("path_denied", t("ws.path_denied", path=str(folder), why=why))
    workspace.check(real.relative_to(workspace.root).as_posix())  # no dotfile on the way
    if not real.is_dir():
        shown = real.relative_to(workspace.root).as_posix()
        raise WorkspaceError("not_found", t("ws.not_found", path=shown), {"path": shown})
    return Workspace(
        real, workspace.secrets, allow_hard_links=workspace.allow_hard_links, lock=workspace.lock
    )


@router.get(
    "/workspace/files",
    summary="List files and folders (sizes, modification times), sorted by path",
    params=(
        query_param("path", str, "a folder to list (default: the workspace)"),
        query_param("limit", bounded(0, MAX_LIST)),
        PROJECT,
    ),
    response=Listing,
    errors=(403, 404, 409),
)
async def list_files(request: web.Request) -> web.Response:
    limit = query_int(request, "limit", 1000, maximum=MAX_LIST)
    folder = request.query.get("path", "")
    entries, truncated = await (await _workspace(request)).listing(folder, limit)
    return json_response({"entries": [e.to_json() for e in entries], "truncated": truncated})


@router.get(
    FILE_PATH,
    summary="A file's content",
    params=(PATH, PROJECT),
    response=BINARY,
    response_type="application/octet-stream",
    errors=(403, 404, 409),
)
async def read_file(request: web.Request) -> web.StreamResponse:
    opened = await (await _workspace(request)).open(request.match_info["path"])
    try:
        entry = opened.entry
        name = quote(entry.path.rsplit("/", 1)[-1])
        response = web.StreamResponse(
            headers={
                "Last-Modified": entry.modified.strftime("%a, %d %b %Y %H:%M:%S GMT"),
                # Never rendered by a browser: an HTML or SVG file in the workspace must
                # not run as a page of the sidecar's own origin.
                "Content-Disposition": f"attachment; filename*=UTF-8''{name}",
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "sandbox",
            }
        )
        response.content_type = "application/octet-stream"  # a download, as documented
        response.content_length = entry.size
        await response.prepare(request)
        async for chunk in opened.chunks():
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        opened.close()


@router.put(
    FILE_PATH,
    summary="Write a file (the body is its content); folders on the way are created",
    params=(PATH, PROJECT),
    body=BINARY,
    body_type="application/octet-stream",
    response=Entry,
    errors=(403, 404, 409),
)
async def write_file(request: web.Request) -> web.Response:
    workspace = await _workspace(request)
    path = request.match_info["path"]
    workspace.check(path)  # refused before the body is read
    entry = await workspace.write(path, await read_bytes(request))
    return json_response(entry.to_json())


@router.delete(
    FILE_PATH,
    summary="Delete a file or an empty folder",
    params=(PATH, PROJECT),
    response=FileDeleted,
    errors=(403, 404, 409),
)
async def delete_file(request: web.Request) -> web.Response:
    path = request.match_info["path"]
    await (await _workspace(request)).delete(path)
    return json_response({"deleted": True, "path": path})


@router.post(
    "/workspace/uploads",
    summary="Upload files (multipart/form-data, one part per file) into a folder",
    params=(query_param("path", str, "the folder (default: the workspace)"), PROJECT),
    body=Upload,
    body_type="multipart/form-data",
    response=Uploaded,
    status=201,
    errors=(403, 404, 409),
)
async def upload(request: web.Request) -> web.Response:
    """All the files are written, or none (a bad name refuses the whole upload)."""
    workspace = await _workspace(request)
    folder = request.query.get("path", "")
    prefix = "/".join(workspace.check(folder)) + "/" if folder else ""
    files = await _read_parts(request)
    if not files:
        raise invalid(t("gw.upload_empty"), field="file")
    named: list[tuple[str, bytes]] = []
    for filename, data in files:
        parts = parts_of(filename)
        if len(parts) != 1:
            raise WorkspaceError("path_invalid", t("gw.upload_name", name=filename[:200]))
        named.append((prefix + parts[0], data))
    entries = await workspace.write_many(named)
    return json_response({"files": [e.to_json() for e in entries]}, 201)


async def _read_parts(request: web.Request) -> list[tuple[str, bytes]]:
    """The file parts of a multipart body, within ``gateway.max_body_bytes`` in all
    (counted as read: a chunked body has no Content-Length to refuse up front)."""
    if not request.content_type.startswith("multipart/"):
        raise invalid(t("gw.upload_not_multipart"))
    limit = request.app[MAX_BODY]
    out: list[tuple[str, bytes]] = []
    total = 0
    try:
        async with asyncio.timeout(request.app[READ_TIMEOUT]):
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader):
                    raise invalid(t("gw.upload_nested"))
                data = bytearray()
                while chunk := await part.read_chunk(CHUNK):
                    total += len(chunk)
                    if total > limit:
                        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=total)
                    data += chunk
                if part.filename is not None:
                    out.append((part.filename, bytes(data)))
    except TimeoutError:
        raise refusal("request_timeout", t("gw.read_timeout")) from None
    except (HttpProcessingError, ValueError, AssertionError, LookupError, RuntimeError):
        raise invalid(t("gw.upload_malformed")) from None
    return out


@router.get(
    "/workspace/export",
    summary="The workspace as a zip (within gateway.archive_max_bytes / archive_max_files)",
    response=BINARY,
    response_type="application/zip",
    errors=(404, 413),
)
async def export(request: web.Request) -> web.StreamResponse:
    path = await deps_of(request).archives.export()
    try:
        handle = await asyncio.to_thread(open, path, "rb")
    finally:
        await asyncio.to_thread(path.unlink, True)  # an open file stays readable
    try:
        size = os.fstat(handle.fileno()).st_size
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        response = web.StreamResponse(
            headers={"Content-Disposition": f'attachment; filename="workspace-{stamp}.zip"'}
        )
        response.content_type = "application/zip"
        response.content_length = size
        await response.prepare(request)
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        handle.close()


@router.post(
    "/workspace/import",
    summary="Unpack a zip (the body) into the workspace: checked first, then written all "
    "or nothing",
    body=BINARY,
    body_type="application/octet-stream",  # any type is read as zip
    response=Imported,
    errors=(403, 404, 409, 413),
)
async def import_zip(request: web.Request) -> web.Response:
    data = await read_bytes(request)
    written = await deps_of(request).archives.import_zip(data)
    return json_response({"imported": written, "count": len(written)})
