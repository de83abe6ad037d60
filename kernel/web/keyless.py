"""``web_search`` with no key (issue 38 item 5): with no ``[web.search]`` provider set,
one search goes to a keyless HTML endpoint (``[web.search] keyless_url``, DuckDuckGo's
``html.duckduckgo.com/html/`` by default), whose result page is read with lxml (already
kept: trafilatura brings it) into the same ``[{title, url, snippet, date}]`` the
key-based providers give.

The page's shape (DuckDuckGo's HTML-only interface): each organic result is a
``div.result`` holding ``a.result__a`` (title; its ``href`` is either the address or
DuckDuckGo's ``//duckduckgo.com/l/?uddg=<address>&rut=…`` redirect) and
``.result__snippet``; ads carry ``result--ad``; "no results" is ``div.no-results``. A
search it takes for a robot is answered with HTTP 202 (or 403) and an "anomaly" page
(``anomaly-modal``, ``challenge-form``): that, a rate limit or an unreachable endpoint
is refused in words that name the fix, a key-based provider.

The endpoint is asked at most ``keyless_per_minute`` times a minute, counted here on the
process's monotonic clock (:class:`~kernel.core.window.SlidingWindow`): past it a search
is refused at once, saying when the next may run.

Public API: :class:`Keyless`, :func:`parse`, :data:`PROVIDER`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from kernel.config.web import WebSearchConfig
from kernel.core.capped import TooLarge, read_capped
from kernel.core.errors import ToolError
from kernel.core.i18n import t
from kernel.core.tls import tls_context
from kernel.core.untrusted import untrusted
from kernel.core.window import SlidingWindow
from kernel.web.results import MAX_URL, result_of

log = logging.getLogger(__name__)

PROVIDER = "keyless"  # how results name their source: "web_search: keyless"
MAX_PAGE = 2_000_000  # bytes of a result page read
_BLOCKED = (b"anomaly-modal", b"challenge-form", b"anomaly.js")


class Blocked(Exception):
    """The endpoint answered with a robot check instead of results."""


class Keyless:
    """Keyless searches and their own rate limit (one per registry: one per Kernel)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._window: SlidingWindow | None = None

    def _room(self, cfg: WebSearchConfig) -> None:
        """Count one search, or refuse it when the minute's share is used."""
        if self._window is None or self._window.limit != cfg.keyless_per_minute:
            self._window = SlidingWindow(cfg.keyless_per_minute, 60.0)
        now = self._clock()
        wait = self._window.wait(now)
        if wait > 0:
            log.info("web_search: keyless search refused by its own rate limit")
            raise ToolError(
                t("search.keyless_rate", limit=cfg.keyless_per_minute, seconds=int(wait) + 1)
            )
        self._window.take(now)

    async def search(self, cfg: WebSearchConfig, user_agent: str, query: str, wanted: int) -> str:
        """One search: the model's text (outside content), or ToolError naming the fix."""
        self._room(cfg)
        where = _place(cfg.keyless_url)
        try:
            page = await _ask(cfg, user_agent, query)
        except Blocked:
            log.info("web_search: the keyless endpoint answered with a robot check")
            raise ToolError(t("search.keyless_blocked", where=where)) from None
        except (TimeoutError, httpx.TimeoutException):
            log.info("web_search: the keyless endpoint timed out")
            raise ToolError(
                t("search.keyless_unreachable", where=where, why=f"> {cfg.timeout:g} s")
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
            log.info("web_search: the keyless endpoint is unreachable (%s)", type(exc).__name__)
            why = type(exc).__name__
            raise ToolError(t("search.keyless_unreachable", where=where, why=why)) from None
        results = await asyncio.to_thread(parse, page)
        if results is None:
            log.info("web_search: the keyless endpoint answered a page of another shape")
            raise ToolError(t("search.keyless_shape", where=where))
        results = results[:wanted]
        log.info("web_search: keyless answered %d results", len(results))
        source = f"web_search: {PROVIDER}"
        if not results:
            return untrusted(source, f"no results for {json.dumps(query, ensure_ascii=False)}")
        return untrusted(source, json.dumps(results, ensure_ascii=False, indent=1))


async def _ask(cfg: WebSearchConfig, user_agent: str, query: str) -> bytes:
    """POST the query as the HTML interface's form does; its page (Blocked: a robot check)."""
    async with (
        asyncio.timeout(cfg.timeout),
        httpx.AsyncClient(
            timeout=cfg.timeout, follow_redirects=False, verify=tls_context(), trust_env=False
        ) as client,
        client.stream(
            "POST",
            cfg.keyless_url + "/",
            data={"q": query, "b": ""},
            headers={
                "User-Agent": user_agent,
                "Accept": "text/html",
                "Accept-Encoding": "identity",
            },
        ) as response,
    ):
        status = response.status_code
        if status in (202, 403, 418, 429):
            log.info("web_search: the keyless endpoint answered HTTP %d", status)
            raise Blocked
        if status != 200:
            log.info("web_search: the keyless endpoint answered HTTP %d", status)
            raise ToolError(
                t("search.keyless_status", where=_place(cfg.keyless_url), status=status)
            )
        try:
            page = await read_capped(response.aiter_raw(), MAX_PAGE)
        except TooLarge:
            raise ToolError(t("search.keyless_shape", where=_place(cfg.keyless_url))) from None
    if any(marker in page for marker in _BLOCKED):
        raise Blocked
    return page


def parse(page: bytes) -> list[dict[str, str]] | None:
    """The organic results of a result page, in order; [] for "no results"; None for a
    page that is neither (its shape changed). lxml is imported here, at the first search."""
    import lxml.html

    try:
        tree = lxml.html.document_fromstring(page)
    except (ValueError, lxml.etree.ParserError):  # an empty or unreadable page
        return None
    found: list[dict[str, str]] = []
    blocks = tree.xpath('//div[contains(concat(" ", normalize-space(@class), " "), " result ")]')
    for block in blocks:
        if "result--ad" in (block.get("class") or ""):
            continue
        links = block.xpath('.//a[contains(@class, "result__a")]')
        if not links:
            continue
        url = _address(links[0].get("href") or "")
        if not url or len(url) > MAX_URL:
            continue
        snippet = block.xpath('string(.//*[contains(@class, "result__snippet")][1])')
        result = result_of(links[0].text_content(), url, snippet, "")
        if result is not None:
            found.append(result)
    if found or tree.xpath('//*[contains(@class, "no-results")]'):
        return found
    return None


def _address(href: str) -> str:
    """The result's own address: DuckDuckGo's ``/l/?uddg=`` redirect unwrapped."""
    href = href.strip()
    try:
        parts = urlsplit(href if "://" in href or not href.startswith("//") else "https:" + href)
    except ValueError:
        return ""
    if parts.path == "/l/" and (parts.hostname or "").endswith("duckduckgo.com"):
        target: Any = parse_qs(parts.query).get("uddg", [""])[0]
        return str(target)
    if (parts.hostname or "").endswith("duckduckgo.com"):
        return ""  # an ad's y.js, a settings link: not a result
    return href


def _place(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc.rsplit("@", 1)[-1] or "?"
