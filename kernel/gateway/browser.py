"""Web pages must not drive the sidecar: the ``Origin`` and ``Host`` checks made before
any handler (a foreign page, DNS rebinding), and what a loopback ``Host`` is.

Public API: :data:`ORIGINS` (the app's allowed origins), :func:`browser_refusal`,
:func:`loopback_host`.
"""

from __future__ import annotations

import ipaddress
import re

from aiohttp import web

from kernel.config import is_loopback
from kernel.core.i18n import t
from kernel.gateway.api import ApiError, refusal
from kernel.gateway.apikey import API_KEY
from kernel.gateway.console import is_console

ORIGINS = web.AppKey("origins", list[str])


_PORT = re.compile(r":[0-9]{0,5}")


def loopback_host(value: str) -> bool:
    """A ``Host`` header naming this machine literally: :func:`is_loopback` with an
    optional ``:port``, IPv6 in brackets (``[::1]:8088``). Anything else is a name that
    may resolve anywhere (DNS rebinding: ``127.evil.example``, ``localhost.evil``)."""
    if value.startswith("["):
        end = value.find("]")
        name, rest = value[1:end], value[end + 1 :]
        if end < 0 or ":" not in name:  # no closing bracket, or [127.0.0.1]
            return False
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
    return (not rest or _PORT.fullmatch(rest) is not None) and is_loopback(name)


def browser_refusal(request: web.Request, signed: bool) -> ApiError | None:
    """Web pages must not drive the sidecar: a foreign ``Origin`` is refused, and with no
    API key a ``Host`` that is not a loopback name (DNS rebinding) too. ``signed``: the
    request carries a live console sign-in (its pages may call the API)."""
    origin = request.headers.get("Origin")
    # Only browsers send Origin, and no page is trusted unless listed or the sidecar's
    # own (the console's pages: workspace files are served as downloads, never as
    # pages): a local dev server's page is a web page like any other.
    if origin is not None and origin.rstrip("/") not in request.app[ORIGINS]:
        # The console's own pages, from this origin, signed in (or signing in).
        console = signed or is_console(request.path)
        if not (console and _same_origin(request, origin)):
            return refusal("forbidden_origin", t("gw.foreign_origin"))
    if not request.app[API_KEY] and not _host_allowed(request):
        return refusal("forbidden_host", t("gw.foreign_host"))
    if is_console(request.path) and not _console_host(request):
        # With a key set any Host is let through to the API (it needs the key); the
        # console's sign-in and pages only under a name no other site can rebind.
        return refusal("forbidden_host", t("gw.foreign_host"))
    return None


def _console_host(request: web.Request) -> bool:
    """A literal address, ``localhost``, or a host listed in ``allowed_origins``."""
    hosts = request.headers.getall("Host", [])
    if not hosts:
        return True  # no browser omits Host: not a rebound page
    if len(hosts) != 1:
        return False
    host = hosts[0]
    if any(origin.split("://", 1)[-1] == host for origin in request.app[ORIGINS]):
        return True
    name = host[1 : host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
    if name.lower() == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _same_origin(request: web.Request, origin: str) -> bool:
    """``Origin`` is this sidecar as the browser reached it (scheme and ``Host``)."""
    hosts = request.headers.getall("Host", [])
    scheme = "https" if request.secure else "http"
    return len(hosts) == 1 and origin == f"{scheme}://{hosts[0]}"


def _host_allowed(request: web.Request) -> bool:
    # Not request.host: without a Host header it asks socket.getfqdn(), a blocking DNS
    # lookup. No browser omits Host, so a request without one is not a rebound page.
    hosts = request.headers.getall("Host", [])
    return not hosts or (len(hosts) == 1 and loopback_host(hosts[0]))
