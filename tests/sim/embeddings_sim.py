"""An OpenAI-compatible ``/v1/embeddings`` endpoint (issue 39) at the wire level, with
the deterministic local embedder (``tests/sim/embedder.py``) behind it.

    async with EmbeddingsSim(key="k") as sim:
        base_url = sim.base_url                  # …/v1
        sim.down = True                          # every request: 503 until False
        sim.stall = True                         # requests wait until sim.release()
        sim.stall_after = 2                      # the third request on waits likewise
        sim.fail_next(500, times=2)              # the next two: HTTP 500
        [call] = sim.calls                       # .inputs .model .dimensions .key

Shape (https://platform.openai.com/docs/api-reference/embeddings/create): ``POST
/v1/embeddings`` ``{"model", "input": str | [str], "encoding_format", "dimensions"}``;
answer ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
"model", "usage": {"prompt_tokens", "total_tokens"}}``; errors ``{"error": {"message",
"type", "code"}}``, 401 for a wrong key.

Run standalone: ``uv run python -m tests.sim.embeddings_sim --port 8792``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import deque
from dataclasses import dataclass

from aiohttp import web

from tests.sim.embedder import DIMENSIONS, embed, tokens_of
from tests.sim.loopback import LoopbackServer


@dataclass
class EmbeddingCall:
    inputs: list[str]
    model: str
    dimensions: int | None
    key: str


class EmbeddingsSim(LoopbackServer):
    def __init__(self, key: str = "", host: str = "127.0.0.1", port: int = 0) -> None:
        self.key = key  # "": any key (a local server)
        self.host = host
        self.port = port
        self.calls: list[EmbeddingCall] = []
        self.down = False
        self.stall = False
        self.stall_after: int | None = None  # requests answered before the rest stall
        self.stalled = 0  # requests waiting now
        self._released = asyncio.Event()
        self._failures: deque[int] = deque()
        self._arrived = asyncio.Event()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def fail_next(self, status: int, times: int = 1) -> None:
        self._failures.extend([status] * times)

    def release(self) -> None:
        """Stalled requests go on (and later ones no longer stall)."""
        self.stall = False
        self.stall_after = None
        self._released.set()

    def inputs(self) -> list[str]:
        """Every text embedded so far, in order."""
        return [text for call in self.calls for text in call.inputs]

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/embeddings", self._embeddings)

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        raw = body.get("input")
        inputs = [raw] if isinstance(raw, str) else list(raw)
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        call = EmbeddingCall(inputs, str(body.get("model")), body.get("dimensions"), key)
        self.calls.append(call)
        self._arrived.set()
        if self.key and key != self.key:
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        if self.stall or (self.stall_after is not None and len(self.calls) > self.stall_after):
            self.stalled += 1
            self._released.clear()
            try:
                await self._released.wait()
            finally:
                self.stalled -= 1
        if self.down:
            return _error(503, "The server is overloaded.", "server_error")
        if self._failures:
            return _error(self._failures.popleft(), "Simulated failure.", "server_error")
        size = call.dimensions or DIMENSIONS
        data = [
            {"object": "embedding", "index": i, "embedding": embed(text, size)}
            for i, text in enumerate(inputs)
        ]
        tokens = tokens_of(inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": call.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def _error(status: int, message: str, code: str) -> web.Response:
    payload = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return web.Response(status=status, text=json.dumps(payload), content_type="application/json")


async def _serve(port: int) -> None:
    async with EmbeddingsSim(port=port) as sim:
        print(f"embeddings simulator on {sim.base_url}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8792)
    asyncio.run(_serve(parser.parse_args().port))
