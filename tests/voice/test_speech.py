"""Speech to text and text to speech against the OpenAI simulator (the real openai SDK),
edge-tts against a local proxy that refuses it, and ffmpeg for real."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel.config import SttConfig, TtsConfig
from kernel.core.errors import SpeechError
from kernel.core.i18n import set_language
from kernel.voice.stt import Transcriber
from kernel.voice.tts import Synthesizer
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error
from tests.voice.audio import assert_ogg_opus, ffmpeg_exe, tone

KEY = "sk-voice-SECRET-0123456789abcdef"
HEADER_SECRET = "hdr-SECRET-0123456789"


class RefusingProxy:
    """An HTTP proxy on loopback that records each CONNECT and answers 502, as a proxy
    does when it cannot reach the target: edge-tts fails fast and never leaves this
    machine."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> RefusingProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        self.targets.append(request.split(b"\r\n", 1)[0].decode())
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()


@pytest.fixture
async def osim() -> AsyncIterator[OpenAISim]:
    async with OpenAISim() as sim:
        yield sim


def openai_tts(sim: OpenAISim, **kw: object) -> TtsConfig:
    cfg = TtsConfig(
        type="openai",
        voice="nova",
        api_base=sim.base_url,
        api_key=KEY,
        model="tts-sim",
        headers={"X-Secret": HEADER_SECRET},
        ffmpeg=ffmpeg_exe(),
    )
    for name, value in kw.items():
        setattr(cfg, name, value)
    return cfg


def failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "text to speech failed" in r.getMessage()
    ]


async def test_transcription_uploads_the_audio_and_returns_one_line(osim: OpenAISim) -> None:
    osim.enqueue_transcription("  明天 提醒我\n开会  ")
    stt = Transcriber(SttConfig(api_base=osim.base_url, api_key=KEY, model="whisper-sim"))
    try:
        audio = tone("ogg")
        assert await stt.transcribe(audio, "voice.ogg", "audio/ogg") == "明天 提醒我 开会"
    finally:
        await stt.aclose()
    assert osim.audio_uploads == [audio]
    request = osim.requests[-1]
    assert request.form["model"] == "whisper-sim"
    assert request.form["file"]["filename"] == "voice.ogg"
    assert request.headers["Authorization"] == f"Bearer {KEY}"


async def test_transcription_errors_are_redacted_speech_errors(osim: OpenAISim) -> None:
    osim.enqueue_transcription(Error(500, "server_error", f"upstream rejected key {KEY}"))
    stt = Transcriber(SttConfig(api_base=osim.base_url, api_key=KEY, headers={"X-K": KEY}))
    try:
        with pytest.raises(SpeechError) as caught:
            await stt.transcribe(b"OggS", "voice.ogg", "audio/ogg")
    finally:
        await stt.aclose()
    assert caught.value.cause == "http_500"
    assert "500 server_error: upstream rejected key" in str(caught.value)
    assert KEY not in str(caught.value) and KEY[-12:] not in str(caught.value)


async def test_unreachable_stt_is_a_connection_error() -> None:
    stt = Transcriber(SttConfig(api_base="http://127.0.0.1:9/v1", api_key=KEY, timeout=2.0))
    try:
        with pytest.raises(SpeechError) as caught:
            await stt.transcribe(b"OggS", "voice.ogg", "audio/ogg")
    finally:
        await stt.aclose()
    assert caught.value.cause == "connection_error"


async def test_openai_speech_becomes_an_ogg_opus_voice_note(
    osim: OpenAISim, tmp_path: Path
) -> None:
    osim.speech_audio = tone("mp3", seconds=1.5)
    tts = Synthesizer(openai_tts(osim, format="mp3"))
    try:
        note = await tts.speak("你好，世界")
    finally:
        await tts.aclose()
    assert note is not None
    assert_ogg_opus(note.ogg, tmp_path)
    assert 1.4 <= note.seconds <= 1.6
    body = osim.requests[-1].body
    assert body == {
        "model": "tts-sim",
        "voice": "nova",
        "input": "你好，世界",
        "response_format": "mp3",
    }
    assert osim.requests[-1].headers["X-Secret"] == HEADER_SECRET


