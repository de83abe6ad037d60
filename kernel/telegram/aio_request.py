"""python-telegram-bot's HTTP requests over aiohttp: :class:`AioRequest`, a
``telegram.request.BaseRequest`` (PTB's extension point for another HTTP library) in
place of PTB's ``HTTPXRequest``, for every Bot API call and file download (issue 37: a
``sendChatAction`` through PTB to the simulator in another process took 0.24 ms of this
process's CPU, against 0.75 ms through HTTPXRequest: httpx, httpcore and anyio).

It does what ``HTTPXRequest.do_request`` does: the parameters form-encoded, or multipart
when there are files; PTB's User-Agent; the answer's status and body; ``TimedOut`` for a
timeout (PTB's words for a pool timeout), ``NetworkError`` otherwise, naming only the
exception's class (aiohttp's text quotes the URL, and its path carries the token);
``RuntimeError`` before ``initialize`` or after ``shutdown``; httpx's request line at
INFO (the URL: ``kernel/core/logs.py`` holds it back). No redirect is followed
and no cookie kept; an idle connection is kept 5 s (httpx's defaults). How the rest maps:

- timeouts (a call's own, else the constructor's): ``connect`` bounds opening a
  connection, TCP, TLS and a proxy's CONNECT together (aiohttp's ``connect`` and
  ``sock_connect``; httpx bounds each step). ``read`` bounds each read, from when the
  request is sent (``sock_read``, as httpx's). ``pool`` bounds the wait for one of
  ``connection_pool_size`` connections (a semaphore in front of aiohttp's pool, which
  has that size too). ``write``: aiohttp has no write timeout; on Linux every
  connection's ``TCP_USER_TIMEOUT`` is the larger of ``write_timeout`` and
  ``media_write_timeout``, so data left unacknowledged (or unsent before a closed
  window) that long ends the connection, a ``TimedOut``. A call's own write timeout is
  not honoured (Kernel passes none); elsewhere a stalled write waits for the OS.
- :func:`never_sent`: the error says the request cannot have reached the server (no
  connection could be made in time, none was free in the pool): safe to send again.
- proxies, from the environment as httpx read them (its ``trust_env``): the URL's
  scheme's ``HTTPS_PROXY``/``HTTP_PROXY``, else ``ALL_PROXY``, unless ``NO_PROXY``
  names the host (urllib's reading of them, at ``initialize``). aiohttp's own
  ``trust_env`` ignores ``ALL_PROXY`` and looks proxies and ``~/.netrc`` up in a
  thread at every request. http:// and https:// proxies only: any other (socks) is a
  RuntimeError at construction, as ``HTTPXRequest`` without ``httpx[socks]`` was.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import functools
import io
import logging
import socket
import urllib.request
from collections.abc import AsyncIterator
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData
from yarl import URL

from kernel.core.tls import tls_context

# httpx's request line ("HTTP Request: POST <url> ...", the token in the URL) at INFO,
# under PTB's name for the request class: kernel/core/logs.py holds it at WARNING unless
# general.log_messages is on, as it holds httpx.
_wire = logging.getLogger("telegram.request.AioRequest")
KEEPALIVE = 5.0  # seconds an idle connection is kept (httpx's keepalive_expiry)
POOL_TIMEOUT_MESSAGE: Final = (
    "Pool timeout: All connections in the connection pool are occupied. "
    "Request was *not* sent to Telegram. Consider adjusting the connection "
    "pool size or the pool timeout."
)
_FORM = "application/x-www-form-urlencoded"
_NO_PROXY: dict[str, Any] = {}
_IN_ONE_WRITE = 1 << 20  # aiohttp's bound for a body written at once (its ResourceWarning)


class PoolTimeout(TimeoutError):
    """No connection of the pool became free within the pool timeout: nothing was sent."""


class AioRequest(BaseRequest):
    """PTB's request interface over one ``aiohttp.ClientSession`` (see the module)."""

    def __init__(
        self,
        connection_pool_size: int = 256,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        """As ``HTTPXRequest``'s parameters of the same names (and defaults)."""
        if connection_pool_size < 1:
            raise ValueError("connection_pool_size must be at least 1")
        self._size = connection_pool_size
        self._read = read_timeout
        self._write = write_timeout
        self._connect = connect_timeout
        self._pool = pool_timeout
        self._media_write = media_write_timeout
        self._session: aiohttp.ClientSession | None = None
        self._slots = asyncio.Semaphore(connection_pool_size)
        self._timeouts: dict[tuple[float | None, float | None], aiohttp.ClientTimeout] = {}
        self._proxies = environment_proxies()  # checked here: a socks proxy fails now
        self._headers = {"User-Agent": self.USER_AGENT}
        self._form_headers = {"User-Agent": self.USER_AGENT, "Content-Type": _FORM}

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        """A new session (and connection pool) on the running loop, unless one is open."""
        if self._session is not None and not self._session.closed:
            return
        self._proxies = environment_proxies()
        connector = aiohttp.TCPConnector(
            limit=self._size,
            ssl=tls_context(),
            keepalive_timeout=KEEPALIVE,
            socket_factory=_socket_factory(self._write, self._media_write),
        )
        self._slots = asyncio.Semaphore(self._size)
        self._session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False
        )

    async def shutdown(self) -> None:
        """Close the session and its connections (a later ``initialize`` opens new ones)."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    def _open_session(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError(f"This {type(self).__name__} is not initialized!")
        return session

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        """See ``BaseRequest.do_request`` (``write_timeout``: the module's note)."""
        session = self._open_session()
        headers = self._headers
        body: Any = None
        files = request_data.multipart_data if request_data is not None else None
        if request_data is not None and files:
            body = multipart(request_data.json_parameters, files)
        elif request_data is not None:
            parameters = request_data.json_parameters
            if parameters:  # encoded here, so a lone surrogate fails before anything is sent
                body, headers = urlencode(parameters).encode(), self._form_headers
        timeout = self._timeout(connect_timeout, read_timeout)
        via = self._proxy(url, headers)
        try:
            async with (
                self._slot(pool_timeout),
                session.request(
                    method,
                    url,
                    data=body,
                    headers=via.get("headers", headers),
                    timeout=timeout,
                    allow_redirects=False,
                    proxy=via.get("proxy"),
                    proxy_headers=via.get("proxy_headers"),
                ) as response,
            ):
                answer = await response.read()
        except (aiohttp.ClientError, OSError) as exc:
            raise translated(exc) from exc
        if _wire.isEnabledFor(logging.INFO):  # below its floor unless messages are logged
            _wire.info('HTTP Request: %s %s "%d"', method, url, response.status)
        return response.status, answer

    @contextlib.asynccontextmanager
    async def _slot(self, pool_timeout: ODVInput[float]) -> AsyncIterator[None]:
        """One of the pool's connections for the request (PoolTimeout past the wait)."""
        slots = self._slots
        if slots.locked():
            wait = self._pool if isinstance(pool_timeout, DefaultValue) else pool_timeout
            try:
                async with asyncio.timeout(wait):
                    await slots.acquire()
            except TimeoutError:
                raise PoolTimeout from None
        else:
            await slots.acquire()  # free: taken at once, no timer
        try:
            yield
        finally:
            slots.release()

    def _timeout(
        self, connect_timeout: ODVInput[float], read_timeout: ODVInput[float]
    ) -> aiohttp.ClientTimeout:
        connect = self._connect if isinstance(connect_timeout, DefaultValue) else connect_timeout
        read = self._read if isinstance(read_timeout, DefaultValue) else read_timeout
        timeout = self._timeouts.get((connect, read))
        if timeout is None:  # a few pairs (the defaults, each long poll's): kept
            timeout = aiohttp.ClientTimeout(
                total=None, connect=connect, sock_connect=connect, sock_read=read
            )
            if len(self._timeouts) < 64:
                self._timeouts[(connect, read)] = timeout
        return timeout

    def _proxy(self, url: str, headers: dict[str, str]) -> dict[str, Any]:
        """aiohttp's arguments for the proxy of ``url`` (its credentials go to a CONNECT
        for https, in the request itself for plain http: aiohttp deprecates its own)."""
        if not self._proxies:
            return _NO_PROXY
        proxy, credentials = proxy_for(url, self._proxies)
        if credentials is None:
            return {"proxy": proxy, "headers": headers}
        if url.startswith("https:"):
            tunnel = {"Proxy-Authorization": credentials}
            return {"proxy": proxy, "proxy_headers": tunnel, "headers": headers}
        return {"proxy": proxy, "headers": {**headers, "Proxy-Authorization": credentials}}

    def stream(
        self, url: str, headers: dict[str, str]
    ) -> contextlib.AbstractAsyncContextManager[aiohttp.ClientResponse]:
        """A GET whose answer is read raw as it comes, with the default timeouts (for
        ``download.py``, which maps aiohttp's errors with :func:`translated`)."""
        session = self._open_session()
        sent = {**self._headers, **headers}
        via = self._proxy(url, sent)
        return session.get(
            url,
            headers=via.get("headers", sent),
            timeout=self._timeout(self.DEFAULT_NONE, self.DEFAULT_NONE),
            allow_redirects=False,
            auto_decompress=False,
            proxy=via.get("proxy"),
            proxy_headers=via.get("proxy_headers"),
        )


def multipart(parameters: dict[str, str], files: dict[str, Any]) -> aiohttp.FormData:
    """The multipart body httpx would send: the parameters, then each file with its
    name and type (names as UTF-8, not percent-encoded)."""
    form = aiohttp.FormData(quote_fields=False)
    for name, value in parameters.items():
        value.encode()  # a lone surrogate fails here, before anything is sent
        form.add_field(name, value)
    for name, (filename, content, mime) in files.items():
        filename.encode()
        if isinstance(content, bytes) and len(content) > _IN_ONE_WRITE:
            content = io.BytesIO(content)  # written a chunk at a time, as aiohttp asks
        form.add_field(name, content, filename=filename, content_type=mime)
    return form


def translated(exc: BaseException) -> TimedOut | NetworkError:
    """PTB's error for aiohttp's (``exc`` kept as its cause): never its text."""
    if isinstance(exc, PoolTimeout):
        return TimedOut(POOL_TIMEOUT_MESSAGE)
    if isinstance(exc, TimeoutError) or getattr(exc, "errno", None) == errno.ETIMEDOUT:
        return TimedOut()
    return NetworkError(f"aiohttp.{type(exc).__name__}")


_NOT_SENT = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError, PoolTimeout)


