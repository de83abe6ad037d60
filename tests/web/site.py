"""A small website on 127.0.0.1 for web_fetch's tests and benchmark, and the stand-ins
that put it behind made-up public names.

    async with Site() as site:
        site.url("/article")            # http://127.0.0.1:PORT/article
        site.hits                       # every path requested, in order
        site.requests[-1].headers       # what the last request carried

Pages: ``/article`` (an article inside menus, a sidebar, a footer and scripts),
``/data.json``, ``/ld.json`` (application/ld+json), ``/notes.txt`` (ISO-8859-1, declared),
``/readme.md``, ``/image.png``, ``/long?chars=N``,
``/big?bytes=N`` (streamed, no Content-Length), ``/declared?bytes=N`` (a Content-Length
only: no body is ever sent), ``/bomb?bytes=N`` (N zero bytes gzip-compressed),
``/links`` (no main content: a bare list of links), ``/missing`` (a 404 page),
``/redirect/N`` (N more redirects, then /article), ``/to?url=U`` (a 302 to U),
``/cookie`` (sets a cookie and redirects to /headers), ``/headers`` (the request's
headers as JSON), ``/slow`` (never answers), ``/html?size=N`` (an N-byte article page,
for the benchmark), ``/secret`` (what an attacker wants: any hit on it is a failure).

:class:`Names` is a resolver (name → addresses) and :class:`Nat` a network backend
that carries connections for a made-up public address to the site and records every
address it was asked to connect to, so a test can assert that nothing was connected to.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpcore
from aiohttp import web
from multidict import CIMultiDict

from tests.conftest import free_port
from tests.sim.loopback import LoopbackServer

# A global unicast address (it passes the guard) that no test ever really reaches: Nat
# carries it to the local site.
PUBLIC_IP = "93.184.215.14"

ARTICLE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tide pools | Coast Weekly</title>
<script>var tracker = "SCRIPT-SHOULD-NOT-APPEAR";</script>
<style>body { color: #333 } .STYLE-SHOULD-NOT-APPEAR {}</style></head>
<body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/news">MENU-NEWS-LINK</a></li>
<li><a href="/about">About us</a></li><li><a href="/shop">Shop</a></li></ul></nav>
<aside class="sidebar"><h3>Trending</h3><ul><li><a href="/x">SIDEBAR-TRENDING-ITEM</a></li>
</ul></aside>
<main><article>
<h1>Tide pools</h1>
<p>Tide pools are rocky pockets on the shore that hold seawater when the tide goes out.
They shelter anemones, sea stars, crabs and small fish that have adapted to waves,
sun and changing salinity between one tide and the next.</p>
<p>Visitors should step only on bare rock, never lift animals out of the water, and
check the tide tables before walking out, because the sea returns faster than it seems.</p>
<h2>What lives there</h2>
<ul><li>Sea anemones that close when exposed</li><li>Hermit crabs in borrowed shells</li>
<li>Limpets clamped to the rock</li></ul>
<p>The best time to visit is an hour before low tide, on a calm day in late spring.</p>
</article></main>
<footer><p>FOOTER-COPYRIGHT 2026 Coast Weekly. Cookie policy. Terms.</p></footer>
<script>document.write("SCRIPT-SHOULD-NOT-APPEAR")</script>
</body></html>
"""

LINKS = """<!doctype html><html><head><title>Index</title></head><body>
<a href="/a">alpha</a> <a href="/b">beta</a></body></html>"""


@dataclass
class Seen:
    path: str
    headers: CIMultiDict[str]


