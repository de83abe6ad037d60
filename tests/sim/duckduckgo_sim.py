"""DuckDuckGo's keyless HTML interface (``POST https://html.duckduckgo.com/html/``, form
``q=…&b=``) at the wire level, for web_search's keyless fallback (issue 38 item 5).

This machine has no internet, so the page was not recorded live: :func:`result_page`
writes it in the shape DuckDuckGo's HTML-only interface is known to have (as read from
public code that parses it, found through the tool library's code search in 2026-12:
``div.result.results_links.results_links_deep.web-result`` > ``div.links_main.
result__body`` > ``h2.result__title`` > ``a.result__a`` whose ``href`` is the
``//duckduckgo.com/l/?uddg=<address>&rut=…`` redirect; then ``a.result__snippet`` (bold
query words in ``<b>``) and ``a.result__url``; ads as ``div.result.result--ad`` with a
``duckduckgo.com/y.js`` link; nothing found as ``div.no-results``). A search it takes
for a robot gets HTTP 202 with the "anomaly" page (``div.anomaly-modal__title``
"Unfortunately, bots use DuckDuckGo too.", ``form#challenge-form``).

    async with DuckSim() as sim:
        sim.hits = [Hit("Title", "https://example.org/a", "snippet")]
        sim.block_next()        # the next search gets the 202 challenge page
        [call] = sim.calls      # .form: the posted form
"""

from __future__ import annotations

import asyncio
import html
from collections import deque
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote

from aiohttp import web
from multidict import CIMultiDict

from tests.sim.loopback import LoopbackServer
from tests.sim.search_sims import Hit

PATH = "/html/"

ANOMALY = """<!DOCTYPE html><html><head><title>DuckDuckGo</title></head><body>
<div class="anomaly-modal__modal" data-testid="anomaly-modal">
<div class="anomaly-modal__title">Unfortunately, bots use DuckDuckGo too.</div>
<div class="anomaly-modal__description">Please complete the following challenge to confirm
this search was made by a human.</div>
<form id="challenge-form" action="//duckduckgo.com/anomaly.js?sv=html" method="POST">
<div class="anomaly-modal__images"></div></form></div></body></html>"""


def _result(hit: Hit) -> str:
    target = quote(hit.url, safe="")
    link = f"//duckduckgo.com/l/?uddg={target}&amp;rut=0f3c2a9e"
    title, snippet = html.escape(hit.title), hit.snippet  # the snippet keeps its <b>
    shown = html.escape(hit.url.split("://", 1)[-1])
    return f"""
<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel="nofollow" class="result__a" href="{link}">{title}</a>
    </h2>
    <div class="result__extras">
      <div class="result__extras__url">
        <a class="result__url" href="{link}">{shown}</a>
      </div>
    </div>
    <a class="result__snippet" href="{link}">{snippet}</a>
    <div class="clear"></div>
  </div>
</div>"""


AD = """
<div class="result results_links results_links_deep result--ad ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel="nofollow" class="result__a"
         href="https://duckduckgo.com/y.js?ad_domain=ads.example&amp;ad_provider=bing">
         Buy Kernel Now</a>
    </h2>
    <a class="result__snippet" href="https://duckduckgo.com/y.js?ad_domain=ads.example">An
      advertisement.</a>
  </div>
</div>"""


def result_page(query: str, hits: list[Hit], *, ad: bool = True) -> str:
    """A result page for ``query`` in the HTML interface's shape (see the module doc)."""
    found = (
        "".join(_result(h) for h in hits)
        if hits
        else (
            '<div class="no-results">No results found for <b>' + html.escape(query) + "</b>.</div>"
        )
    )
    return f"""<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN">
<html><head><meta http-equiv="content-type" content="text/html; charset=UTF-8">
<title>{html.escape(query)} at DuckDuckGo</title></head>
<body class="body--html">
<div class="header__form">
  <form name="x" class="header__form" action="/html/" method="post">
    <input name="q" autocomplete="off" class="search__input" value="{html.escape(query)}">
    <input name="b" type="hidden" value=""><input type="submit" value="S">
  </form>
</div>
<div id="links" class="results">
{AD if ad and hits else ""}{found}
  <div class="nav-link">
    <form action="/html/" method="post"><input type="submit" class="btn btn--alt" value="Next">
    <input type="hidden" name="q" value="{html.escape(query)}"><input type="hidden" name="s"
    value="10"></form>
  </div>
</div></body></html>"""


@dataclass
class DuckCall:
    method: str
    path: str
    form: dict[str, str]
    headers: CIMultiDict[str]


class DuckSim(LoopbackServer):
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.hits: list[Hit] = []
        self.calls: list[DuckCall] = []
        self._plan: deque[tuple[int, str]] = deque()
        self._arrived = asyncio.Event()

    @property
    def url(self) -> str:
        """What ``[web.search] keyless_url`` names (Kernel adds the trailing /)."""
        return f"http://{self.host}:{self.port}/html"

    def block_next(self, status: int = 202) -> None:
        """The next search gets the robot check (DuckDuckGo's 202 anomaly page)."""
        self._plan.append((status, ANOMALY))

    def answer_next(self, status: int, body: str) -> None:
        self._plan.append((status, body))

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._receive)

    async def _receive(self, request: web.Request) -> web.Response:
        raw = await request.read()
        form = dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
        self.calls.append(DuckCall(request.method, request.path, form, request.headers.copy()))
        self._arrived.set()
        if request.path != PATH:
            return web.Response(status=301, headers={"Location": PATH})
        if self._plan:
            status, body = self._plan.popleft()
            return web.Response(status=status, text=body, content_type="text/html")
        page = result_page(form.get("q", ""), self.hits)
        return web.Response(text=page, content_type="text/html")
