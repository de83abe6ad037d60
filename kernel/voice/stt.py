"""Speech to text through an OpenAI-compatible ``audio/transcriptions`` endpoint
(``[stt]``, seed 004 Phase 6). Where the server reports what a transcription used
(OpenAI's ``usage``: ``tokens`` for the gpt-4o transcribe models, ``duration`` in
seconds for whisper-1), a ledger row with purpose ``speech`` is written through the
meter (provider ``stt``; its cost is unknown: ``[stt]`` has no prices)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from kernel.config import SttConfig
from kernel.core.capped import BodyRefused
from kernel.core.errors import SpeechError
from kernel.core.safejson import loads
from kernel.core.surrogates import mend
from kernel.core.usage import Usage
from kernel.spend import CallTag, Meter
from kernel.voice.client import IDENTITY, SDKClient, read_answer, speech_error

log = logging.getLogger(__name__)

LEDGER_NAME = "stt"  # the ledger's provider column for transcriptions
MAX_ANSWER = 4 * 1024 * 1024  # bytes of a transcription answer read (a transcript is text)


class Transcriber:
    def __init__(self, cfg: SttConfig, *, meter: Meter | None = None, channel: str = "") -> None:
        self.cfg = cfg
        self._sdk = SDKClient(cfg.api_base, cfg.api_key, cfg.headers, cfg.timeout)
        self.meter = meter  # None: nothing recorded (kernel check's probe)
        self.channel = channel

    async def transcribe(self, audio: bytes, filename: str, mime_type: str) -> str:
        """The transcript on one line (empty for silence). Raises SpeechError. The file
        name's extension tells the server the format (``.ogg`` for voice notes)."""
        client, sdk = await self._sdk.get()
        try:
            async with client.audio.transcriptions.with_streaming_response.create(
                model=self.cfg.model,
                file=(filename, audio, mime_type),
                extra_headers=IDENTITY,
            ) as response:
                raw = await read_answer(response, MAX_ANSWER)
        except BodyRefused as exc:
            raise SpeechError(f"the transcription answer is {exc}", "too_large") from None
        except Exception as exc:
            raise speech_error(exc, sdk, self._sdk.secrets) from None
        result = _answer(raw)
        await self._record(getattr(result, "usage", None))
        # A lone surrogate (valid in the server's JSON, not text) becomes U+FFFD here.
        return mend(" ".join(str(getattr(result, "text", "") or "").split()))

    async def _record(self, reported: Any) -> None:
        used = speech_usage(reported)
        if used is None or self.meter is None:
            return
        usage, seconds = used
        tag = CallTag("speech", channel=self.channel)
        try:
            await self.meter.record(LEDGER_NAME, self.cfg.model, usage, tag, seconds=seconds)
        except Exception as exc:  # the transcript matters more than its record
            log.warning("could not record a transcription's usage: %s", type(exc).__name__)

    async def aclose(self) -> None:
        await self._sdk.aclose()


def _answer(raw: bytes) -> Any:
    """The JSON answer with attribute access, as the SDK's model has it; an answer that
    is not a JSON object has no text (as the SDK then returns a bare string)."""
    try:
        data = loads(raw)
    except ValueError:
        return SimpleNamespace()
    return _attributes(data) if isinstance(data, dict) else SimpleNamespace()


def _attributes(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{str(k): _attributes(v) for k, v in value.items()})
    return value


def speech_usage(reported: Any) -> tuple[Usage, float | None] | None:
    """OpenAI's transcription ``usage`` as (tokens, seconds); None when none was
    reported or its shape is unknown."""
    kind = getattr(reported, "type", None)
    if kind == "tokens":
        tokens = (getattr(reported, name, 0) for name in ("input_tokens", "output_tokens"))
        fresh, output = (n if isinstance(n, int) and n >= 0 else 0 for n in tokens)
        return Usage(input=fresh, output=output), None
    if kind == "duration":
        seconds = getattr(reported, "seconds", None)
        if isinstance(seconds, int | float) and seconds >= 0:
            return Usage(), float(seconds)
    return None