class Site(LoopbackServer):
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.requests: list[Seen] = []
        self._arrived = asyncio.Event()

    @property
    def hits(self) -> list[str]:
        return [r.path for r in self.requests]

    def url(self, path: str, host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"

    @web.middleware
    async def _count(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append(Seen(request.path, CIMultiDict(request.headers)))
        self._arrived.set()
        response: web.StreamResponse = await handler(request)
        return response

    def routes(self, app: web.Application) -> None:
        app.middlewares.append(self._count)
        text = web.Response
        pages: dict[str, Any] = {
            "/article": lambda r: text(text=ARTICLE, content_type="text/html"),
            "/links": lambda r: text(text=LINKS, content_type="text/html"),
            "/missing": lambda r: text(
                text="<html><head><title>Not found</title></head><body><p>No page "
                "here.</p></body></html>",
                content_type="text/html",
                status=404,
            ),
            "/data.json": lambda r: web.json_response({"name": "kernel", "n": [1, 2, 3]}),
            "/ld.json": lambda r: text(
                text='{"@type": "Thing"}', content_type="application/ld+json"
            ),
            "/notes.txt": lambda r: text(
                body="café crème\n".encode("latin-1"),
                headers={"Content-Type": "text/plain; charset=ISO-8859-1"},
            ),
            "/readme.md": lambda r: text(
                text="# Readme\n\n*hello*\n", content_type="text/markdown"
            ),
            "/image.png": lambda r: text(
                body=b"\x89PNG\r\n\x1a\n" + bytes(64), content_type="image/png"
            ),
            "/long": lambda r: text(text="x" * int(r.query["chars"]), content_type="text/plain"),
            # Location as given, unchecked (aiohttp's HTTPFound would validate it).
            "/to": lambda r: text(status=302, headers={"Location": r.query["url"]}),
            "/headers": lambda r: web.json_response(dict(r.headers)),
            "/secret": lambda r: text(text="the crown jewels", content_type="text/plain"),
            "/html": lambda r: text(text=big_html(int(r.query["size"])), content_type="text/html"),
        }
        for path, handler in pages.items():
            app.router.add_get(path, _wrap(handler))
        app.router.add_get("/big", self._big)
        app.router.add_get("/declared", self._declared)
        app.router.add_get("/bomb", self._bomb)
        app.router.add_get("/redirect/{n}", self._redirect)
        app.router.add_get("/cookie", self._cookie)
        app.router.add_get("/slow", self._slow)

    async def _big(self, request: web.Request) -> web.StreamResponse:
        size = int(request.query["bytes"])
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunk = b"y" * 16384
        sent = 0
        while sent < size:
            part = chunk[: size - sent]
            await response.write(part)
            sent += len(part)
        await response.write_eof()
        return response

    async def _declared(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/plain", "Content-Length": request.query["bytes"]}
        )
        await response.prepare(request)
        await asyncio.sleep(3600)  # the body never comes: a client must not wait for it
        return response

    async def _bomb(self, request: web.Request) -> web.Response:
        body = gzip.compress(bytes(int(request.query["bytes"])), compresslevel=9)
        return web.Response(
            body=body, headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"}
        )

    async def _redirect(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        raise web.HTTPFound(f"/redirect/{n - 1}" if n > 1 else "/article")

    async def _cookie(self, request: web.Request) -> web.Response:
        response = web.HTTPFound("/headers")
        response.set_cookie("session", "s3cret", path="/")
        raise response

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(3600)
        return web.Response(text="late")


def _wrap(handler: Any) -> Any:
    async def handle(request: web.Request) -> web.StreamResponse:
        result = handler(request)
        if isinstance(result, web.HTTPException) and result.status >= 300:
            raise result
        response: web.StreamResponse = result
        return response

    return handle


def big_html(size: int) -> str:
    """An article page of about ``size`` bytes: menus, a sidebar of links, many
    paragraphs, a table, a footer; what a long news or documentation page looks like."""
    head = ARTICLE.split("<main>", 1)[0]
    paragraph = (
        "<p>Paragraph {i}: the coastal survey counted anemones, limpets and crabs along "
        "the northern reef, compared the numbers with last season's and noted where the "
        "storm had moved boulders and opened new pools for the small fish.</p>\n"
    )
    row = "<tr><td>{i}</td><td>reef {i}</td><td>{n} animals</td></tr>\n"
    parts = [head, "<main><article><h1>Survey report</h1>\n"]
    total = sum(len(p) for p in parts)
    i = 0
    while total < size - 2000:
        piece = paragraph.format(i=i) if i % 10 else row.format(i=i, n=i * 7)
        if i % 10 == 0:
            piece = f"<table>{piece}</table>\n"
        parts.append(piece)
        total += len(piece)
        i += 1
    parts.append("</article></main><footer>FOOTER-COPYRIGHT</footer></body></html>")
    return "".join(parts)


@contextlib.asynccontextmanager
async def raw_site(answer: bytes) -> AsyncIterator[int]:
    """A server on 127.0.0.1 that answers every connection with ``answer`` as it is (for
    what aiohttp will not send, such as no Content-Type); yields its port."""

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(reply, "127.0.0.1", free_port(), reuse_address=True)
    async with server:
        yield server.sockets[0].getsockname()[1]


class Names:
    """A resolver from a table: ``{"intranet.test": ["10.0.0.7"]}``; other names do not
    resolve. ``asked`` records each name looked up."""

    def __init__(self, table: dict[str, Sequence[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


class Nat(httpcore.AsyncNetworkBackend):
    """Connects :data:`PUBLIC_IP` to 127.0.0.1 (same port), anything else as asked;
    ``connects`` records every (address, port) it was asked for."""

    def __init__(self) -> None:
        self.connects: list[tuple[str, int]] = []
        self._real = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects.append((host, port))
        target = "127.0.0.1" if host == PUBLIC_IP else host
        return await self._real.connect_tcp(target, port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AssertionError("no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def as_json(text: str) -> Any:
    """The body of an untrusted-content block, parsed."""
    return json.loads(text.split("\n", 2)[2].rsplit("\n", 1)[0])
