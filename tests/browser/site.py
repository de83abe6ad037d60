"""A small website on 127.0.0.1 for the browser tools' tests, and one Chromium per test
module to drive it.

Pages: ``/`` (an article, a script that writes a line, links, a search form, a button
that changes the page, an image whose address redirects to a loopback address, a fetch()
to a loopback address), ``/about``, ``/search?q=`` (the query echoed), ``/cookie`` (sets
a cookie), ``/whoami`` (the cookie it got), ``/to?url=U`` (a 302 to U), ``/dl`` (an
attachment), ``/img.png``, ``/secret`` (what an attacker wants: any hit is a failure).

:func:`chromium` starts Debian's chromium (as ``tests/webconsole`` runs it) with its
DevTools endpoint on a free loopback port; the tests' ``Browsers`` connect to it, so the
module pays for one Chromium whatever its number of tests.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from tests.sim.loopback import LoopbackServer
from tests.webconsole.chromium import ARGS, CHROMIUM

HOME = """<!doctype html><html><head><meta charset="utf-8"><title>Tide pools</title></head>
<body>
<nav><a href="/about">About us</a> <a href="/to?url={secret}">Members area</a></nav>
<main><article><h1>Tide pools</h1>
<p>Tide pools are rocky pockets on the shore that hold seawater when the tide goes out.
They shelter anemones, sea stars, crabs and small fish that have adapted to waves, sun
and changing salinity between one tide and the next.</p>
<p id="script-line"></p>
</article></main>
<form action="/search" method="get"><input name="q" placeholder="Search the site">
<button type="submit">Go</button></form>
<button id="more" onclick="document.getElementById('extra').textContent='Low tide at 6'">
Show times</button><p id="extra"></p>
<img src="/to?url={secret}" alt="sneaky"><img src="/img.png" alt="a crab">
<script>
document.getElementById('script-line').textContent = 'Written by a script: visitors welcome.';
fetch('{secret}').catch(() => null);
</script>
</body></html>"""

PAGE = """<!doctype html><html><head><title>{title}</title></head><body><main><article>
<h1>{title}</h1><p>{body}</p><p>{body}</p></article></main></body></html>"""

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cf000000030101007c1c3b1b0000000049454e44ae426082"
)


class Site(LoopbackServer):
    def __init__(self) -> None:
        self.host, self.port = "127.0.0.1", 0
        self.hits: list[str] = []
        self._arrived = asyncio.Event()

    def secret(self) -> str:
        return f"http://127.0.0.1:{self.port}/secret"

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/{tail:.*}", self._page)

    async def _page(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(request.path)
        self._arrived.set()
        path = request.path
        if path == "/":
            return _html(HOME.replace("{secret}", self.secret()))
        if path == "/about":
            return _html(PAGE.format(title="About us", body="A small page about the shore."))
        if path == "/search":
            query = request.query.get("q", "")
            return _html(PAGE.format(title="Search", body=f"Results for {query}"))
        if path == "/cookie":
            response = _html(PAGE.format(title="Cookie", body="A cookie was set."))
            response.set_cookie("visitor", "v42")
            return response
        if path == "/whoami":
            who = request.cookies.get("visitor", "nobody")
            return _html(PAGE.format(title="Who", body=f"visitor is {who}"))
        if path == "/to":
            return web.Response(status=302, headers={"Location": request.query["url"]})
        if path == "/dl":
            disposition = {"Content-Disposition": 'attachment; filename="tool.bin"'}
            return web.Response(body=b"\x7fELF" * 10, headers=disposition)
        if path == "/img.png":
            return web.Response(body=PNG, content_type="image/png")
        return web.Response(status=404, text="not here")


def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


@contextmanager
def chromium() -> Iterator[str]:
    """Chromium running headless with its DevTools endpoint: the ws:// address."""
    with tempfile.TemporaryDirectory(prefix="kernel-chromium-") as profile:
        proc = subprocess.Popen(
            [
                CHROMIUM,
                *ARGS,
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            yield _endpoint(proc)
        finally:
            proc.terminate()  # Chromium ends its own renderers
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()


def _endpoint(proc: subprocess.Popen[bytes]) -> str:
    """Chromium prints ``DevTools listening on ws://…`` once it accepts; what it writes
    after is drained (a full pipe would stop it)."""
    stderr = proc.stderr
    assert stderr is not None
    for raw in stderr:
        found = re.search(rb"DevTools listening on (ws://\S+)", raw)
        if found:
            threading.Thread(target=stderr.read, daemon=True).start()
            return found.group(1).decode()
    raise RuntimeError(f"chromium exited ({proc.wait()}) without a DevTools endpoint")
