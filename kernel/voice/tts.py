"""Text to speech for replies to voice (``[tts]``): ``edge`` (the edge-tts package, which
talks to Microsoft's online service) or ``openai`` (an OpenAI-compatible
``audio/speech`` endpoint), converted to OGG/Opus by ffmpeg.

Speech is an extra: any failure means the owner gets the reply as text only, so
:meth:`Synthesizer.speak` never raises; it logs one warning per cause (a missing ffmpeg
is reported once, not on every reply). ``edge`` needs the ``voice`` extra
(``uv sync --extra voice``), imported only when it speaks: :func:`extra_missing` says
what to install, here and at ``kernel check``."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import math
from dataclasses import dataclass

from kernel.config import TtsConfig
from kernel.core.capped import BodyRefused, read_capped
from kernel.core.errors import SpeechError
from kernel.core.i18n import t
from kernel.core.redact import redact_text
from kernel.voice.client import IDENTITY, SDKClient, read_answer, speech_error
from kernel.voice.ffmpeg import find_ffmpeg, to_ogg_opus
from kernel.voice.ogg import opus_duration

log = logging.getLogger(__name__)
# The most audio a speech service may send for one reply (minutes of speech, even as
# WAV): the answer is read in chunks and refused past it.
MAX_AUDIO = 25 * 1024 * 1024


def extra_missing(cfg: TtsConfig) -> str:
    """What to install when ``cfg`` needs the ``voice`` extra and it is not installed;
    "" when nothing is missing."""
    if cfg.type == "edge" and importlib.util.find_spec("edge_tts") is None:
        return t("voice.extra_missing")
    return ""


@dataclass(slots=True)
class VoiceNote:
    ogg: bytes  # OGG/Opus
    seconds: float


class Synthesizer:
    def __init__(self, cfg: TtsConfig) -> None:
        self.cfg = cfg
        self._sdk = SDKClient(cfg.api_base, cfg.api_key, cfg.headers, cfg.timeout)
        self.secrets = [*self._sdk.secrets, cfg.proxy]
        self.warned: set[str] = set()

    async def speak(self, text: str) -> VoiceNote | None:
        """``text`` as a voice note, or None (after a warning, once per cause)."""
        try:
            return await self.synthesize(text)
        except SpeechError as exc:
            if exc.cause not in self.warned:
                self.warned.add(exc.cause)
                detail = redact_text(str(exc), self.secrets)
                log.warning(
                    "text to speech failed (%s: %s); replying in text only (logged once)",
                    exc.cause,
                    detail,
                )
            else:
                log.debug("text to speech failed again (%s)", exc.cause)
            return None

    async def synthesize(self, text: str) -> VoiceNote:
        """Raises SpeechError. ffmpeg is found first, so no speech is paid for that
        could not be converted."""
        if missing := extra_missing(self.cfg):
            raise SpeechError(missing, "extra_missing")
        ffmpeg = await asyncio.to_thread(find_ffmpeg, self.cfg.ffmpeg)
        if ffmpeg is None:
            where = f"[tts] ffmpeg = {self.cfg.ffmpeg}" if self.cfg.ffmpeg else "PATH"
            raise SpeechError(
                f"no usable ffmpeg ({where}): install ffmpeg (apt install ffmpeg) "
                "or set [tts] ffmpeg",
                "ffmpeg_missing",
            )
        audio = await (self._openai(text) if self.cfg.type == "openai" else self._edge(text))
        if not audio:
            raise SpeechError("the speech service returned no audio", "no_audio")
        ogg = await to_ogg_opus(audio, ffmpeg, self.cfg.timeout)
        try:
            seconds = opus_duration(ogg)
        except ValueError as exc:
            raise SpeechError(f"ffmpeg output is not Ogg/Opus ({exc})", "ffmpeg_failed") from None
        return VoiceNote(ogg, seconds)

    async def _openai(self, text: str) -> bytes:
        client, sdk = await self._sdk.get()
        try:
            async with client.audio.speech.with_streaming_response.create(
                model=self.cfg.model,
                voice=self.cfg.voice,
                input=text,
                response_format=self.cfg.format,
                extra_headers=IDENTITY,
            ) as response:
                return await read_answer(response, MAX_AUDIO)
        except BodyRefused as exc:
            raise SpeechError(f"the speech service's answer is {exc}", "too_large") from None
        except Exception as exc:
            raise speech_error(exc, sdk, self.secrets) from None

    async def _edge(self, text: str) -> bytes:
        try:
            edge_tts = await asyncio.to_thread(importlib.import_module, "edge_tts")
        except ImportError:
            raise SpeechError(t("voice.extra_missing"), "extra_missing") from None
        seconds = max(1, math.ceil(self.cfg.timeout))
        try:
            communicate = edge_tts.Communicate(  # ValueError for a malformed voice name
                text,
                self.cfg.voice,
                proxy=self.cfg.proxy or None,
                connect_timeout=seconds,
                receive_timeout=seconds,
            )
            async with asyncio.timeout(self.cfg.timeout):
                audio = (
                    bytes(chunk["data"])
                    async for chunk in communicate.stream()
                    if chunk.get("type") == "audio" and chunk.get("data")
                )
                return await read_capped(audio, MAX_AUDIO)
        except BodyRefused as exc:
            raise SpeechError(f"edge-tts sent audio {exc}", "too_large") from None
        except TimeoutError:
            raise SpeechError(f"edge-tts took over {self.cfg.timeout:g}s", "edge_timeout") from None
        except Exception as exc:  # aiohttp and edge-tts errors; their text may hold the proxy
            kind = type(exc).__name__
            raise SpeechError(f"edge-tts failed ({kind})", f"edge_{kind}") from None

    async def aclose(self) -> None:
        await self._sdk.aclose()
