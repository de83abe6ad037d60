"""``/agent/artifacts`` (issue 23, seed 001): the files a session's turns made or
received — CLI outputs, long tool outputs, the owner's downloads — and each file itself.

A file is served only through :class:`kernel.workspace.artifacts.ArtifactFiles` (in its
folder of the data directory, no link on the way, a regular file of the recorded size),
always as a download: ``application/octet-stream``, ``Content-Disposition: attachment``
with a safe name, ``nosniff`` and a sandbox CSP, so nothing in it runs as a page of the
sidecar's origin. A file retention removed (or found gone) is ``410 artifact_removed``.
"""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from kernel.core.errors import CodedError
from kernel.gateway.api import (
    Router,
    bounded,
    coded,
    deps_of,
    invalid,
    json_response,
    not_found,
    path_param,
    query_int,
    query_param,
)
from kernel.gateway.schema import Shape
from kernel.store.artifacts import MAX_LIMIT, Artifact
from kernel.workspace.artifacts import REMOVED, ArtifactFiles, safe_name

router = Router("artifacts", "Files a session's turns made: CLI outputs, tool outputs, downloads")

MAX_SESSION = 2**62
BINARY = bytes  # documented as {"type": "string", "format": "binary"}
ARTIFACT_ID = path_param("artifact_id", "the artifact's id (a number)")


class ArtifactInfo(Shape):
    """``kind``: cli_output, tool_output or download; ``removed``: retention deleted the
    file (or it was found gone), at ``removed_at``."""

    id: int
    session_id: int | None = None
    kind: str
    name: str
    size: int
    sha256: str | None = None
    created_at: str
    removed: bool
    removed_at: str | None = None


class ArtifactList(Shape):
    items: list[ArtifactInfo]


@router.get(
    "/agent/artifacts",
    summary="A session's artifacts (files its turns made or received), newest first",
    params=(
        query_param("session_id", bounded(0, MAX_SESSION), "the session (the N of chat-N)"),
        query_param("limit", bounded(1, MAX_LIMIT), f"how many, newest first ({MAX_LIMIT})"),
    ),
    response=ArtifactList,
    errors=(400,),
)
async def list_artifacts(request: web.Request) -> web.Response:
    if "session_id" not in request.query:
        raise invalid("session_id is required: GET /agent/artifacts?session_id=N")
    session = query_int(request, "session_id", 0, minimum=0, maximum=MAX_SESSION)
    limit = query_int(request, "limit", MAX_LIMIT, minimum=1, maximum=MAX_LIMIT)
    found = await deps_of(request).artifacts.list(session, limit)
    return json_response({"items": [a.as_json() for a in found]})


@router.get(
    "/agent/artifacts/{artifact_id}",
    summary="An artifact's file, as a download (refused once retention removed it)",
    params=(ARTIFACT_ID,),
    response=BINARY,
    response_type="application/octet-stream",
    errors=(403, 404, 409, 410),
)
async def download(request: web.Request) -> web.StreamResponse:
    deps = deps_of(request)
    raw = request.match_info["artifact_id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise not_found("artifact", raw)
    artifact = await deps.artifacts.get(int(raw))
    if artifact is None:
        raise not_found("artifact", raw)
    files = ArtifactFiles(deps.config.data_dir, deps.config.general.retention_days)
    try:
        opened = await files.open(artifact)
    except CodedError as exc:
        if exc.code == REMOVED and not artifact.removed:  # found gone: say so from now on
            await deps.artifacts.mark_removed([artifact.path])
        raise coded(exc) from None
    try:
        response = web.StreamResponse(
            headers={
                "Content-Disposition": disposition(artifact),
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "sandbox",
                "Cache-Control": "no-store",
            }
        )
        response.content_type = "application/octet-stream"
        response.content_length = opened.entry.size
        await response.prepare(request)
        async for chunk in opened.chunks():
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        opened.close()


def disposition(artifact: Artifact) -> str:
    """``attachment`` with the name as RFC 6266 allows: an ASCII ``filename`` with
    anything unsafe replaced, and the whole name as UTF-8 in ``filename*``."""
    name = safe_name(artifact.name) or f"artifact-{artifact.id}"
    plain = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\%;' else "_" for ch in name)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"
