"""An OpenAI-compatible ``/v1/embeddings`` client (issue 39): OpenAI, a local Ollama or
llama.cpp server. Loaded only when ``[memory.embeddings]`` is configured.

``POST {base_url}/embeddings`` with ``{"model", "input": [texts], "encoding_format":
"float"}`` (and ``dimensions`` when set); the answer's ``data[i].embedding`` in
``index`` order, made unit length, and ``usage.prompt_tokens`` (None when the server
reports none)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from kernel.config import EmbeddingsConfig
from kernel.core.errors import KernelError
from kernel.core.safejson import loads

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_ANSWER = 64 * 1024 * 1024  # bytes of one answer read (2048 vectors of 3072 floats fit)


class EmbeddingError(KernelError):
    """The endpoint did not give the vectors; ``transient``: worth another try."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True, slots=True)
class Embedded:
    vectors: list[list[float]]
    tokens: int | None  # as the server reported, None when it did not


class EmbeddingsClient:
    def __init__(self, cfg: EmbeddingsConfig) -> None:
        self.cfg = cfg
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        self._http = httpx.AsyncClient(headers=headers, trust_env=False)
        self.retry_delay = 1.0  # the first backoff between tries, doubled

    async def embed(self, texts: Sequence[str], timeout: float) -> Embedded:  # noqa: ASYNC109
        """One request; raises EmbeddingError."""
        body: dict[str, object] = {
            "model": self.cfg.model,
            "input": list(texts),
            "encoding_format": "float",
        }
        if self.cfg.dimensions:
            body["dimensions"] = self.cfg.dimensions
        try:
            # httpx's timeout bounds each read; wait_for bounds the whole request.
            answer = await asyncio.wait_for(
                self._http.post(self.cfg.base_url + "/embeddings", json=body, timeout=timeout),
                timeout,
            )
        except TimeoutError:
            raise EmbeddingError("embeddings request timed out", transient=True) from None
        except httpx.HTTPError as exc:
            raise EmbeddingError(
                f"embeddings request failed: {type(exc).__name__}", transient=True
            ) from None
        if answer.status_code != 200:
            raise EmbeddingError(
                f"embeddings endpoint answered HTTP {answer.status_code}",
                transient=answer.status_code in RETRY_STATUSES,
            )
        if len(answer.content) > MAX_ANSWER:
            raise EmbeddingError("embeddings answer too large", transient=False)
        return _parse(answer.content, len(texts))

    async def embed_retrying(self, texts: Sequence[str]) -> tuple[Embedded, int]:
        """:meth:`embed` with ``batch_timeout``, retried up to ``max_retries`` times
        (429, 5xx, timeouts); returns the answer and the failed tries before it."""
        failures = 0
        while True:
            try:
                return await self.embed(texts, self.cfg.batch_timeout), failures
            except EmbeddingError as exc:
                if not exc.transient or failures >= self.cfg.max_retries:
                    raise
            await asyncio.sleep(self.retry_delay * 2**failures)
            failures += 1

    async def aclose(self) -> None:
        await self._http.aclose()


def _parse(raw: bytes, count: int) -> Embedded:
    try:
        data = loads(raw)
        items = sorted(data["data"], key=lambda item: int(item["index"]))
        vectors = [unit([float(x) for x in item["embedding"]]) for item in items]
    except (ValueError, KeyError, TypeError) as exc:
        raise EmbeddingError(
            f"embeddings answer unreadable: {type(exc).__name__}", transient=False
        ) from None
    if len(vectors) != count or len({len(v) for v in vectors}) > 1:
        raise EmbeddingError("embeddings answer does not match the request", transient=False)
    usage = data.get("usage") if isinstance(data, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return Embedded(vectors, tokens if isinstance(tokens, int) and tokens >= 0 else None)


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector
