"""The Bot API's HTTP client: python-telegram-bot's request interface on aiohttp.

PTB ships one implementation of :class:`telegram.request.BaseRequest`, on httpx; its
documented extension point is a subclass. Kernel's is on aiohttp, which the sidecar
already runs on: its HTTP parser is C, where httpx's stack (httpcore, h11, anyio) is
Python, so a Bot API call costs about a sixth of the CPU on the client's side (0.1
against 0.7 ms here; issue 37 measured it). Everything PTB relies on holds: the
parameters go form-encoded (files as multipart) exactly as HTTPXRequest sends them; a
timeout is :class:`~telegram.error.TimedOut`, any other transport trouble
:class:`~telegram.error.NetworkError`, both naming only the error's type (aiohttp's
messages can carry the URL, and the URL carries the token). :func:`never_reached` tells
a request that provably never got to the API (nothing can be duplicated by sending it
again) from one that may have.

Timeouts keep PTB's meaning: ``connect`` bounds the socket's connection, ``pool`` the
wait for a free connection, ``read`` each wait for the answer's bytes; ``write`` (aiohttp
has no per-write bound) joins the others in one overall limit. Proxies come from the
environment (``HTTPS_PROXY``) as httpx took them; TLS uses the process's one context.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

from kernel.core.tls import tls_context

# Errors raised before a request could reach the API: a refused or failed connection,
# a connection (or a free one in the pool) that did not come in time.
NOT_REACHED: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectorError,
    aiohttp.ConnectionTimeoutError,
)


def never_reached(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) proves the request never got to the API."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, NOT_REACHED):
            return True
        cause = cause.__cause__
    return False


class AiohttpRequest(BaseRequest):
    """:class:`BaseRequest` on one :class:`aiohttp.ClientSession`, made on first use (a
    session belongs to the running loop) and made again after :meth:`shutdown`."""

    __slots__ = ("_limits", "_media_write_timeout", "_pool_size", "_session")

    def __init__(
        self,
        connection_pool_size: int = 256,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        self._pool_size = connection_pool_size
        self._limits = {
            "read": read_timeout,
            "write": write_timeout,
            "connect": connect_timeout,
            "pool": pool_timeout,
        }
        self._media_write_timeout = media_write_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._limits["read"]

    def timeout(self, name: str) -> float | None:
        """The default ``name`` timeout (``read``, ``write``, ``connect``, ``pool``)."""
        return self._limits[name]

    def set_timeout(self, name: str, seconds: float | None) -> None:
        self._limits[name] = seconds

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open session, made now if there is none (call only on the loop)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._pool_size, ssl=tls_context(), ttl_dns_cache=300
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=True,  # HTTPS_PROXY / NO_PROXY, as httpx read them
                headers={"User-Agent": self.USER_AGENT},
                timeout=aiohttp.ClientTimeout(total=None),
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def initialize(self) -> None:
        _ = self.session

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

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
        files = request_data.multipart_data if request_data else None
        read = self._pick(read_timeout, "read")
        connect = self._pick(connect_timeout, "connect")
        pool = self._pick(pool_timeout, "pool")
        write = self._pick(write_timeout, "write")
        if files and isinstance(write_timeout, DefaultValue):
            write = self._media_write_timeout
        timeout = aiohttp.ClientTimeout(
            total=_sum(read, write, connect, pool),
            connect=_sum(connect, pool),
            sock_connect=connect,
            sock_read=read,
        )
        body = _body(request_data, files)
        try:
            async with self.session.request(method, url, data=body, timeout=timeout) as response:
                return response.status, await response.read()
        except TimeoutError as exc:  # aiohttp's timeouts are TimeoutErrors too
            raise TimedOut from exc
        except aiohttp.ClientError as exc:  # never str(exc): it may quote the URL (the token)
            raise NetworkError(f"aiohttp.{type(exc).__name__}") from exc

    def _pick(self, value: ODVInput[float], name: str) -> float | None:
        if isinstance(value, DefaultValue):
            return self._limits[name]
        return value


def _sum(*parts: float | None) -> float | None:
    """The parts' sum; None (no bound) when any part is unbounded."""
    if any(part is None for part in parts):
        return None
    return sum(part for part in parts if part is not None)


def _body(request_data: RequestData | None, files: dict[str, Any] | None) -> Any:
    """The parameters form-encoded (JSON values), or multipart with the files."""
    if request_data is None:
        return None
    fields = request_data.json_parameters
    if not files:
        return fields or None
    form = aiohttp.FormData()
    for name, value in fields.items():
        form.add_field(name, value)
    for name, part in files.items():
        if isinstance(part, tuple):
            filename, content, *rest = part
            form.add_field(name, content, filename=filename, content_type=rest[0] if rest else None)
        else:
            form.add_field(name, part)
    return form
