"""The console's own routes (issue 21), outside the API document: the pages and their
static files, sign-in and sign-out, the page's session (its CSRF token) and its words.

- ``GET /console/`` the app (303 to ``/console/login`` without a live sign-in);
  ``GET /console/login`` the sign-in page; ``GET /console/static/<name>`` its scripts
  and styles (a fixed set of plain names, shipped in the package);
- ``POST /console/login`` ``{"api_key": …}`` or ``{"link": …}`` → the cookie (HttpOnly,
  SameSite=Strict) and ``{"csrf": …}``; with ``gateway.auth = "none"`` (no key) only a
  loopback peer may sign in (the sidecar is then loopback-only anyway);
- ``POST /console/link`` (the API key only) → ``{"link", "expires_in"}``: a one-time
  sign-in token for ``kernel console``'s link ``/console/#signin=<token>``;
- ``GET /console/session`` → ``{expires_in, language}`` for a live sign-in (the cookie
  and the token the sign-in answer gave, which the page keeps in ``sessionStorage``);
- ``POST /console/logout`` ends it (its CSRF token required, as for every
  state-changing request carrying the cookie: see :mod:`kernel.gateway.server`);
- ``GET /console/strings`` → the catalogue's ``web.`` words in ``general.language``, and
  ``general.timezone`` (the page shows every time in it, not in the browser's zone).

Every response of the sidecar carries ``X-Frame-Options: DENY``, ``nosniff``, no
referrer and a Content-Security-Policy (the pages': scripts, styles, images and
connections from this origin only; no inline script; nothing else anywhere).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from aiohttp import web

from kernel.config.net import is_loopback
from kernel.core.i18n import get_language, section, t
from kernel.gateway.api import ApiError, deps_of, json_response, read_json, refusal
from kernel.gateway.apikey import API_KEY, KeyGuess, authorized, key_guess, same_secret
from kernel.gateway.console.auth import (
    COOKIE,
    LINK_SECONDS,
    ConsoleSession,
    ConsoleSessions,
    cookie_name,
)

CONSOLE: web.AppKey[ConsoleSessions] = web.AppKey("console_sessions")
SESSION = web.RequestKey("console_session", ConsoleSession)  # cookie + CSRF token
SHELL = web.RequestKey("console_shell", ConsoleSession)  # the cookie alone: the page shell
PREFIX = "/console"
STATIC = Path(__file__).parent / "static"
ASSET = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\.(js|css|svg)$")
TYPES = {"js": "text/javascript", "css": "text/css", "svg": "image/svg+xml"}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
MAX_KEY_CHARS = 4096


def is_console(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def install(app: web.Application, hours: float) -> None:
    """The console's routes and headers on the sidecar's ``app``."""
    app[CONSOLE] = ConsoleSessions(hours)
    app.router.add_get(PREFIX, _to_app)
    app.router.add_get(f"{PREFIX}/", _app_page)
    app.router.add_get(f"{PREFIX}/login", _login_page)
    app.router.add_get(PREFIX + "/static/{name}", _asset)
    app.router.add_post(f"{PREFIX}/login", _sign_in)
    app.router.add_post(f"{PREFIX}/logout", _sign_out)
    app.router.add_post(f"{PREFIX}/link", _link)
    app.router.add_get(f"{PREFIX}/session", _session)
    app.router.add_get(f"{PREFIX}/strings", _strings)


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """On every response: no framing, no sniffing, no referrer, a strict CSP."""
    headers = response.headers
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "no-referrer")
    headers.setdefault("Content-Security-Policy", PAGE_CSP if is_console(request.path) else API_CSP)
    if is_console(request.path):
        headers.setdefault("Cache-Control", "no-store")


_files: dict[str, bytes] = {}


async def _file(name: str) -> bytes | None:
    """A shipped file's bytes (read once, in a thread); None when there is none."""
    cached = _files.get(name)
    if cached is None:
        path = STATIC / name
        try:
            cached = await asyncio.to_thread(path.read_bytes)
        except OSError:
            return None
        _files[name] = cached
    return cached


async def _page(name: str) -> web.Response:
    body = await _file(name)
    if body is None:
        raise refusal("not_found", t("web.missing_file", name=name))
    return web.Response(body=body, content_type="text/html", charset="utf-8")


def signed_in(request: web.Request) -> ConsoleSession | None:
    """The request's live console sign-in: its cookie and its CSRF token (set by the
    guard)."""
    return request.get(SESSION)


