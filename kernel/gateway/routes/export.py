"""``GET /agent/export`` (issue 40): the owner's data in open formats as one zip download,
the same files ``kernel export`` writes (:mod:`kernel.backup.export`), read from a
snapshot of kernel.db on a read-only connection in a thread.

The zip is built in a private folder of the data directory (0700, the same disk as the
data, never a second copy in memory) and removed once sent. Served as a download like
an artifact: ``Content-Disposition: attachment``, ``nosniff``, a sandbox CSP, no cache.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from aiohttp import web

from kernel.gateway.api import Router, deps_of, refusal

router = Router("export", "The owner's data in open formats, as one download")

BINARY = bytes  # documented as {"type": "string", "format": "binary"}
CHUNK = 1 << 16


@router.get(
    "/agent/export",
    summary="Memories and sessions (Markdown, JSON Lines), jobs and usage (CSV) as a zip",
    response=BINARY,
    response_type="application/zip",
    errors=(500,),
)
async def download(request: web.Request) -> web.StreamResponse:
    from kernel.backup.export import ExportError, export_zip

    deps = deps_of(request)
    config = deps.config
    now = datetime.now(UTC)
    tz = ZoneInfo(config.general.timezone)
    made = functools.partial(tempfile.mkdtemp, prefix=".export-", dir=config.data_dir)
    work = Path(await asyncio.to_thread(made))
    try:
        try:
            path, _ = await asyncio.to_thread(export_zip, config.db_path, work, tz, now)
        except ExportError as exc:  # a full disk, say: named, with the fix
            raise refusal("export_failed", str(exc)) from None
        name = f"kernel-export-{now.astimezone(tz):%Y%m%d-%H%M%S}.zip"
        response = web.StreamResponse(
            headers={
                "Content-Disposition": f'attachment; filename="{name}"',
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "sandbox",
                "Cache-Control": "no-store",
            }
        )
        response.content_type = "application/zip"
        response.content_length = path.stat().st_size
        await response.prepare(request)
        with path.open("rb") as data:
            while chunk := await asyncio.to_thread(data.read, CHUNK):
                await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        await asyncio.to_thread(shutil.rmtree, work, True)
