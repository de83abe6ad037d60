"""The system instructions a delegated CLI gets (issue 19, seed 003).

In this order: ``[cli.<name>] instructions``, then ``instructions_file`` (relative to
config.toml's folder, read at each delegation so an edit counts from the next one), then
the chat's persona and project bodies. The configured part is the owner's and is never
cut: a file that is missing, unreadable, not UTF-8 or over :data:`FILE_LIMIT` bytes, or
configured text over :data:`INSTRUCTIONS_LIMIT` characters or holding a NUL, refuses
the delegation with a :class:`ToolError` naming the file and the key. The persona and
project fill what is left of :data:`INSTRUCTIONS_LIMIT` and are cut with a visible note
past it (a NUL in them is dropped). Logs say sizes only.

How the text reaches each CLI is :func:`kernel.delegate.argv.build_argv`'s part.
"""

from __future__ import annotations

import asyncio
import logging
import stat
from collections.abc import Sequence
from pathlib import Path

from kernel.config.cli import CLIConfig
from kernel.core.errors import ToolError
from kernel.core.i18n import t
from kernel.profiles import Profile

log = logging.getLogger(__name__)

INSTRUCTIONS_LIMIT = 16_000  # characters in all, configured + persona + project
FILE_LIMIT = 32 * 1024  # bytes of instructions_file
SEPARATOR = "\n\n"


async def instructions_for(
    cli: str, cfg: CLIConfig, base_dir: Path, profiles: Sequence[Profile] = ()
) -> str:
    """The whole text for one delegation ("" when there is none: argv as without)."""
    configured = await configured_text(cli, cfg, base_dir)
    parts = [configured] if configured else []
    room = INSTRUCTIONS_LIMIT - len(configured)
    sizes: dict[str, int] = {}
    cut = 0
    for profile in profiles:
        body = profile.body.replace("\x00", "").strip()  # no argv element holds a NUL
        if not body:
            continue
        heading = t(f"delegate.instructions_{profile.kind}", name=profile.name)
        text = heading + "\n" + body
        sizes[profile.kind] = len(body)
        room -= len(SEPARATOR) if parts else 0
        if len(text) > room:
            longest = "\n" + t("delegate.instructions_cut", count=len(text))
            keep = room - len(longest)
            if keep > len(heading):
                cut += len(text) - keep
                text = text[:keep] + "\n" + t("delegate.instructions_cut", count=len(text) - keep)
            else:  # no room left for any of its body
                cut += len(text)
                text = ""
        if text:
            parts.append(text)
            room -= len(text)
    whole = SEPARATOR.join(parts)
    if whole:
        log.info(
            "delegation instructions: cli=%s configured=%d persona=%d project=%d "
            "total=%d cut=%d chars",
            cli,
            len(configured),
            sizes.get("persona", 0),
            sizes.get("project", 0),
            len(whole),
            cut,
        )
    return whole


async def configured_text(cli: str, cfg: CLIConfig, base_dir: Path) -> str:
    """``instructions`` then ``instructions_file``'s text; ToolError when unusable."""
    parts = [cfg.instructions.strip()]
    if cfg.instructions_file.strip():
        parts.append(await asyncio.to_thread(read_file, cli, cfg.instructions_file, base_dir))
    text = SEPARATOR.join(p for p in parts if p)
    if "\x00" in text:  # no argv element can hold it; the owner's text is never altered
        raise ToolError(t("delegate.instructions_nul", cli=cli))
    if len(text) > INSTRUCTIONS_LIMIT:
        raise ToolError(
            t(
                "delegate.instructions_too_long",
                cli=cli,
                size=len(text),
                limit=INSTRUCTIONS_LIMIT,
            )
        )
    return text


def read_file(cli: str, value: str, base_dir: Path) -> str:
    """The file's text (UTF-8, a BOM dropped, stripped); ToolError naming it and the key."""
    path = Path(value.strip()).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    key = f"cli.{cli}.instructions_file"

    def refuse(detail: str) -> ToolError:
        return ToolError(t("delegate.instructions_unreadable", key=key, path=path, detail=detail))

    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block, a folder has no text
            raise refuse(t("delegate.instructions_not_file"))
        with path.open("rb") as handle:
            data = handle.read(FILE_LIMIT + 1)
    except OSError as exc:
        raise refuse(exc.strerror or type(exc).__name__) from None
    if len(data) > FILE_LIMIT:
        raise refuse(t("delegate.instructions_file_big", limit=FILE_LIMIT))
    try:
        return data.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise refuse(t("delegate.instructions_not_utf8")) from None