async def test_the_simulators_stock_silent_mp3_converts_too(
    osim: OpenAISim, tmp_path: Path
) -> None:
    tts = Synthesizer(openai_tts(osim))
    try:
        note = await tts.speak("hi")
    finally:
        await tts.aclose()
    assert note is not None
    assert_ogg_opus(note.ogg, tmp_path)


async def test_speech_failures_warn_once_per_cause(
    osim: OpenAISim, caplog: pytest.LogCaptureFixture
) -> None:
    osim.speech_audio = Error(500, "server_error", f"bad key {KEY}")
    tts = Synthesizer(openai_tts(osim))
    try:
        assert await tts.speak("one") is None
        assert await tts.speak("two") is None
        osim.speech_audio = b"not audio at all"
        assert await tts.speak("three") is None
        assert await tts.speak("four") is None
    finally:
        await tts.aclose()
    logged = failures(caplog)
    assert len(logged) == 2, logged
    assert "http_500" in logged[0] and "ffmpeg_failed" in logged[1]
    assert not any(KEY in m or KEY[-12:] in m for m in logged)
    assert not any("one" in m.split("(")[0] for m in logged)  # no reply text in the log


async def test_missing_ffmpeg_is_found_before_paying_for_speech(
    osim: OpenAISim, caplog: pytest.LogCaptureFixture
) -> None:
    tts = Synthesizer(openai_tts(osim, ffmpeg="/nonexistent/ffmpeg"))
    try:
        assert await tts.speak("one") is None
        assert await tts.speak("two") is None
    finally:
        await tts.aclose()
    logged = failures(caplog)
    assert len(logged) == 1 and "ffmpeg_missing" in logged[0]
    assert "[tts] ffmpeg = /nonexistent/ffmpeg" in logged[0]
    assert osim.requests == []


async def test_edge_tts_failure_path_never_leaves_the_machine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Microsoft's service is unreachable here, so only edge's failure path is tested:
    edge-tts is pointed at a loopback proxy that refuses every CONNECT."""
    async with RefusingProxy() as proxy:
        proxy_url = f"http://user:{KEY}@127.0.0.1:{proxy.port}"
        tts = Synthesizer(TtsConfig(type="edge", proxy=proxy_url, timeout=5.0, ffmpeg=ffmpeg_exe()))
        assert await tts.speak("你好") is None
        assert await tts.speak("再见") is None
    assert proxy.targets and all(
        t.startswith("CONNECT speech.platform.bing.com:443") for t in proxy.targets
    )
    logged = failures(caplog)
    assert len(logged) == 1 and "edge-tts failed (ClientHttpProxyError)" in logged[0]
    assert KEY not in logged[0]


async def test_a_malformed_edge_voice_name_fails_without_a_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with RefusingProxy() as proxy:
        cfg = TtsConfig(type="edge", voice="no such voice", proxy=f"http://127.0.0.1:{proxy.port}")
        cfg.ffmpeg = ffmpeg_exe()
        assert await Synthesizer(cfg).speak("hi") is None
    assert proxy.targets == []
    assert "edge-tts failed (ValueError)" in failures(caplog)[0]


@pytest.mark.parametrize(
    ("language", "words"),
    [("zh", "需要语音扩展（edge-tts）"), ("en", "needs the voice extra (edge-tts)")],
)
async def test_edge_without_the_voice_extra_says_what_to_install(
    language: str, words: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed without ``--extra voice``, edge-tts cannot be imported: no speech, and the
    one warning names the package and the command that installs it."""
    monkeypatch.setitem(sys.modules, "edge_tts", None)  # what an install without it does
    set_language(language)
    async with RefusingProxy() as proxy:
        cfg = TtsConfig(type="edge", proxy=f"http://127.0.0.1:{proxy.port}", ffmpeg=ffmpeg_exe())
        tts = Synthesizer(cfg)
        with pytest.raises(SpeechError) as info:
            await tts.synthesize("hi")
        assert await tts.speak("hi") is None
        assert await tts.speak("again") is None
    assert proxy.targets == []
    assert info.value.cause == "extra_missing"
    assert words in str(info.value) and "uv sync --extra voice" in str(info.value)
    assert "kernel-assistant[voice]" in str(info.value)
    [logged] = failures(caplog)
    assert "uv sync --extra voice" in logged
