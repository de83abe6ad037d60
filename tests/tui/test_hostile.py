"""A sidecar that answers in bad shapes (an old or a hostile server at the address): the
TUI says so in words and keeps running."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from tests.conftest import free_port
from tests.tui.conftest import TEXTUAL_MISSING, lines, send, until

pytest.importorskip("textual", reason=TEXTUAL_MISSING)

from kernel.tui.app import KernelTui  # noqa: E402
from kernel.tui.remote import HttpBackend  # noqa: E402


async def chats(request: web.Request) -> web.Response:
    listed = [1, "x", {"id": "chat-5", "name": "[b]odd\x1b[31m", "message_count": "many"}]
    return web.json_response({"chats": listed})


async def chat(request: web.Request) -> web.Response:
    return web.json_response({"messages": [{"role": "user", "content": [7, {"type": "text"}]}]})


async def process(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b'data: {"type": "assistant_delta", "delta": "partial"}\n\n')
    await response.write(b"data: [1, 2]\n\n")
    await response.write(b"data: {not json\n\n")
    await response.write_eof()
    return response


@pytest.fixture
async def odd_server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/chats", chats)
    app.router.add_get("/chats/{id}", chat)
    app.router.add_post("/agent/process", process)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port, reuse_address=True)
    await site.start()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_bad_shapes_are_said_in_words(odd_server: str) -> None:
    backend = HttpBackend(odd_server)
    app = KernelTui(backend)
    try:
        async with app.run_test() as pilot:
            await until(pilot, lambda: len(app.chat_list) == 1)
            [chat] = app.chat_list
            assert (chat.ident, chat.session, chat.messages) == ("chat-5", 5, 0)
            label = app.query("#chats TextLine")[1]
            assert "\x1b" not in label.render().plain  # no escape reaches the terminal
            assert lines(app) == []  # the history's odd blocks left out
            await send(pilot, "hello")
            await until(pilot, lambda: bool(lines(app, "error")) and not app.busy)
            assert lines(app, "assistant") == ["partial"]
            assert "malformed answer" in lines(app, "error")[0]
            assert app.is_running
    finally:
        await backend.close()
