"""Guesses of the sidecar's key, throttled (issue 33): a wrong ``X-API-Key`` or
``Authorization: Bearer`` on any route, and a console sign-in, count as one guess, from
one address and from everywhere together. Over either limit the caller's key is not
even compared: 429 with ``Retry-After`` until a slot frees (:func:`kernel.gateway.api.
authorized`, :func:`kernel.gateway.api.key_guess`). A right key is never counted.

The limits are constants, not settings: they are no owner's choice to make (a right
key never meets them; a generated key cannot be guessed at any rate), and they only
bound how fast a weak configured key can be tried. The overall limit is what rotating
the source address (any of 127/8, or an IPv6 /64, which counts as one address) cannot
multiply; while it holds, every key is refused, the owner's own too — a console
already signed in (cookie and CSRF token) and Telegram go on working.

Memory stays bounded: at most :data:`MAX_ADDRESSES` addresses are remembered, the
least recently counted dropped first. Each counted guess also takes an overall slot,
so no more than :data:`OVERALL` addresses have a guess in the window at once: only idle
ones are ever dropped.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from kernel.core.window import SlidingWindow

PER_ADDRESS = 10  # guesses a minute from one address (an IPv6 /64)
OVERALL = 30  # guesses a minute from all addresses together
WINDOW = 60.0
MAX_ADDRESSES = 256  # > OVERALL: see the module's docstring


def address_group(address: str) -> str:
    """The unit an address is counted in: an IPv4 address (an IPv4-mapped IPv6 one
    too) as itself, an IPv6 address as its /64 (one host holds a whole /64)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class KeyGuesses:
    """Who may guess the key now, and the guesses counted (pure bookkeeping on
    ``clock``)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        per_address: int = PER_ADDRESS,
        overall: int = OVERALL,
        seconds: float = WINDOW,
    ) -> None:
        self._clock = clock
        self.per_address = per_address
        self.seconds = seconds
        self._overall = SlidingWindow(overall, seconds)
        self._addresses: OrderedDict[str, SlidingWindow] = OrderedDict()

    def __len__(self) -> int:
        """Addresses remembered (at most :data:`MAX_ADDRESSES`)."""
        return len(self._addresses)

    def wait(self, address: str) -> int:
        """Whole seconds until ``address`` may guess (0: now)."""
        now = self._clock()
        if self._overall.idle(now):  # no guess in the window anywhere: the usual case
            return 0
        wait = self._overall.wait(now)
        window = self._addresses.get(address_group(address))
        if window is not None:
            wait = max(wait, window.wait(now))
        return math.ceil(wait) if wait > 0 else 0

    def count(self, address: str) -> float:
        """Count one guess from ``address`` now (after :meth:`wait` said 0); its time,
        for :meth:`give_back`."""
        now = self._clock()
        group = address_group(address)
        window = self._addresses.pop(group, None) or SlidingWindow(self.per_address, self.seconds)
        self._addresses[group] = window  # the most recent last
        while len(self._addresses) > MAX_ADDRESSES:
            self._addresses.popitem(last=False)
        window.take(now)
        self._overall.take(now)
        return now

    def give_back(self, address: str, at: float) -> None:
        """The guess counted at ``at`` was none after all (a right key, a body refused
        before any key was compared)."""
        self._overall.give_back(at)
        window = self._addresses.get(address_group(address))
        if window is not None:
            window.give_back(at)
