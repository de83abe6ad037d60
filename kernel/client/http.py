"""The one client of the running sidecar, over httpx: :class:`Sidecar` (blocking, for the
command line, which starts fast and needs no event loop) and :class:`AsyncSidecar` (for
the TUI). Both share what is said when it fails (:func:`error_of`,
:func:`transport_error`), the SSE reader (:func:`sse_payload`) and the connection rules
(:func:`client_options`): no proxy from the environment, no redirect followed, the key
only in the ``X-API-Key`` header, and never in an error or a log line."""

from __future__ import annotations

import json
import os
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import tzinfo
from functools import cache
from typing import IO, Any

import httpx

from kernel.config import sidecar_of
from kernel.config.net import is_loopback
from kernel.core.clock import zone_named
from kernel.core.errors import ConfigError, KernelError
from kernel.core.i18n import t

CALL_TIMEOUT = 30.0  # seconds for a plain request
TRANSFER_TIMEOUT = 300.0  # seconds without a byte while a file or an archive moves
TURN_TIMEOUT = 900.0  # seconds without a byte while a turn streams (a delegated CLI is quiet)
TURN_TIMEOUTS = httpx.Timeout(CALL_TIMEOUT, read=TURN_TIMEOUT)
DONE = object()  # the ``data: [DONE]`` that ends an SSE answer


class SidecarUnreachable(KernelError):
    """Nothing answers at the sidecar's address, or the connection broke."""


