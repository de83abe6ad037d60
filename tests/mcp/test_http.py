"""Streamable HTTP: the SDK's server app under uvicorn on loopback, behind a header check."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.responses import JSONResponse

from tests.mcp.conftest import MCPKernel, free_port
from tests.sim.anthropic_sim import AnthropicSim
from tests.waiting import wait_until

KEY = "sesame-0123456789abcdef"


def build_app() -> Any:
    server = MCPServer("kernel-http-test", log_level="WARNING")

    @server.tool()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"hello {name}"

    app = server.streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"x-api-key") != KEY.encode():
            refusal = JSONResponse({"error": "missing or wrong X-Api-Key"}, status_code=401)
            await refusal(scope, receive, send)
            return
        await app(scope, receive, send)

    return guarded


class HTTPServer:
    """One uvicorn server on a fixed loopback port; can be stopped and started again."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        config = uvicorn.Config(build_app(), log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        await wait_until(lambda: self._server is not None and self._server.started)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self._server = self._task = None


@pytest.fixture
async def http_server() -> AsyncIterator[HTTPServer]:
    server = HTTPServer(free_port())
    await server.start()
    yield server
    await server.stop()


def http_table(name: str, url: str, key: str | None) -> dict[str, Any]:
    table: dict[str, Any] = {"name": name, "type": "http", "url": url, "connect_timeout": 5.0}
    if key is not None:
        table["headers"] = {"X-Api-Key": key}
    return table


async def test_header_is_sent_and_required(
    model: AnthropicSim,
    mcp_kernel: MCPKernel,
    http_server: HTTPServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    servers = [
        http_table("web", http_server.url, "${MCP_TEST_KEY}"),
        http_table("nokey", http_server.url, None),
        http_table("badkey", http_server.url, "wrong-key-0123456789"),
    ]
    kernel = await mcp_kernel(model, servers, env={"MCP_TEST_KEY": KEY})

    outcome = await kernel.tools.call("mcp_web__greet", {"name": "owner"})
    assert outcome.ok and outcome.content == "hello owner"

    status = {s.name: s for s in kernel.mcp.status()}
    assert (status["web"].state, status["web"].tools) == ("connected", 1)
    for refused in ("nokey", "badkey"):
        assert status[refused].state == "failed"
        assert status[refused].last_error.startswith("HTTP 401")
    assert not [n for n in kernel.tools.names() if n.startswith(("mcp_nokey", "mcp_badkey"))]

    # Header values are secrets: not in any log record, not in the status.
    assert KEY not in caplog.text and "wrong-key-0123456789" not in caplog.text
    assert KEY not in str(kernel.mcp.status())


async def test_restarted_server_gets_a_new_session_on_the_next_call(
    model: AnthropicSim, mcp_kernel: MCPKernel, http_server: HTTPServer
) -> None:
    table = http_table("web", http_server.url, KEY)
    kernel = await mcp_kernel(model, [table], settings={"ping_interval": 0})
    assert (await kernel.tools.call("mcp_web__greet", {"name": "a"})).content == "hello a"

    await http_server.stop()
    await http_server.start()  # same port, a new server that never saw our session

    outcome = await kernel.tools.call("mcp_web__greet", {"name": "b"})

    assert outcome.ok, outcome.content
    assert outcome.content == "hello b"
    assert kernel.mcp.status()[0].state == "connected"


async def test_ping_notices_a_lost_http_server(
    model: AnthropicSim, mcp_kernel: MCPKernel, http_server: HTTPServer
) -> None:
    table = http_table("web", http_server.url, KEY) | {"connect_timeout": 1.0}
    settings = {"ping_interval": 0.1, "reconnect_attempts": 2}
    kernel = await mcp_kernel(model, [table], settings=settings)
    assert "mcp_web__greet" in kernel.tools.names()

    await http_server.stop()
    await wait_until(lambda: "mcp_web__greet" not in kernel.tools.names())
    assert kernel.mcp.status()[0].state == "failed"

    await http_server.start()
    await wait_until(lambda: "mcp_web__greet" in kernel.tools.names())
    assert (await kernel.tools.call("mcp_web__greet", {"name": "c"})).content == "hello c"
