"""Speech to text through an OpenAI-compatible ``audio/transcriptions`` endpoint
(``[stt]``, seed 004 Phase 6)."""

from __future__ import annotations

from kernel.config import SttConfig
from kernel.voice.client import SDKClient, speech_error


class Transcriber:
    def __init__(self, cfg: SttConfig) -> None:
        self.cfg = cfg
        self._sdk = SDKClient(cfg.api_base, cfg.api_key, cfg.headers, cfg.timeout)

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
        return " ".join(str(getattr(result, "text", "") or "").split())

    async def aclose(self) -> None:
        await self._sdk.aclose()
