"""Who is calling: the sidecar's API key judged once per request (compared in constant
time, wrong ones counted as guesses and throttled: :mod:`kernel.gateway.guesses`), and
the caller kind the guard sets (the key, a console sign-in, or nobody).

Public API: :data:`API_KEY`, :data:`CALLER`, :data:`GUESSES`, :func:`caller_of`,
:func:`authorized`, :func:`same_secret`, :func:`given_key`, :func:`peer_of`,
:func:`wrong_key`, :func:`key_guess` (:class:`KeyGuess`).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from aiohttp import web

from kernel.core.errors import http_status
from kernel.core.i18n import t
from kernel.gateway.api import ApiError
from kernel.gateway.guesses import STRONG_KEY_CHARS, KeyGuesses

API_KEY = web.AppKey("api_key", str)
# Who is calling, as the guard judged it: the sidecar's key, a console sign-in (its
# cookie and CSRF token), or nobody at all (only with gateway.auth = "none").
Caller = Literal["key", "console", "keyless"]
CALLER = web.RequestKey("caller", str)


def caller_of(request: web.Request) -> Caller:
    """The request's caller kind (set by the guard before any handler runs)."""
    kind = request.get(CALLER, "keyless")
    return "key" if kind == "key" else "console" if kind == "console" else "keyless"


GUESSES = web.AppKey("key_guesses", KeyGuesses)
KEY_JUDGED = web.RequestKey("key_judged", bool)


def same_secret(given: str, wanted: str) -> bool:
    """``given`` is ``wanted``, compared in constant time: THE comparison of a secret
    (the API key, a CSRF token). A header byte that is not UTF-8 arrives as a surrogate
    escape and is compared as sent; a lone surrogate from JSON is no secret."""
    try:
        raw = given.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(raw, wanted.encode())


def given_key(request: web.Request) -> str:
    """The key a request carries: ``X-API-Key``, else ``Authorization: Bearer``."""
    given = request.headers.get("X-API-Key", "")
    auth = request.headers.get("Authorization", "")
    if not given and auth[:7].lower() == "bearer ":
        given = auth[7:].strip()
    return given


def peer_of(request: web.Request) -> str:
    """The peer's address ("-" when the transport has none)."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return str(peer[0]) if isinstance(peer, tuple) and peer else "-"


def authorized(request: web.Request, *, refuse: bool = True) -> bool:
    """The request carries the sidecar's key, judged once per request (always true when
    no key is set; see :func:`_judge`). ``refuse=False``, on a route open to all: a
    throttled caller is served as without a key instead of 429. A wrong key counts as
    a guess; no key sent is none."""
    judged = request.get(KEY_JUDGED)
    if judged is not None:
        return judged
    key = request.app.get(API_KEY, "")
    given = given_key(request) if key else ""
    judged = _judge(request, given, key, refuse) if key and given else not key
    request[KEY_JUDGED] = judged
    return judged


def _judge(request: web.Request, given: str, key: str, refuse: bool) -> bool:
    """``given`` is the key. While the caller's guesses are throttled a key short
    enough to be guessed is not compared (429 ``too_many_wrong_keys`` with
    ``Retry-After``); one too long to guess (:data:`STRONG_KEY_CHARS`: the generated
    key) is, so a flood of wrong keys, from any address, never locks its holder out —
    the flood itself still gets 429, and counting it further is pointless."""
    wait = _guess_wait(request)
    if wait and len(key) < STRONG_KEY_CHARS:
        _throttled(wait, refuse)
        return False
    if same_secret(given, key):
        return True
    if wait:
        _throttled(wait, refuse)
        return False
    wrong_key(request)
    return False


def _guess_wait(request: web.Request) -> int:
    guesses = request.app.get(GUESSES)
    return guesses.wait(peer_of(request)) if guesses is not None else 0


def _throttled(
    wait: int, refuse: bool = True, code: str = "too_many_wrong_keys", words: str = ""
) -> None:
    if refuse:
        raise ApiError(
            http_status(code, 429),
            code,
            t(words or "gw.key_throttled", seconds=wait),
            {"retry_after": wait},
            {"Retry-After": str(wait)},
        )


def wrong_key(request: web.Request) -> None:
    """Count the wrong key (or token) the request carried as one guess."""
    guesses = request.app.get(GUESSES)
    if guesses is not None:
        guesses.count(peer_of(request))


class KeyGuess:
    """A guess whose verdict comes after an ``await`` (a sign-in's body): counted
    before (:func:`key_guess`), given back unless :meth:`wrong` is called. Made while
    throttled (a key too long to guess is still judged then), it is not counted, and
    :meth:`wrong` answers 429 instead of the wrong key's 401."""

    def __init__(
        self,
        guesses: KeyGuesses | None,
        address: str,
        wait: int = 0,
        code: str = "",
        words: str = "",
    ) -> None:
        self._guesses = guesses if not wait else None
        self._address = address
        self._at = self._guesses.count(address) if self._guesses is not None else 0.0
        self._wait, self._code, self._words = wait, code, words
        self.judged_wrong = False

    def wrong(self) -> None:
        self.judged_wrong = True
        if self._wait:
            _throttled(self._wait, True, self._code, self._words)

    def close(self) -> None:
        if self._guesses is not None and not self.judged_wrong:
            self._guesses.give_back(self._address, self._at)


@contextmanager
def key_guess(request: web.Request, code: str, words: str) -> Iterator[KeyGuess]:
    """One guess of the key made in a body: refused with 429 ``code`` while throttled
    (unless the key is too long to guess: see :func:`_judge`), counted before the body
    is awaited (so concurrent requests cannot all slip past the limit), given back when
    it ends without :meth:`KeyGuess.wrong`."""
    wait = _guess_wait(request)
    if wait and len(request.app.get(API_KEY, "")) < STRONG_KEY_CHARS:
        _throttled(wait, True, code, words)
    guess = KeyGuess(request.app.get(GUESSES), peer_of(request), wait, code, words)
    try:
        yield guess
    finally:
        guess.close()
