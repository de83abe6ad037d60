"""The ``openai`` SDK client shared by speech to text and the ``openai`` speech type:
built on first use in a worker thread (importing the SDK takes about a second and must
not stall the event loop), errors translated and redacted at this boundary."""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType
from typing import Any

from kernel.core.capped import read_capped
from kernel.core.errors import SpeechError
from kernel.providers.errors import translate


class SDKClient:
    def __init__(self, api_base: str, api_key: str, headers: dict[str, str], timeout: float):
        self._options: dict[str, Any] = {
            "api_key": api_key,
            "base_url": api_base or None,
            "default_headers": headers or None,
            "timeout": timeout,
            "max_retries": 0,  # the owner is told at once and can resend
        }
        self.secrets = [api_key, *headers.values()]
        self._client: Any = None
        self._sdk: ModuleType | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> tuple[Any, ModuleType]:
        async with self._lock:
            if self._client is None:
                self._sdk, self._client = await asyncio.to_thread(self._build)
        assert self._sdk is not None
        return self._client, self._sdk

    def _build(self) -> tuple[ModuleType, Any]:
        sdk = importlib.import_module("openai")
        return sdk, sdk.AsyncOpenAI(**self._options)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def speech_error(exc: Exception, sdk: ModuleType, secrets: list[str]) -> SpeechError:
    """A SpeechError whose text is status, code and the server's message, redacted."""
    error = translate(exc, provider="", secrets=secrets, sdk=sdk)
    cause = f"http_{error.status}" if error.status else error.code or "error"
    return SpeechError(str(error), cause)


# The SDKs' raw responses are asked for uncompressed: the cap then bounds what is held.
IDENTITY = {"Accept-Encoding": "identity"}


async def read_answer(response: Any, limit: int) -> bytes:
    """An SDK's streaming response (``with_streaming_response``) read with a running
    cap of ``limit`` bytes (:func:`read_capped`: BodyRefused past it)."""
    http = response.http_response
    return await read_capped(
        http.aiter_raw(),
        limit,
        declared=http.headers.get("content-length"),
        encoding=http.headers.get("content-encoding"),
    )
