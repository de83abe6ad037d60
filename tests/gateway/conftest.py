"""A running sidecar: a real Kernel (SQLite on disk) with the Gateway listening on a
free 127.0.0.1 port in the test's loop, the model simulators behind it, and a real
aiohttp client in front of it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kernel.app import Kernel
from kernel.config import load_config
from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.conftest import write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim

API_KEY = "gw-key-0123456789abcdef"
Sim = AnthropicSim | OpenAISim


@dataclass
class Sidecar:
    kernel: Kernel
    gateway: Gateway
    http: aiohttp.ClientSession
    model: Sim
    config_path: Path
    api_key: str = ""
    stopped: bool = False

    async def stop(self) -> None:
        """As at shutdown: the sidecar, then the Kernel (database last)."""
        if self.stopped:
            return
        self.stopped = True
        await self.http.close()
        await self.gateway.stop()
        await self.kernel.stop()

    @property
    def url(self) -> str:
        return self.gateway.url

    def headers(self, **extra: str) -> dict[str, str]:
        base = {"X-API-Key": self.api_key} if self.api_key else {}
        return base | extra

    async def call(
        self, method: str, path: str, body: Any = None, **kw: Any
    ) -> tuple[int, Any, aiohttp.ClientResponse]:
        """(status, parsed JSON body, response) of one request."""
        headers = kw.pop("headers") if "headers" in kw else self.headers()
        data = kw.pop("data", None)
        if body is not None:
            data = json.dumps(body)
            headers = {**headers, "Content-Type": "application/json"}
        async with self.http.request(
            method, self.url + path, data=data, headers=headers, **kw
        ) as response:
            raw = await response.read()
            parsed = json.loads(raw) if raw else None
            return response.status, parsed, response

    async def process(self, text: str, **fields: Any) -> tuple[int, Any]:
        body = {"input": [message(text)], **fields}
        status, data, _ = await self.call("POST", "/agent/process", body)
        return status, data


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "type": "message", "content": [{"type": "text", "text": text}]}


async def sse_events(response: aiohttp.ClientResponse) -> AsyncIterator[Any]:
    """The ``data:`` payloads of an SSE response, one at a time, as they arrive."""
    buffer = b""
    async for chunk in response.content.iter_any():
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            for line in frame.decode().splitlines():
                if line.startswith("data: "):
                    payload = line[6:]
                    yield payload if payload == "[DONE]" else json.loads(payload)


SidecarFactory = Callable[..., Awaitable[Sidecar]]


@pytest.fixture
async def sidecar(tmp_path: Path) -> AsyncIterator[SidecarFactory]:
    async with sidecars(tmp_path) as start:
        yield start


@contextlib.asynccontextmanager
async def sidecars(tmp_path: Path) -> AsyncIterator[SidecarFactory]:
    """What the ``sidecar`` fixture gives: a factory of sidecars, each stopped at the end
    (for a module whose tests share a loop, tests/webconsole/test_browser.py)."""
    running: list[Sidecar] = []

    async def start(
        model: Sim,
        *,
        api_key: str = "",
        gateway: dict[str, Any] | None = None,
        extra: str = "",
        keep_config: bool = False,
        clock: Any = None,
        **general: Any,
    ) -> Sidecar:
        """``keep_config``: a restart, with the config.toml already there. ``clock``: the
        Kernel's clock (tests/clock.py)."""
        kind = "claude" if isinstance(model, AnthropicSim) else "openai_compat"
        settings = {"shutdown_timeout": 2.0, **(gateway or {})}
        if api_key:
            settings["api_key"] = api_key
        general.setdefault("language", "en")
        path = tmp_path / "config.toml"
        if not (keep_config and path.exists()):
            path = write_config(tmp_path, model.base_url, kind, gateway=settings, **general)
            if extra:
                path.write_text(path.read_text() + extra)
        kernel = Kernel(load_config(path, env={}, require_telegram=False), clock=clock)
        await kernel.start()
        gw = Gateway(kernel.gateway_deps(), ROUTERS)
        await gw.start()
        # The key the test gives, else the one Kernel generated (data/gateway.key), which
        # every request of the test's client then carries (a test of keyless behaviour
        # sets gateway={"auth": "none"}).
        generated = {} if api_key or not gw.api_key else {"X-API-Key": gw.api_key}
        http = aiohttp.ClientSession(headers=generated)
        sc = Sidecar(kernel, gw, http, model, path, api_key or gw.api_key)
        running.append(sc)
        return sc

    try:
        yield start
    finally:
        for sc in reversed(running):
            await sc.stop()
