"""A webhook receiver: records every POST, and fails on demand.

    async with WebhookSim() as hook:
        hook.fail_next(500, times=1)      # the next POST gets a 500
        hook.stall_next(seconds=2)        # the next POST answers after 2 s
        ...
        [post] = hook.posts               # .headers, .raw, .json, .status (what it answered)

Any path is accepted (``hook.url`` is ``http://127.0.0.1:PORT/hook``). Run standalone:

    uv run python -m tests.sim.webhook_sim --port 8790
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from tests.sim.loopback import LoopbackServer


@dataclass
class Post:
    path: str
    headers: CIMultiDict[str]
    raw: bytes
    status: int  # what the receiver answered

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


class WebhookSim(LoopbackServer):
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.posts: list[Post] = []
        self._plan: deque[tuple[int, float]] = deque()  # (status, stall seconds)
        self._arrived = asyncio.Event()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hook"

    def fail_next(self, status: int = 500, *, times: int = 1) -> None:
        self._plan.extend([(status, 0.0)] * times)

    def stall_next(self, seconds: float, *, times: int = 1, status: int = 200) -> None:
        self._plan.extend([(status, seconds)] * times)

    def fail_always(self, status: int = 500) -> None:
        self._plan.extend([(status, 0.0)] * 1000)

    async def _receive(self, request: web.Request) -> web.Response:
        raw = await request.read()
        status, stall = self._plan.popleft() if self._plan else (200, 0.0)
        if stall:
            await asyncio.sleep(stall)
        self.posts.append(Post(request.path, CIMultiDict(request.headers), raw, status))
        self._arrived.set()
        if status >= 400:
            return web.json_response({"error": "simulated failure"}, status=status)
        return web.json_response({"ok": True}, status=status)

    def routes(self, app: web.Application) -> None:
        app.router.add_route("POST", "/{tail:.*}", self._receive)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Webhook receiver simulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    async def serve() -> None:
        async with WebhookSim(args.host, args.port) as sim:
            print(sim.url, flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
