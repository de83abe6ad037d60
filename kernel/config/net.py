"""Address checks shared by the configuration and the sidecar."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_http_url(value: str) -> bool:
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not 0-65535
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def is_loopback(host: str) -> bool:
    """``host`` is ``localhost`` or a literal loopback address: 127.0.0.0/8, ``::1``, or an
    IPv4-mapped ``::ffff:127.x.y.z``. Nothing that merely looks like one (``127.evil.example``,
    ``localhost.evil``, a zone id): a name other than ``localhost`` may resolve anywhere.
    The one definition for both the bind check and the sidecar's ``Host`` check."""
    name = host.lower()
    if name == "localhost":
        return True
    if "%" in name:  # a zone id (fe80::1%eth0) names an interface, not loopback
        return False
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
