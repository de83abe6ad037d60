"""Real audio for the voice tests, made with the ffmpeg binary that ships inside the
imageio-ffmpeg wheel (a dev dependency; the test machines have no system ffmpeg)."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import imageio_ffmpeg


def ffmpeg_exe() -> str:
    return str(imageio_ffmpeg.get_ffmpeg_exe())


@functools.cache
def tone(fmt: str, seconds: float = 1.0) -> bytes:
    """A 440 Hz tone: ``"ogg"`` is OGG/Opus like a Telegram voice note, ``"mp3"`` what a
    speech endpoint returns."""
    codec = {"ogg": ["-c:a", "libopus", "-b:a", "32k", "-f", "ogg"], "mp3": ["-f", "mp3"]}[fmt]
    source = f"sine=frequency=440:duration={seconds}"
    return subprocess.run(
        [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", source]
        + ["-ac", "1", *codec, "pipe:1"],
        check=True,
        capture_output=True,
        timeout=30,
    ).stdout


def ogg_packets(data: bytes) -> list[bytes]:
    """The first packet of each Ogg page, checked independently of Kernel's own reader."""
    assert data[:4] == b"OggS", "not an Ogg stream"
    packets, pos = [], 0
    while pos < len(data):
        assert data[pos : pos + 4] == b"OggS", f"broken page at {pos}"
        count = data[pos + 26]
        sizes = data[pos + 27 : pos + 27 + count]
        start = pos + 27 + count
        packets.append(data[start : start + sizes[0]] if sizes else b"")
        pos = start + sum(sizes)
    return packets


def assert_ogg_opus(data: bytes, tmp: Path) -> None:
    """OggS pages, an OpusHead packet first, OpusTags second, and ffmpeg decodes it all."""
    packets = ogg_packets(data)
    assert packets[0].startswith(b"OpusHead") and packets[1].startswith(b"OpusTags")
    path = tmp / "check.ogg"
    path.write_bytes(data)
    probe = subprocess.run(
        [ffmpeg_exe(), "-hide_banner", "-v", "error", "-i", str(path), "-f", "null", "-"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.returncode == 0 and probe.stderr == "", probe.stderr
    info = subprocess.run(
        [ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True, text=True
    ).stderr
    assert "Audio: opus" in info and "mono" in info, info
