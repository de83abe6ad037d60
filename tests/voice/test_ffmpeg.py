"""ffmpeg resolution order and the conversion to OGG/Opus, with a real ffmpeg binary."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kernel.core.errors import SpeechError
from kernel.voice.ffmpeg import find_ffmpeg, to_ogg_opus
from kernel.voice.ogg import opus_duration
from tests.voice.audio import assert_ogg_opus, ffmpeg_exe, tone


def fake_ffmpeg(folder: Path, marker: Path) -> Path:
    """An ``ffmpeg`` that records that it ran, then runs the real one."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "ffmpeg"
    script.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec "{ffmpeg_exe()}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_an_explicit_path_is_the_only_one_tried(tmp_path: Path) -> None:
    assert find_ffmpeg("/nonexistent/ffmpeg") is None  # imageio's binary is not a fallback
    not_executable = tmp_path / "ffmpeg"
    not_executable.write_text("")
    assert find_ffmpeg(str(not_executable)) is None
    assert find_ffmpeg(ffmpeg_exe()) == ffmpeg_exe()


@pytest.mark.posix
async def test_ffmpeg_on_path_comes_before_the_bundled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    script = fake_ffmpeg(tmp_path / "bin", marker)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    found = find_ffmpeg()
    assert found == str(script)
    ogg = await to_ogg_opus(tone("mp3"), found, time_limit=30)
    assert marker.exists()
    assert_ogg_opus(ogg, tmp_path)


def test_without_ffmpeg_on_path_the_imageio_binary_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no ffmpeg here
    monkeypatch.delenv("IMAGEIO_FFMPEG_EXE", raising=False)
    assert find_ffmpeg() == ffmpeg_exe()
    assert "imageio_ffmpeg" in ffmpeg_exe()


async def test_mp3_becomes_ogg_opus_of_the_same_length(tmp_path: Path) -> None:
    ogg = await to_ogg_opus(tone("mp3", seconds=2.0), ffmpeg_exe(), time_limit=30)
    assert_ogg_opus(ogg, tmp_path)
    assert 1.9 <= opus_duration(ogg) <= 2.1  # audio length, not time taken


async def test_conversion_failures_are_speech_errors_with_a_cause() -> None:
    with pytest.raises(SpeechError) as missing:
        await to_ogg_opus(tone("mp3"), "/nonexistent/ffmpeg", time_limit=30)
    assert missing.value.cause == "ffmpeg_missing"
    with pytest.raises(SpeechError) as garbage:
        await to_ogg_opus(b"this is not audio", ffmpeg_exe(), time_limit=30)
    assert garbage.value.cause == "ffmpeg_failed"
    assert "ffmpeg exited with" in str(garbage.value)


@pytest.mark.posix
async def test_a_hung_ffmpeg_is_killed_at_the_timeout(tmp_path: Path) -> None:
    hang = tmp_path / "ffmpeg"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    with pytest.raises(SpeechError) as caught:
        await to_ogg_opus(b"x", str(hang), time_limit=0.2)
    assert caught.value.cause == "ffmpeg_timeout"


def test_opus_duration_rejects_what_is_not_ogg_opus() -> None:
    with pytest.raises(ValueError, match="Ogg"):
        opus_duration(tone("mp3"))
    ogg = tone("ogg")
    with pytest.raises(ValueError, match="truncated"):
        opus_duration(ogg[: len(ogg) - 10])
    vorbis_like = ogg.replace(b"OpusHead", b"OpusHeaX", 1)
    with pytest.raises(ValueError, match="OpusHead"):
        opus_duration(vorbis_like)
    assert 0.9 <= opus_duration(ogg) <= 1.1
