"""Finding ffmpeg and turning any audio it can read into OGG/Opus, Telegram's voice-note
format.

ffmpeg is looked for in this order: ``[tts] ffmpeg`` (a path, or a command name on PATH:
if set, only that), ``ffmpeg`` on PATH, then the binary shipped inside the ``imageio-ffmpeg`` wheel
when that package is installed. Seed 004 names static-ffmpeg instead; it downloads its
binary on first use, and Kernel never downloads anything at run time (offline servers
cannot), so it is not used.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import os
from pathlib import Path

from kernel.config.secrets import child_env
from kernel.core.errors import SpeechError
from kernel.core.platform import which

# Mono Opus at 48 kbit/s (seed 004): clear speech, about 6 KB per second.
OPUS_ARGS = ("-vn", "-ac", "1", "-c:a", "libopus", "-b:a", "48k", "-f", "ogg")


def find_ffmpeg(explicit: str = "") -> str | None:
    """The ffmpeg executable to use, or None. Blocking (filesystem, an import): call it
    off the event loop."""
    if explicit:
        if os.sep not in explicit:  # a command name: looked up on PATH
            return which(explicit)
        return explicit if _is_executable(explicit) else None
    found = which("ffmpeg")
    if found:
        return found
    if importlib.util.find_spec("imageio_ffmpeg") is None:
        return None
    try:
        bundled = importlib.import_module("imageio_ffmpeg").get_ffmpeg_exe()
    except Exception:  # RuntimeError when the wheel has no binary for this platform
        return None
    return str(bundled) if bundled and _is_executable(str(bundled)) else None


def _is_executable(path: str) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


async def to_ogg_opus(audio: bytes, ffmpeg: str, time_limit: float) -> bytes:
    """Convert through pipes (no temporary files); the child is killed on timeout or
    cancellation."""
    try:
        proc = await asyncio.create_subprocess_exec(
            ffmpeg,
            "-hide_banner",
            "-loglevel",
            "error",
            "-i",
            "pipe:0",
            *OPUS_ARGS,
            "pipe:1",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=child_env({}),  # no KERNEL_* secrets for a converter
        )
    except OSError as exc:
        raise SpeechError(f"ffmpeg cannot run ({type(exc).__name__})", "ffmpeg_missing") from None
    try:
        async with asyncio.timeout(time_limit):
            out, err = await proc.communicate(audio)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        if isinstance(exc, TimeoutError):
            raise SpeechError(f"ffmpeg took over {time_limit:g}s", "ffmpeg_timeout") from None
        raise
    if proc.returncode != 0 or not out:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        detail = lines[-1][:200] if lines else "no output"
        raise SpeechError(f"ffmpeg exited with {proc.returncode}: {detail}", "ffmpeg_failed")
    return out
