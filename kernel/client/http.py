"""A small blocking HTTP client for the running sidecar (stdlib only: the command line
starts fast and needs no event loop)."""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from http.client import HTTPResponse
from typing import IO, Any

from kernel.config import sidecar_of
from kernel.config.net import is_loopback
from kernel.core.clock import zone_named
from kernel.core.errors import ConfigError, KernelError
from kernel.core.i18n import t

CALL_TIMEOUT = 30.0  # seconds for a plain request
TRANSFER_TIMEOUT = 300.0  # seconds without a byte while a file or an archive moves
TURN_TIMEOUT = 900.0  # seconds without a byte while a turn streams (a delegated CLI is quiet)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A sidecar never redirects: a 3xx is an answer (an error), never followed, so the
    API key is never carried to another host (review R3)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# No proxy from the environment (the sidecar is local or named exactly), no redirects.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


class SidecarUnreachable(KernelError):
    """Nothing answers at the sidecar's address."""


class SidecarError(KernelError):
    """The sidecar answered with an error ``{"error": {code, message, details}}``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


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

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        accept: str = "application/json",
        key: bool = True,
    ) -> urllib.request.Request:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Accept": accept}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key and key:
            headers["X-API-Key"] = self.api_key
        return urllib.request.Request(self.url + path, data=data, method=method, headers=headers)

    def _open(self, request: urllib.request.Request, timeout: float) -> HTTPResponse:
        try:
            response: HTTPResponse = _OPENER.open(request, timeout=timeout)
            return response
        except urllib.error.HTTPError as exc:
            raise _error_of(exc.code, exc.read()) from None
        except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            detail = getattr(reason, "strerror", None) or str(reason)
            raise SidecarUnreachable(t("client.unreachable", url=self.url, detail=detail)) from None

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float = CALL_TIMEOUT
    ) -> Any:
        """One JSON request; ``timeout``: seconds without an answer (longer for a call
        that waits on something, e.g. an MCP server's first connect attempt)."""
        with self._open(self._request(method, path, body), timeout) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def send(self, method: str, path: str, data: bytes, content_type: str) -> Any:
        """A raw body (a file, a zip); the answer is JSON."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if self.api_key:
            headers["X-API-Key"] = self.api_key
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        with self._open(request, TRANSFER_TIMEOUT) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def download(self, path: str, sink: IO[bytes]) -> int:
        """Copy a raw answer (a file, a zip) into ``sink``; returns the byte count."""
        request = self._request("GET", path, accept="*/*")
        count = 0
        with self._open(request, TRANSFER_TIMEOUT) as response:
            while chunk := response.read(256 * 1024):
                sink.write(chunk)
                count += len(chunk)
        return count

    def stream(self, path: str, body: Any) -> Iterator[Any]:
        """The ``data:`` payloads of an SSE answer as they arrive, up to ``[DONE]``.
        Closing the generator closes the connection (which cancels the turn)."""
        request = self._request("POST", path, body, accept="text/event-stream")
        with self._open(request, TURN_TIMEOUT) as response:
            try:
                for raw in response:
                    line = raw.decode("utf-8").rstrip("\r\n")
                    if not line.startswith("data: "):
                        continue
                    payload = line[6:]
                    if payload == "[DONE]":
                        return
                    yield json.loads(payload)
            except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                detail = type(exc).__name__
                raise SidecarUnreachable(t("client.broken", url=self.url, detail=detail)) from None

    def probe(self, timeout: float = 1.0) -> bool:
        """True when a Kernel sidecar answers here."""
        try:
            # Without the key: whatever answers here is not yet known to be Kernel.
            with self._open(self._request("GET", "/version", key=False), timeout) as response:
                return bool(json.loads(response.read()).get("name") == "kernel")
        except (KernelError, ValueError, AttributeError):
            return False


def _error_of(status: int, raw: bytes) -> SidecarError:
    try:
        error = json.loads(raw)["error"]
        return SidecarError(status, str(error["code"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        return SidecarError(status, f"http_{status}", raw.decode("utf-8", "replace")[:200])


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
