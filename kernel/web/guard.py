"""Where web_fetch may connect: public addresses only, checked where the connection is made.

The check sits in an httpcore network backend (:class:`GuardedBackend`): httpcore asks it
to ``connect_tcp(host, port)`` for every new connection (the first request and every
redirect alike), and it resolves the name itself, refuses if ANY address is not public,
and connects to a vetted address. Checking the URL beforehand and letting the library
resolve again later would leave a rebinding race (a name answering public, then private);
here the address checked is the address connected to. TLS still verifies and sends SNI
for the name: httpcore passes the URL's host to ``start_tls``, not what we connected to.

Numbers spelled the way ``inet_aton`` reads them (``2130706433``, ``0177.0.0.1``,
``0x7f.1``) are read here the same way, so they are judged as the addresses they are.

Public API: :func:`guarded_client`, :class:`GuardedBackend`, :func:`address_problem`,
:func:`ip_literal`, :class:`BlockedAddressError`, :data:`Resolver`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpcore
import httpx

from kernel.config.web import WebConfig
from kernel.core.errors import ToolError
from kernel.core.tls import tls_context

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the addresses the name stands for, as strings ("10.0.0.1", "::1").
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

ALLOW_HINT = "set [web] allow_private = true to allow it"

_METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: the v4 is the last 32 bits
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use: an operator's own
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT's IPv4-translated form
_INET_ATON_PART = re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*")


class BlockedAddressError(ToolError):
    """A connection web_fetch refuses to make (``kind``: what the address is)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def ip_literal(host: str) -> IPAddress | None:
    """The address ``host`` spells, read as the resolver would read it (brackets and a
    trailing dot dropped; IPv4 also in inet_aton's forms: 1-4 parts, each decimal,
    0-octal or 0x-hex, the last filling the bytes left), else None (a name)."""
    host = host.strip("[]")
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    return _inet_aton(host)


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_ATON_PART.fullmatch(p) for p in parts):
        return None
    values = [
        int(p[2:], 16) if p[:2].lower() == "0x" else int(p, 8) if p[0] == "0" else int(p)
        for p in parts
    ]
    *head, last = values
    room = 8 * (4 - len(head))
    if any(v > 255 for v in head) or last >= 1 << room:
        return None
    number = 0
    for v in head:
        number = number << 8 | v
    return ipaddress.IPv4Address(number << room | last)


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries to (mapped, compatible, translated, NAT64,
    6to4, Teredo's client), where a connection to it may end up."""
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _TRANSLATED or ip in _NAT64:
        return low
    if int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d, IPv4-compatible (deprecated)
        return low
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def address_problem(ip: IPAddress) -> str | None:
    """What makes ``ip`` not a public address ("loopback", "private", …), None if it is."""
    if ip.version == 6 and ip.scope_id:
        ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    if ip in _METADATA:
        return "cloud metadata"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL:
            return "private (local NAT64)"
        embedded = _embedded_v4(ip)
        if embedded is not None:
            problem = address_problem(embedded)
            return f"{problem}, inside an IPv6 address" if problem else None
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "site-local"  # fec0::/10: deprecated, still private where it is used
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_multicast:
        return "multicast"
    if ip in _CGNAT:
        return "shared (CGNAT)"
    if ip.is_private:
        return "private"
    if ip.is_reserved:
        return "reserved"
    if not ip.is_global:
        return "non-public"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    """The operating system's answer for ``host`` (off the event loop, as asyncio does)."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return [str(info[4][0]) for info in infos]


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the address check in ``connect_tcp``.

    ``resolver``: names to addresses (default: the system's); ``network``: the backend
    that opens the connection to a vetted address (default: httpcore's AnyIO one). Tests
    inject both to stand a "public" name in front of a loopback site.
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolver: Resolver | None = None,
        network: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self._resolve = resolver or system_resolver
        self._network = network or httpcore.AnyIOBackend()

    async def vet(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for ``host``; BlockedAddressError if any of them
        is not public (unless allow_private), ToolError if the name does not resolve."""
        literal = ip_literal(host)
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = list(dict.fromkeys(await self._resolve(host, port)))
            except (OSError, UnicodeError) as exc:
                log.info("web: a name did not resolve (%s)", type(exc).__name__)
                raise ToolError(f"{host} could not be resolved (no such host?)") from None
            if not addresses:
                raise ToolError(f"{host} could not be resolved (no address)")
        if self.allow_private:
            return addresses
        for address in addresses:
            try:
                problem = address_problem(ipaddress.ip_address(address))
            except ValueError:
                problem = "unreadable"
            if problem is not None:
                spelled = "a name" if literal is None else "a literal"
                log.info("web: refused a %s address (%s)", problem, spelled)
                named = host if literal is not None else f"{host} resolves to {address}, which"
                raise BlockedAddressError(
                    f"{named} is not a public address ({problem}); web_fetch reaches only "
                    f"public addresses; {ALLOW_HINT}",
                    problem,
                )
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.vet(host, port)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._network.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise BlockedAddressError("web_fetch does not open local sockets", "unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport, no proxy, its connection pool on a :class:`GuardedBackend`."""

    def __init__(self, backend: GuardedBackend) -> None:
        context = tls_context(trust_env=False)
        super().__init__(verify=context, trust_env=False)
        # httpx offers no public way to hand httpcore a network backend: the pool is
        # built again as httpx builds it (no proxy, HTTP/1.1), with the guarded backend.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context, http1=True, http2=False, network_backend=backend
        )


def _no_cookies() -> CookieJar:
    """A jar that keeps no cookie (and so sends none), even between redirects."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


def guarded_client(
    web: WebConfig,
    *,
    timeout: float,  # noqa: ASYNC109 (per operation; the caller bounds the whole)
    resolver: Resolver | None = None,
    network: httpcore.AsyncNetworkBackend | None = None,
) -> httpx.AsyncClient:
    """A fresh client whose every connection is checked (see the module docstring): no
    proxy from the environment, no cookies kept or sent, no redirects followed (the
    caller follows them, so each is checked again), ``[web] user_agent``."""
    backend = GuardedBackend(allow_private=web.allow_private, resolver=resolver, network=network)
    return httpx.AsyncClient(
        transport=GuardedTransport(backend),
        trust_env=False,
        follow_redirects=False,
        cookies=_no_cookies(),
        timeout=timeout,
        headers={"User-Agent": web.user_agent},
    )