def cookie_of(request: web.Request) -> str:
    """This sidecar's cookie name: with its port (cookies reach every port of a host,
    and two Kernels on one machine must not sign each other out)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if isinstance(sockname, tuple) and len(sockname) > 1:
        return cookie_name(int(sockname[1]))
    return COOKIE


def _redirect(status: int, location: str) -> web.Response:
    # A Response, not an HTTPException: the error frame answers those in JSON.
    return web.Response(status=status, headers={"Location": location})


async def _to_app(request: web.Request) -> web.Response:
    return _redirect(308, f"{PREFIX}/")


async def _app_page(request: web.Request) -> web.Response:
    """The shell (it holds no data) for a live cookie; the page then needs its token."""
    if request.get(SHELL) is None and signed_in(request) is None:
        return _redirect(303, f"{PREFIX}/login")
    return await _page("index.html")


async def _login_page(request: web.Request) -> web.Response:
    return await _page("login.html")


async def _asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    match = ASSET.fullmatch(name)
    body = await _file(name) if match else None
    if match is None or body is None:
        raise refusal("not_found", t("web.missing_file", name=name[:80]))
    return web.Response(body=body, content_type=TYPES[match.group(1)], charset="utf-8")


def _peer_is_loopback(request: web.Request) -> bool:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return isinstance(peer, tuple) and bool(peer) and is_loopback(str(peer[0]))


async def _sign_in(request: web.Request) -> web.Response:
    """The CSRF token is in this answer only: the page keeps it (sessionStorage). Each
    sign-in is a guess of the key, counted before its body arrives (429 while the
    caller's guesses are throttled) and given back unless the key was wrong."""
    with key_guess(request, "too_many_sign_ins", "web.throttled") as guess:
        await _judge(request, guess)
    return _signed_in(request)


def _link_judged(request: web.Request, token: Any) -> None:
    """A ``kernel console`` link's token: one sign-in, within its minute (a spent one
    is no guess of the key: 256 random bits are not guessed)."""
    if not isinstance(token, str) or not 0 < len(token) <= MAX_KEY_CHARS:
        raise refusal("invalid_request", t("web.link_field"), {"field": "link"})
    if not request.app[CONSOLE].redeem(token):
        raise refusal("unauthorized", t("web.link_spent"))


def _signed_in(request: web.Request) -> web.Response:
    """A new sign-in: its cookie, and its CSRF token in the answer only."""
    sessions = request.app[CONSOLE]
    name = cookie_of(request)
    sessions.close(request.cookies.get(name))  # a sign-in replaces this browser's last
    token, session = sessions.open()
    response = json_response({"csrf": session.csrf, "expires_in": sessions.seconds_left(session)})
    response.set_cookie(
        name,
        token,
        max_age=sessions.seconds_left(session),
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )
    return response


async def _judge(request: web.Request, guess: KeyGuess) -> None:
    """The sign-in's key (or link) is right (else 401, a wrong key's guess marked wrong;
    400 for a body that names neither)."""
    body: Any = await read_json(request)
    if isinstance(body, dict) and "link" in body:
        _link_judged(request, body["link"])
        return
    given = body.get("api_key", "") if isinstance(body, dict) else None
    if not isinstance(given, str) or len(given) > MAX_KEY_CHARS:
        raise refusal("invalid_request", t("web.key_field"), {"field": "api_key"})
    key = request.app[API_KEY]
    # No key (gateway.auth = "none"): loopback only; a loopback peer signs in.
    ok = same_secret(given, key) if key else _peer_is_loopback(request)
    if not ok:
        guess.wrong()
        raise refusal("unauthorized", t("web.key_wrong"))


async def _link(request: web.Request) -> web.Response:
    """A one-time sign-in link's token for ``kernel console``: the API key only (not a
    console sign-in: a page must not mint sign-ins for others)."""
    if not request.app[API_KEY]:
        raise refusal("forbidden", t("web.link_keyless"))
    if not authorized(request):
        raise refusal("unauthorized", t("web.link_needs_key"))
    token = request.app[CONSOLE].link()
    return json_response({"link": token, "expires_in": int(LINK_SECONDS)})


async def _sign_out(request: web.Request) -> web.Response:
    name = cookie_of(request)
    request.app[CONSOLE].close(request.cookies.get(name))
    response = json_response({"signed_out": True})
    response.del_cookie(name, path="/")
    return response


async def _session(request: web.Request) -> web.Response:
    """Whether the page's sign-in (cookie and token) still holds, and for how long."""
    session = signed_in(request)
    if session is None:
        raise ApiError(401, "unauthorized", t("web.signed_out"))
    left = request.app[CONSOLE].seconds_left(session)
    return json_response({"expires_in": left, "language": get_language()})


async def _strings(request: web.Request) -> web.Response:
    body = {
        "language": get_language(),
        "timezone": deps_of(request).config.general.timezone,  # every time shown is in it
        "api_key_required": bool(request.app[API_KEY]),
        "strings": section("web."),
    }
    return json_response(body)
