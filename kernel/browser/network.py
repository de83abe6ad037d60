"""Every request a browser page makes, fetched by Kernel through web_fetch's guard.

Chromium makes no connection of its own: each context routes ``**/*`` here, and an
http(s) request is fetched with :func:`kernel.web.guard.guarded_client` (the address
checked is the address connected to, so a name that answers public and then private
gains nothing; no proxy; at most ``[web] max_bytes`` per body, gzip counted inflated),
then handed back to Chromium with ``route.fulfill``. Cookies still work: Chromium puts
its own ``Cookie`` header on the routed request and keeps the ``Set-Cookie`` of what it
is given.

Redirects: Playwright routes only the first request of a redirect chain, so none is
ever left to Chromium. A sub-resource's redirects are followed here (each hop through
the same guard, up to ``[web] max_redirects``) and the last answer given; a top-level
navigation's redirect is refused or its target recorded for :mod:`kernel.browser.pages`
to open (a new, routed navigation). What is refused: another scheme than http(s)
(``data:``, ``blob:`` and ``about:`` never touch the network and pass), an address the
guard refuses, a body past the cap, an attachment (downloads are refused), WebSockets
(routed to a close). A refused top-level navigation is remembered on the
:class:`Traffic` so the tool can say why the page did not open.

Public API: :class:`Traffic`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from kernel.config.web import WebConfig
from kernel.core.capped import BodyRefused, read_capped
from kernel.core.errors import ToolError
from kernel.core.i18n import t
from kernel.web.guard import BlockedAddressError, Resolver, guarded_client

log = logging.getLogger(__name__)

_LOCAL_SCHEMES = ("data:", "blob:", "about:")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Not passed on: hop-by-hop, what this fetch decides itself, and what Chromium must not
# read twice (the body is handed over inflated and whole).
_DROPPED_OUT = frozenset({"host", "connection", "content-length", "accept-encoding", "keep-alive"})
_DROPPED_IN = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}
)


@dataclass
class Refusal:
    """Why the last top-level navigation did not happen (the tool's words)."""

    text: str


class Traffic:
    """One chat's route handler and the client it fetches with (closed with the page)."""

    def __init__(
        self,
        web: WebConfig,
        *,
        resolver: Resolver | None = None,
        network: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.web = web
        self._client = guarded_client(
            web, timeout=web.fetch_timeout, resolver=resolver, network=network
        )
        self.refusal: Refusal | None = None  # the last refused top-level navigation
        self.redirect: str | None = None  # where the last top-level navigation redirected
        self.downloads = 0  # downloads refused since the page was last read

    async def close(self) -> None:
        await self._client.aclose()

    async def attach(self, context: Any) -> None:
        """Route every request and WebSocket of ``context`` (a Playwright BrowserContext)."""
        await context.route("**/*", self.handle)
        await context.route_web_socket("**/*", _refuse_socket)

    async def handle(self, route: Any) -> None:
        """Playwright's route handler: fulfil a checked fetch, or abort. Nothing escapes
        it (a page closed meanwhile: the request is simply dropped)."""
        try:
            await self._handle(route)
        except Exception as exc:
            log.info("browser: a request was dropped (%s)", type(exc).__name__)
            with contextlib.suppress(Exception):
                await route.abort("failed")

    async def _handle(self, route: Any) -> None:
        request = route.request
        url: str = request.url
        if url.startswith(_LOCAL_SCHEMES):
            await route.continue_()
            return
        top = request.is_navigation_request() and _top_frame(request)
        if not url.startswith(("http://", "https://")):
            self._refused(top, t("browser.bad_url", problem=url.split(":", 1)[0][:20]))
            await route.abort("blockedbyclient")
            return
        try:
            answer = await self._fetch(request, url, follow=not top)
        except BodyRefused as exc:
            log.info("browser: a body was refused (%s)", type(exc).__name__)
            await route.abort("failed")
            return
        except ToolError as exc:
            self._refused(top, _browser_words(exc, url))
            await route.abort("blockedbyclient")
            return
        except (httpx.HTTPError, httpx.InvalidURL, TimeoutError) as exc:
            log.info("browser: a request failed (%s)", type(exc).__name__)
            await route.abort("connectionfailed")
            return
        status, headers, body = answer
        if top and status in _REDIRECTS and "location" in headers:
            self.redirect = str(httpx.URL(url).join(headers["location"].split("\n")[0]))
            await route.abort("aborted")
            return
        if top and _download(headers):
            self.downloads += 1
            log.info("browser: a download was refused")
            self._refused(top, t("browser.download_refused"))
            await route.abort("blockedbyclient")
            return
        await route.fulfill(status=status, headers=headers, body=body)

    def _refused(self, top: bool, text: str) -> None:
        if top:
            self.refusal = Refusal(text)

    async def _fetch(
        self, request: Any, url: str, *, follow: bool
    ) -> tuple[int, dict[str, str], bytes]:
        """GET/POST … ``url`` as the page asked (its headers, its body), through the guard;
        ``follow``: redirects followed here. (status, headers, body)."""
        sent = {
            k: v
            for k, v in (await request.all_headers()).items()
            if not k.startswith(":") and k.lower() not in _DROPPED_OUT
        }
        sent["accept-encoding"] = "gzip"
        method: str = request.method
        body: bytes | None = request.post_data_buffer
        async with asyncio.timeout(self.web.fetch_timeout):
            for _ in range(self.web.max_redirects + 1):
                status, headers, data = await self._one(method, url, sent, body)
                location = headers.get("location")
                if not follow or status not in _REDIRECTS or not location:
                    return status, headers, data
                url = str(httpx.URL(url).join(location.split("\n")[0]))
                if not url.startswith(("http://", "https://")):
                    raise ToolError(t("browser.bad_url", problem=url.split(":", 1)[0][:20]))
                if status in (301, 302, 303) and method != "HEAD":
                    method, body = "GET", None
                    sent.pop("content-type", None)
        return status, headers, data

    async def _one(
        self, method: str, url: str, sent: dict[str, str], body: bytes | None
    ) -> tuple[int, dict[str, str], bytes]:
        async with self._client.stream(method, url, headers=sent, content=body) as response:
            data = await read_capped(
                response.aiter_raw(),
                self.web.max_bytes,
                declared=response.headers.get("content-length"),
                encoding=response.headers.get("content-encoding", ""),
            )
            headers: dict[str, str] = {}
            for key, value in response.headers.multi_items():
                key = key.lower()
                if key in _DROPPED_IN:
                    continue
                joiner = "\n" if key == "set-cookie" else ", "
                headers[key] = f"{headers[key]}{joiner}{value}" if key in headers else value
            return response.status_code, headers, data


def _top_frame(request: Any) -> bool:
    """Whether a navigation request is the page's own (not a frame's, not a popup's)."""
    try:
        return request.frame.parent_frame is None
    except Exception:  # Playwright: no frame yet (a popup's first navigation)
        return True


_SHOWN = ("text/", "image/", "application/xhtml+xml", "application/xml", "application/json")


def _download(headers: dict[str, str]) -> bool:
    """Whether Chromium would save this answer rather than show it."""
    if "attachment" in headers.get("content-disposition", "").lower():
        return True
    media = headers.get("content-type", "text/html").split(";", 1)[0].strip().lower()
    return not media.startswith(_SHOWN)


def _browser_words(exc: ToolError, url: str) -> str:
    """The guard's refusal in the browser's words (the catalogue's)."""
    host = httpx.URL(url).host
    if isinstance(exc, BlockedAddressError):
        return t("browser.refused", host=host, problem=exc.kind)
    if "could not be resolved" in str(exc):
        return t("browser.unresolved", host=host)
    return str(exc)


async def _refuse_socket(socket: Any) -> None:
    """WebSockets are not opened: Kernel cannot check where they connect."""
    log.info("browser: a WebSocket was refused")
    await socket.close(code=1008, reason="refused by Kernel")
