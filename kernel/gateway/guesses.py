"""Guesses of the sidecar's key, throttled (issue 33): a wrong ``X-API-Key`` or
``Authorization: Bearer`` on any route, and a console sign-in, count as one guess, from
one address and from everywhere together. Over either limit the caller's key is not
even compared: 429 with ``Retry-After`` until a slot frees (:func:`kernel.gateway.api.
authorized`, :func:`kernel.gateway.api.key_guess`). A right key is never counted.

The limits, a minute each, are ``gateway.max_key_guesses_per_client`` (one address;
an IPv6 /64 counts as one) and ``gateway.max_key_guesses`` (all addresses together:
what rotating the source address, any of 127/8, cannot multiply). While a limit holds
a key short enough to be guessed is refused unread, the owner's own too (a guesser
must learn nothing; a console already signed in and Telegram go on working). A key of
:data:`STRONG_KEY_CHARS` or more — the generated one is 43 — is still compared: no
number of guesses finds it, and anyone on the machine could otherwise lock its owner
(and every delegation's run token) out with a minute of wrong keys.

Memory stays bounded: at most :data:`MAX_ADDRESSES` addresses (or one more than the
overall limit) are remembered, the least recently counted dropped first. Each counted
guess also takes an overall slot, so no more addresses than the overall limit have a
guess in the window at once: only idle ones are ever dropped.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from kernel.core.window import SlidingWindow

WINDOW = 60.0  # the limits are a minute's
STRONG_KEY_CHARS = 32  # a key this long is beyond guessing at any rate a sidecar serves
MAX_ADDRESSES = 256


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
        per_address: int,
        overall: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        seconds: float = WINDOW,
    ) -> None:
        self._clock = clock
        self.per_address = per_address
        self.seconds = seconds
        self._overall = SlidingWindow(overall, seconds)
        self._addresses: OrderedDict[str, SlidingWindow] = OrderedDict()
        self._max_addresses = max(MAX_ADDRESSES, overall + 1)  # see the module's docstring

    def __len__(self) -> int:
        """Addresses remembered (bounded: see the module's docstring)."""
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
        while len(self._addresses) > self._max_addresses:
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
