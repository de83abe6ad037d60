"""Speech to text through an OpenAI-compatible ``audio/transcriptions`` endpoint
(``[stt]``, seed 004 Phase 6). Where the server reports what a transcription used
(OpenAI's ``usage``: ``tokens`` for the gpt-4o transcribe models, ``duration`` in
seconds for whisper-1), a ledger row with purpose ``speech`` is written through the
meter (provider ``stt``; its cost is unknown: ``[stt]`` has no prices)."""

from __future__ import annotations

import logging
from typing import Any

from kernel.config import SttConfig
from kernel.core.surrogates import mend
from kernel.core.usage import Usage
from kernel.spend import CallTag, Meter
from kernel.voice.client import SDKClient, speech_error

log = logging.getLogger(__name__)

LEDGER_NAME = "stt"  # the ledger's provider column for transcriptions


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
            result = await client.audio.transcriptions.create(
                model=self.cfg.model, file=(filename, audio, mime_type)
            )
        except Exception as exc:
            raise speech_error(exc, sdk, self._sdk.secrets) from None
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
