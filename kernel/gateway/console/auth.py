"""The console's sign-ins (issue 21): the API key, a one-time link of ``kernel console``
(or, with ``gateway.auth = "none"``, a loopback peer) exchanged for a random session
token in an HttpOnly, SameSite=Strict cookie, and a CSRF token the page keeps in memory
and sends with every state-changing request.

The cookie alone opens nothing but the page's empty shell: every API request and every
console request must also carry the CSRF token, which is handed out only by the sign-in
answer and kept by the page in ``sessionStorage`` (one origin: another port of the same
host, which the cookie also reaches, never gets it).

Sessions live in memory only (a restart signs everyone out); at most
:data:`MAX_SESSIONS`, the oldest dropped first; each ends after
``gateway.console_session_hours``. Tokens are kept as their SHA-256, never as sent;
so are the links (:meth:`ConsoleSessions.link`): at most :data:`MAX_LINKS`, each for
one sign-in within :data:`LINK_SECONDS`.
A sign-in is a guess of the key like a wrong ``X-API-Key``, counted before its body is
read, per address and overall (:mod:`kernel.gateway.guesses`; 429 with Retry-After).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kernel.gateway.apikey import same_secret

COOKIE = "kernel_console"  # + "_<port>": cookies are shared by every port of a host
CSRF_HEADER = "X-CSRF-Token"
MAX_SESSIONS = 32
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LINK_SECONDS = 60.0  # a one-time sign-in link's life (kernel console)
MAX_LINKS = 16  # links not yet used; the oldest dropped first


@dataclass(slots=True)
class ConsoleSession:
    csrf: str
    expires: float  # on the monotonic clock


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


class ConsoleSessions:
    def __init__(self, hours: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.lifetime = hours * 3600
        self._clock = clock
        self._sessions: OrderedDict[bytes, ConsoleSession] = OrderedDict()
        self._links: OrderedDict[bytes, float] = OrderedDict()  # digest -> expiry

    def open(self) -> tuple[str, ConsoleSession]:
        """A new sign-in: (the cookie's token, its session)."""
        token = secrets.token_urlsafe(32)
        session = ConsoleSession(secrets.token_urlsafe(32), self._clock() + self.lifetime)
        self._sessions[_digest(token)] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return token, session

    def get(self, token: str | None) -> ConsoleSession | None:
        """The live session of a cookie's token (an expired one is forgotten)."""
        if not token:
            return None
        key = _digest(token)
        session = self._sessions.get(key)
        if session is None:
            return None
        if session.expires <= self._clock():
            del self._sessions[key]
            return None
        return session

    def close(self, token: str | None) -> None:
        if token:
            self._sessions.pop(_digest(token), None)

    def seconds_left(self, session: ConsoleSession) -> int:
        return max(0, int(session.expires - self._clock()))

    def link(self) -> str:
        """A one-time sign-in token (``kernel console``'s link): good for one sign-in
        within :data:`LINK_SECONDS`, kept as its digest."""
        token = secrets.token_urlsafe(32)
        self._links[_digest(token)] = self._clock() + LINK_SECONDS
        while len(self._links) > MAX_LINKS:
            self._links.popitem(last=False)
        return token

    def redeem(self, token: str) -> bool:
        """Whether ``token`` is a live link; it is spent either way (one use). Every
        kept digest is compared, in constant time."""
        now = self._clock()
        given = _digest(token)
        found = None
        for digest, expires in list(self._links.items()):
            if expires <= now:
                del self._links[digest]
            elif hmac.compare_digest(digest, given):
                found = digest
        return found is not None and self._links.pop(found, None) is not None


def csrf_matches(session: ConsoleSession, given: str | None) -> bool:
    """The request's CSRF header is the session's (constant-time compare)."""
    return bool(given) and same_secret(given or "", session.csrf)


def cookie_name(port: int) -> str:
    return f"{COOKIE}_{port}"
