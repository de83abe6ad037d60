"""The bot's HTTP requests over aiohttp (kernel/telegram/aio_request.py), through the real
python-telegram-bot against the Bot API simulator: the bodies Telegram reads, PTB's
errors for each fault at the wire, which faults prove a send never left, no token in
any error or log, a shutdown and a fresh start, lone surrogates, the capped download
and a proxy from the environment."""

from __future__ import annotations

import asyncio
import base64
import gc
import logging
import socket
import warnings
from collections.abc import AsyncIterator

import pytest
from aiohttp import ClientSession, web
from telegram import Bot, InputFile
from telegram.error import NetworkError, TelegramError, TimedOut
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter

from kernel.core.capped import TooLarge
from kernel.telegram.aio_request import POOL_TIMEOUT_MESSAGE, environment_proxies, proxy_for
from kernel.telegram.calls import _never_reached
from kernel.telegram.download import FileRequest
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim
from tests.waiting import wait_until

LONE = "\ud800"
TOKEN_PART = DEFAULT_TOKEN.split(":", 1)[1]  # the secret half of the token


@pytest.fixture
async def tg() -> AsyncIterator[TelegramSim]:
    async with TelegramSim() as sim:
        yield sim


def make_bot(base: str, **request: float) -> Bot:
    return Bot(
        DEFAULT_TOKEN,
        base_url=f"{base}/bot",
        base_file_url=f"{base}/file/bot",
        request=FileRequest(**request),  # type: ignore[arg-type]
        get_updates_request=FileRequest(),
    )