def never_sent(exc: BaseException) -> bool:
    """``exc`` (an error :func:`translated` gave ``__cause__``) says the request never
    reached the server: no connection was made, none was free."""
    return isinstance(exc, _NOT_SENT)


Proxies = dict[str, str]  # scheme ("http", "https", "all", "no") -> URL or host list


def environment_proxies() -> Proxies:
    """The proxy settings httpx would take from the environment; RuntimeError for a
    proxy aiohttp cannot speak to (a socks one)."""
    found = urllib.request.getproxies_environment()
    proxies = {k: v for k, v in found.items() if k in ("http", "https", "all", "no") and v}
    if proxies.get("no", "").strip() == "*" or "*" in proxies.get("no", "").split(","):
        return {}
    for scheme in ("http", "https", "all"):
        if scheme in proxies:
            value = proxies[scheme] if "://" in proxies[scheme] else f"http://{proxies[scheme]}"
            kind = urlsplit(value).scheme.lower()
            if kind not in ("http", "https"):
                raise RuntimeError(
                    f"a {kind} proxy is set in the environment ({scheme.upper()}_PROXY); "
                    "Kernel's Telegram client speaks only to http:// and https:// proxies"
                )
            proxies[scheme] = value
    return proxies if set(proxies) - {"no"} else {}


