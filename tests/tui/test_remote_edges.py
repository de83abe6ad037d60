"""Review R3's remote edges: an Esc while the sidecar still queues the turn is sent once
the turn has its id; a stream that stops without its end is said, not shown as whole; the
probe carries no key, nothing follows a redirect, and the key never goes over plain http
to another machine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kernel.client.http import Sidecar, sidecar_from
from kernel.core.errors import ConfigError, KernelError
from tests.conftest import free_port
from tests.tui.conftest import TEXTUAL_MISSING

pytest.importorskip("textual", reason=TEXTUAL_MISSING)

from kernel.tui.backend import BackendError, ChatRef  # noqa: E402
from kernel.tui.remote import HttpBackend  # noqa: E402


class Server:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.arrived = asyncio.Event()
        self.cancels: list[str] = []
        self.keys: list[tuple[str, str | None]] = []
        self.cut = False
        self.url = ""

    async def process(self, request: web.Request) -> web.StreamResponse:
        self.arrived.set()
        await self.release.wait()  # queued behind another turn of this chat
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "X-Turn-Id": "turn-1"}
        )
        await response.prepare(request)
        await response.write(b'data: {"type": "assistant_delta", "step": 1, "delta": "hi"}\n\n')
        if not self.cut:
            await response.write(b'data: {"type": "completed", "step": 1, "reply": "hi"}\n\n')
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def cancel(self, request: web.Request) -> web.Response:
        self.cancels.append(request.match_info["turn"])
        return web.json_response({"cancelled": True})

    async def version(self, request: web.Request) -> web.Response:
        self.keys.append((request.path, request.headers.get("X-API-Key")))
        return web.json_response({"name": "kernel", "version": "x"})

    async def bounce(self, request: web.Request) -> web.Response:
        self.keys.append((request.path, request.headers.get("X-API-Key")))
        raise web.HTTPFound(self.url + "/version")


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server()
    app = web.Application()
    app.router.add_post("/agent/process", state.process)
    app.router.add_post("/agent/turns/{turn}/cancel", state.cancel)
    app.router.add_get("/version", state.version)
    app.router.add_get("/bounce/chats", state.bounce)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    state.url = f"http://127.0.0.1:{port}"
    yield state
    await runner.cleanup()


async def _drain(backend: HttpBackend, chat: ChatRef) -> list[dict[str, Any]]:
    return [event async for event in backend.send(chat, "hello")]


async def test_an_esc_while_queued_is_sent_once_the_turn_has_its_id(server: Server) -> None:
    backend = HttpBackend(server.url)
    chat = ChatRef(ident="chat-1", session=1)
    try:
        turn = asyncio.create_task(_drain(backend, chat))
        await asyncio.wait_for(server.arrived.wait(), 30)
        assert await backend.cancel(chat) is True  # kept, not lost
        server.release.set()
        await asyncio.wait_for(turn, 30)
        assert server.cancels == ["turn-1"]
    finally:
        await backend.close()


async def test_a_stream_cut_before_its_end_is_said(server: Server) -> None:
    server.cut = True
    server.release.set()
    backend = HttpBackend(server.url)
    try:
        with pytest.raises(BackendError, match="stream cut"):
            await _drain(backend, ChatRef(ident="chat-1", session=1))
    finally:
        await backend.close()


async def test_the_probe_carries_no_key_and_redirects_are_not_followed(server: Server) -> None:
    sidecar = Sidecar(server.url, "SECRET-KEY-123")
    assert await asyncio.to_thread(sidecar.probe)
    assert server.keys == [("/version", None)]
    bounced = Sidecar(server.url + "/bounce", "SECRET-KEY-123")
    with pytest.raises(KernelError):
        await asyncio.to_thread(bounced.call, "GET", "/chats")
    assert server.keys[-1] == ("/bounce/chats", "SECRET-KEY-123")  # its own host only
    assert [k for k in server.keys if k[0] == "/version"] == [("/version", None)]


async def test_the_tui_refuses_a_redirect_as_the_command_line_does(server: Server) -> None:
    # One sidecar client: a 3xx is an answer, never followed, and both say it the same way.
    backend = HttpBackend(server.url + "/bounce", "SECRET-KEY-123")
    try:
        with pytest.raises(BackendError) as info:
            await backend.chats()
    finally:
        await backend.close()
    bounced = Sidecar(server.url + "/bounce", "SECRET-KEY-123")
    with pytest.raises(KernelError) as cli:
        await asyncio.to_thread(bounced.call, "GET", "/chats")
    assert str(info.value) == f"{cli.value} (http_302)"
    assert "SECRET-KEY-123" not in str(info.value)
    assert ("/bounce/chats", "SECRET-KEY-123") in server.keys
    assert not [k for k in server.keys if k[0] == "/version"]  # nothing followed it


def test_the_key_never_goes_over_plain_http_to_another_machine() -> None:
    env = {"KERNEL_GATEWAY_API_KEY": "k" * 32}
    with pytest.raises(ConfigError, match="192.0.2.2"):
        sidecar_from(env | {"KERNEL_GATEWAY_URL": "http://192.0.2.2:8088"})
    assert sidecar_from(env | {"KERNEL_GATEWAY_URL": "https://kernel.example"}) is not None
    assert sidecar_from(env | {"KERNEL_GATEWAY_URL": "http://127.0.0.1:8088"}) is not None