class SidecarError(KernelError):
    """The sidecar answered with an error ``{"error": {code, message, details}}``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@cache
def _tls() -> ssl.SSLContext:
    """The TLS settings, built once (a client per request must not load them each time)."""
    return ssl.create_default_context()


def client_options(url: str, api_key: str = "", *, key: bool = True) -> dict[str, Any]:
    """The keyword arguments of every httpx client of the sidecar. A sidecar never
    redirects: a 3xx is an answer (an error), never followed, so the API key is never
    carried to another host (review R3); the sidecar is local or named exactly, so no
    proxy from the environment."""
    headers = {"Accept": "application/json"}
    if api_key and key:
        headers["X-API-Key"] = api_key
    return {
        "base_url": url,
        "headers": headers,
        "timeout": CALL_TIMEOUT,
        "trust_env": False,
        "follow_redirects": False,
        "verify": _tls(),
    }


def error_of(status: int, raw: bytes) -> SidecarError:
    """The sidecar's error answer (or anything else answering there) as a SidecarError."""
    try:
        error = json.loads(raw)["error"]
        return SidecarError(status, str(error["code"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        return SidecarError(status, f"http_{status}", raw.decode("utf-8", "replace")[:200])


def transport_error(url: str, exc: httpx.TransportError) -> SidecarUnreachable:
    """No connection (``client.unreachable``) or one that broke (``client.broken``); the
    detail is the system's reason or the error's kind, never a header or the key."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return SidecarUnreachable(t("client.unreachable", url=url, detail=_reason(exc)))
    if isinstance(exc, httpx.TimeoutException):  # no answer in time: as the CLI always said
        return SidecarUnreachable(t("client.unreachable", url=url, detail="timed out"))
    return SidecarUnreachable(t("client.broken", url=url, detail=type(exc).__name__))


def _reason(exc: BaseException) -> str:
    cause: BaseException | None = exc
    while cause is not None:  # the OSError under httpx's: "Connection refused"
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return type(exc).__name__


def sse_payload(line: str) -> Any:
    """One line of an SSE answer: its ``data:`` payload parsed, :data:`DONE` at the
    end, None for any other line. ValueError when the payload is not JSON."""
    if not line.startswith("data: "):
        return None
    payload = line[6:].rstrip("\r\n")
    return DONE if payload == "[DONE]" else json.loads(payload)


def _json(response: httpx.Response) -> Any:
    return json.loads(response.content) if response.content else None


@dataclass(slots=True)
class Sidecar:
    url: str
    api_key: str = ""
    _zone: tzinfo | None = field(default=None, repr=False, compare=False)

    def zone(self) -> tzinfo:
        """The Kernel's ``general.timezone`` (asked once): the times a verb prints are
        the owner's, never this machine's."""
        if self._zone is None:
            try:
                data = self.call("GET", "/runtime-config")
            except SidecarError:  # an older Kernel: UTC, as the times are stored
                data = None
            self._zone = zone_named(data.get("timezone") if isinstance(data, dict) else None)
        return self._zone

    def _client(self, *, key: bool = True) -> httpx.Client:
        # One client per request: nothing stays open between a verb's calls.
        return httpx.Client(**client_options(self.url, self.api_key, key=key))

    def _send(self, request: httpx.Request, client: httpx.Client) -> httpx.Response:
        """The answer, streaming (the caller closes it); SidecarError for an error
        status, SidecarUnreachable when no answer came."""
        try:
            response = client.send(request, stream=True)
        except httpx.TransportError as exc:
            raise transport_error(self.url, exc) from None
        if response.status_code >= 300:
            try:
                raw = response.read()
            except httpx.TransportError as exc:
                raise transport_error(self.url, exc) from None
            finally:
                response.close()
            raise error_of(response.status_code, raw)
        return response

    def _exchange(self, request: httpx.Request, client: httpx.Client) -> Any:
        with closing(self._send(request, client)) as response:
            try:
                response.read()
            except httpx.TransportError as exc:
                raise transport_error(self.url, exc) from None
            return _json(response)

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float = CALL_TIMEOUT
    ) -> Any:
        """One JSON request; ``timeout``: seconds without an answer (longer for a call
        that waits on something, e.g. an MCP server's first connect attempt)."""
        with self._client() as client:
            request = client.build_request(method, path, json=body, timeout=timeout)
            return self._exchange(request, client)

    def send(self, method: str, path: str, data: bytes, content_type: str) -> Any:
        """A raw body (a file, a zip); the answer is JSON."""
        with self._client() as client:
            headers = {"Content-Type": content_type}
            request = client.build_request(
                method, path, content=data, headers=headers, timeout=TRANSFER_TIMEOUT
            )
            return self._exchange(request, client)

    def download(self, path: str, sink: IO[bytes]) -> int:
        """Copy a raw answer (a file, a zip) into ``sink``; returns the byte count."""
        count = 0
        with self._client() as client:
            headers = {"Accept": "*/*"}
            request = client.build_request("GET", path, headers=headers, timeout=TRANSFER_TIMEOUT)
            with closing(self._send(request, client)) as response:
                try:
                    for chunk in response.iter_bytes(256 * 1024):
                        sink.write(chunk)
                        count += len(chunk)
                except httpx.TransportError as exc:
                    raise transport_error(self.url, exc) from None
        return count

    def stream(self, path: str, body: Any) -> Iterator[Any]:
        """The ``data:`` payloads of an SSE answer as they arrive, up to ``[DONE]``.
        Closing the generator closes the connection (which cancels the turn)."""
        with self._client() as client:
            headers = {"Accept": "text/event-stream"}
            request = client.build_request(
                "POST", path, json=body, headers=headers, timeout=TURN_TIMEOUTS
            )
            with closing(self._send(request, client)) as response:
                try:
                    for line in response.iter_lines():
                        event = sse_payload(line)
                        if event is DONE:
                            return
                        if event is not None:
                            yield event
                except httpx.TransportError as exc:
                    raise transport_error(self.url, exc) from None

    def probe(self, timeout: float = 1.0) -> bool:
        """True when a Kernel sidecar answers here."""
        try:
            # Without the key: whatever answers here is not yet known to be Kernel.
            with self._client(key=False) as client:
                request = client.build_request("GET", "/version", timeout=timeout)
                data = self._exchange(request, client)
            return bool(data.get("name") == "kernel")
        except (KernelError, ValueError, AttributeError):
            return False


class AsyncSidecar:
    """The sidecar from an event loop (the TUI): one client kept until :meth:`close`."""

    def __init__(self, url: str, api_key: str = "") -> None:
        self.url = url.rstrip("/")
        self.client = httpx.AsyncClient(**client_options(self.url, api_key))

    async def call(self, method: str, path: str, **kw: Any) -> Any:
        """One JSON request (``kw``: httpx's ``json``, ``params``); the answer parsed
        (ValueError when it is not JSON)."""
        try:
            response = await self.client.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise transport_error(self.url, exc) from None
        if response.status_code >= 300:
            raise error_of(response.status_code, response.content)
        return _json(response)

    async def stream(
        self, path: str, body: Any, opened: Callable[[httpx.Headers], Awaitable[None]]
    ) -> AsyncIterator[Any]:
        """The ``data:`` payloads of an SSE answer up to ``[DONE]`` (ValueError for one
        that is not JSON); ``opened`` gets the answer's headers as soon as they arrive.
        Closing the generator closes the connection."""
        accept = {"Accept": "text/event-stream"}
        try:
            async with self.client.stream(
                "POST", path, json=body, headers=accept, timeout=TURN_TIMEOUTS
            ) as response:
                if response.status_code >= 300:
                    raise error_of(response.status_code, await response.aread())
                await opened(response.headers)
                async for line in response.aiter_lines():
                    event = sse_payload(line)
                    if event is DONE:
                        return
                    if event is not None:
                        yield event
        except httpx.TransportError as exc:
            raise transport_error(self.url, exc) from None

    async def close(self) -> None:
        await self.client.aclose()


def sidecar_from(env: Mapping[str, str] | None = None) -> Sidecar | None:
    """The sidecar's address and key: ``KERNEL_GATEWAY_URL`` / ``KERNEL_GATEWAY_API_KEY``,
    else config.toml's [gateway], and with no key set there the one Kernel generated in
    its data directory (:func:`kernel.config.sidecar_of`). None when it is off or listens
    on an unknown port."""
    env = os.environ if env is None else env
    gateway, key = sidecar_of(env=env)
    url = env.get("KERNEL_GATEWAY_URL", "").rstrip("/")
    if url:
        parts = urllib.parse.urlsplit(url)
        local = is_loopback(parts.hostname or "")
        if gateway.api_key and parts.scheme == "http" and not local:
            # The key would cross the network in clear: https, an SSH tunnel, or loopback.
            raise ConfigError(t("client.plain_http", url=url))
        # This machine's generated key is for this machine's Kernel only.
        return Sidecar(url, key if local or gateway.api_key else "")
    if not gateway.enabled or gateway.port == 0:
        return None
    # The generated key goes only to this machine: a config.toml in the current folder
    # may name the owner's data directory and any host (a Kernel on another host has a
    # configured key, which a non-loopback bind requires).
    local = is_loopback(gateway.client_host)
    return Sidecar(gateway.url, key if local or gateway.api_key else "")