def proxy_for(url: str, proxies: Proxies) -> tuple[URL | None, str | None]:
    """The proxy for ``url`` and its Proxy-Authorization (from the proxy's URL), or none."""
    parts = urlsplit(url)
    chosen = proxies.get(parts.scheme.lower()) or proxies.get("all")
    if chosen is None or not parts.hostname:
        return None, None
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if "no" in proxies and bypass(parts.hostname, proxies):
        return None, None
    return _parsed(chosen)


@functools.lru_cache(maxsize=8)
def _parsed(proxy_url: str) -> tuple[URL, str | None]:
    """The proxy's URL, and the Proxy-Authorization its credentials make (UTF-8, as
    httpx sends them)."""
    proxy = URL(proxy_url)
    if proxy.user is None:
        return proxy, None
    pair = f"{proxy.user}:{proxy.password or ''}".encode()
    return proxy.with_user(None), "Basic " + base64.b64encode(pair).decode("ascii")


def _socket_factory(*writes: float | None) -> Any:
    """Sockets whose unacknowledged data ends the connection after the longest write
    timeout (Linux's TCP_USER_TIMEOUT); None where that cannot be set."""
    bounds = [w for w in writes if w is not None]
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None or not bounds or len(bounds) < len(writes):
        return None
    milliseconds = max(1, int(max(bounds) * 1000))

    def make(addr_info: Any) -> socket.socket:
        family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
        sock = socket.socket(family=family, type=kind, proto=proto)
        if family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, option, milliseconds)
        return sock

    return make