def never_says_the_token(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    """Nor does any log since the bot started (PTB logs its URLs at DEBUG when built)."""
    assert TOKEN_PART not in str(exc) and TOKEN_PART not in repr(exc)
    assert TOKEN_PART not in caplog.text


async def test_form_and_multipart_bodies_reach_telegram_as_sent(tg: TelegramSim) -> None:
    text = "a & b = c + d ? 100% 你好\nnext line  with  spaces"
    async with make_bot(tg.api_base) as bot:
        await bot.send_message(OWNER, text)
        data = bytes(range(256)) * 4
        document = InputFile(data, filename="报告 v2.bin")
        await bot.send_document(OWNER, document, caption="cap & 你好 + 1")
        large = bytes(range(256)) * 9000  # past 1 MiB: streamed from a buffer
        await bot.send_document(OWNER, InputFile(large, filename="large.bin"))
        assert tg.calls_to("sendDocument")[-1].files["document"] == large

    assert tg.chat(OWNER, from_bot=True)[0].text == text
    sent = tg.calls_to("sendDocument")[0]
    assert sent.files["document"] == data
    message = tg.chat(OWNER, from_bot=True)[1]
    assert message.text == "cap & 你好 + 1"
    assert message.media["file_name"] == "报告 v2.bin"
    assert message.media["mime_type"] == "application/octet-stream"


async def test_a_stalled_answer_is_a_timeout_that_may_have_arrived(
    tg: TelegramSim, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    release = tg.hold("sendMessage")
    async with make_bot(tg.api_base) as bot:
        caplog.clear()
        with pytest.raises(TimedOut) as caught:
            await bot.send_message(OWNER, "slow", read_timeout=0.2)
        release.set()
    assert not _never_reached(caught.value)  # it was sent: a re-send may duplicate
    never_says_the_token(caught.value, caplog)


async def test_a_refused_connection_never_reached_telegram(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.socket() as held:  # bound, never listening: every connect is refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        bot = make_bot(f"http://127.0.0.1:{port}")
        caplog.clear()
        with pytest.raises(NetworkError) as caught:
            async with bot:  # getMe, the bot's start, is refused
                pass
    assert not isinstance(caught.value, TimedOut)
    assert str(caught.value) == "aiohttp.ClientConnectorError"
    assert _never_reached(caught.value)
    never_says_the_token(caught.value, caplog)


async def test_a_connection_cut_after_the_send_is_ambiguous(
    tg: TelegramSim, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tg.drop_connections("sendMessage", after_processing=True)
    async with make_bot(tg.api_base) as bot:
        caplog.clear()
        with pytest.raises(NetworkError) as caught:
            await bot.send_message(OWNER, "delivered, answer lost")
        assert [m.text for m in tg.chat(OWNER, from_bot=True)] == ["delivered, answer lost"]
        assert not _never_reached(caught.value)
        never_says_the_token(caught.value, caplog)
        await bot.send_message(OWNER, "the next one goes")  # a fresh connection
    assert tg.chat(OWNER, from_bot=True)[-1].text == "the next one goes"


async def test_a_full_pool_is_pts_pool_timeout_and_never_sent(tg: TelegramSim) -> None:
    release = tg.hold("sendMessage")
    async with make_bot(tg.api_base, connection_pool_size=1, pool_timeout=0.1) as bot:
        request = bot.request
        assert isinstance(request, FileRequest)
        first = asyncio.ensure_future(bot.send_message(OWNER, "first"))
        await wait_until(request._slots.locked, what="the one connection taken")
        with pytest.raises(TimedOut) as caught:
            await bot.send_message(OWNER, "second")
        release.set()
        await first
    assert caught.value.message == POOL_TIMEOUT_MESSAGE
    assert _never_reached(caught.value)
    assert [m.text for m in tg.chat(OWNER, from_bot=True)] == ["first"]


async def test_shutdown_and_initialize_give_a_fresh_session(tg: TelegramSim) -> None:
    request = FileRequest()
    url = f"{tg.api_base}/bot{DEFAULT_TOKEN}/getMe"
    with pytest.raises(RuntimeError, match="not initialized"):
        await request.do_request(url, "POST")
    await request.initialize()
    first = request._session
    assert (await request.post(url))["id"] == tg.get_me_json()["id"]  # type: ignore[index]
    await request.shutdown()
    await request.shutdown()  # twice: nothing to do
    with pytest.raises(RuntimeError, match="not initialized"):
        await request.do_request(url, "POST")
    await request.initialize()
    assert request._session is not first and request._session is not None
    assert (await request.post(url))["is_bot"] is True  # type: ignore[index]
    await request.shutdown()


async def test_lone_surrogates_are_mended_both_ways(tg: TelegramSim) -> None:
    tg.inject_text(f"in {LONE} coming")
    async with make_bot(tg.api_base) as bot:
        (update,) = await bot.get_updates(timeout=0)
        assert update.message is not None and update.message.text == "in \ufffd coming"
        await bot.send_message(OWNER, f"out {LONE} going")
        await bot.send_document(OWNER, InputFile(b"x", filename="f.txt"), caption=f"c{LONE}")
    texts = [m.text for m in tg.chat(OWNER, from_bot=True)]
    assert texts == ["out \ufffd going", "c\ufffd"]


async def test_a_capped_download_is_refused_past_the_cap(
    tg: TelegramSim, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    stored = tg.store_file(b"z" * 5000, "documents", "big.bin")
    url = f"{tg.api_base}/file/bot{DEFAULT_TOKEN}/{stored.file_path}"
    async with make_bot(tg.api_base) as bot:
        caplog.clear()
        request = bot.request
        assert isinstance(request, FileRequest)
        assert await request.retrieve_capped(url, 5000) == b"z" * 5000
        with pytest.raises(TooLarge):
            await request.retrieve_capped(url, 4999)
        with pytest.raises(NetworkError) as caught:
            await request.retrieve_capped(url + ".gone", 5000)
    assert str(caught.value) == "the file server answered HTTP 404"
    never_says_the_token(caught.value, caplog)


async def test_a_download_past_a_full_pool_times_out_and_leaves_no_request_behind(
    tg: TelegramSim,
) -> None:
    """A download that found no free connection in time never made its request: none
    is left half-built (aiohttp's request coroutine never awaited, a RuntimeWarning)."""
    stored = tg.store_file(b"z" * 10, "documents", "small.bin")
    url = f"{tg.api_base}/file/bot{DEFAULT_TOKEN}/{stored.file_path}"
    async with make_bot(tg.api_base, connection_pool_size=1, pool_timeout=0.01) as bot:
        request = bot.request
        assert isinstance(request, FileRequest)
        await request._slots.acquire()  # the one connection is taken
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with pytest.raises(TimedOut, match="Pool timeout") as caught:
                await request.retrieve_capped(url, 100)
            del caught  # its traceback's frames, and whatever they hold
            gc.collect()
        request._slots.release()
        assert await request.retrieve_capped(url, 100) == b"z" * 10
    assert [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)] == []


def test_proxies_are_read_from_the_environment_as_httpx_read_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert environment_proxies() == {}
    monkeypatch.setenv("ALL_PROXY", "proxy.lan:3128")  # no scheme: http, as httpx
    monkeypatch.setenv("HTTPS_PROXY", "http://user:p%40ss@tls-proxy.lan:8080")
    monkeypatch.setenv("NO_PROXY", "localhost,.internal")
    proxies = environment_proxies()
    proxy, auth = proxy_for("https://api.telegram.org/bot1:x/getMe", proxies)
    assert str(proxy) == "http://tls-proxy.lan:8080"
    assert auth == "Basic " + base64.b64encode(b"user:p@ss").decode()
    proxy, auth = proxy_for("http://api.telegram.org/bot1:x/getMe", proxies)
    assert str(proxy) == "http://proxy.lan:3128" and auth is None  # ALL_PROXY
    assert proxy_for("https://bot.internal/x", proxies) == (None, None)
    assert proxy_for("http://localhost:8081/x", proxies) == (None, None)
    monkeypatch.setenv("NO_PROXY", "*")
    assert environment_proxies() == {}
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(RuntimeError, match="socks5 proxy"):
        FileRequest()


async def test_an_http_proxy_from_all_proxy_carries_every_call(
    tg: TelegramSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain-HTTP forward proxy (absolute-form requests), named only by ALL_PROXY,
    which aiohttp's own ``trust_env`` would ignore."""
    seen: list[str] = []
    credentials: set[str | None] = set()

    async def forward(request: web.Request) -> web.Response:
        seen.append(request.method)
        credentials.add(request.headers.get("Proxy-Authorization"))
        assert request.url.host == "telegram.example"  # the proxy resolves the name
        target = request.url.with_host("127.0.0.1").with_port(tg.port)
        async with ClientSession() as http:
            body = await request.read()
            headers = {"Content-Type": request.headers.get("Content-Type", "")}
            async with http.request(request.method, target, data=body, headers=headers) as r:
                return web.Response(status=r.status, body=await r.read(), headers=r.headers)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    for name in ("http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("ALL_PROXY", f"http://kernel:s%40cret@127.0.0.1:{port}")
    try:
        async with make_bot("http://telegram.example:80") as bot:
            await bot.send_message(OWNER, "through the proxy")
            stored = tg.store_file(b"file body", "documents", "f.bin")
            request = bot.request
            assert isinstance(request, FileRequest)
            url = f"http://telegram.example/file/bot{DEFAULT_TOKEN}/{stored.file_path}"
            assert await request.retrieve_capped(url, 100) == b"file body"
    finally:
        await runner.cleanup()
    assert tg.chat(OWNER, from_bot=True)[-1].text == "through the proxy"
    assert seen == ["POST", "POST", "GET"]  # getMe (the bot's start), sendMessage, the file
    assert credentials == {"Basic " + base64.b64encode(b"kernel:s@cret").decode()}


async def test_every_error_is_a_telegram_error(tg: TelegramSim) -> None:
    """Nothing of aiohttp's escapes (PTB would wrap it with its repr, the URL in it)."""
    async with make_bot(tg.api_base) as bot:
        request = bot.request
        with pytest.raises(TelegramError) as caught:
            await request.post("http://[bad-url/bot1:secret/getMe")
    assert "secret" not in str(caught.value)


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux's TCP_USER_TIMEOUT")
async def test_an_upload_the_server_stops_reading_times_out() -> None:
    """aiohttp has no write timeout: each connection's TCP_USER_TIMEOUT is the longest
    write timeout, so a write that stays unacknowledged ends the call as TimedOut."""
    with socket.socket() as server:  # accepts (the backlog) and never reads
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        request = FileRequest(write_timeout=0.5, media_write_timeout=1.0)
        await request.initialize()
        upload = InputFile(b"x" * 20_000_000, filename="big.bin")
        data = RequestData([RequestParameter.from_input("document", upload)])
        url = f"http://127.0.0.1:{port}/bot{DEFAULT_TOKEN}/sendDocument"
        try:
            with pytest.raises(TimedOut) as caught:
                await request.do_request(url, "POST", data)
        finally:
            await request.shutdown()
    assert not _never_reached(caught.value)  # part of it went: it may have arrived
    assert TOKEN_PART not in str(caught.value)


async def test_each_connection_carries_the_longest_write_timeout(tg: TelegramSim) -> None:
    if not hasattr(socket, "TCP_USER_TIMEOUT"):
        pytest.skip("Linux's TCP_USER_TIMEOUT")
    request = FileRequest(write_timeout=5.0, media_write_timeout=20.0)
    await request.initialize()
    try:
        await request.post(f"{tg.api_base}/bot{DEFAULT_TOKEN}/getMe")
        assert request._session is not None
        pooled = request._session.connector._conns  # type: ignore[union-attr]
        (kept,) = [proto for conns in pooled.values() for proto, _ in conns]
        sock = kept.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 20_000
    finally:
        await request.shutdown()
