"""The console's safety over real HTTP, without a browser (issue 21): sign-in for an
HttpOnly SameSite=Strict cookie, the CSRF token on every state-changing request, no
cross-site form posts, CSP and framing headers everywhere, the API key never served,
sign-out and expiry, the no-key case (loopback peers only) and DNS rebinding."""

from __future__ import annotations

import re
import socket
from http.cookies import SimpleCookie
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kernel.config.gateway import GatewayConfig
from kernel.gateway.console import CONSOLE, ConsoleSessions
from kernel.gateway.console.auth import cookie_name
from kernel.gateway.console.pages import STATIC
from tests.conftest import free_port
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def sign_in(sc: Sidecar, key: str = API_KEY) -> tuple[str, str, aiohttp.ClientResponse]:
    """(the cookie's token, the CSRF token, the response) of a sign-in with ``key``."""
    status, data, response = await sc.call("POST", "/console/login", {"api_key": key}, headers={})
    assert status == 200, data
    cookie = SimpleCookie()
    for header in response.headers.getall("Set-Cookie"):
        cookie.load(header)
    return cookie[cookie_name(sc.gateway.port)].value, data["csrf"], response


def with_cookie(sc: Sidecar, token: str, **extra: str) -> dict[str, str]:
    """The sidecar's cookie (its name carries the port) with ``token``."""
    return {"Cookie": f"{cookie_name(sc.gateway.port)}={token}", **extra}


def signed(sc: Sidecar, token: str, csrf: str, **extra: str) -> dict[str, str]:
    """What the page sends: the cookie and the CSRF token it keeps."""
    return with_cookie(sc, token, **{"X-CSRF-Token": csrf}, **extra)


async def page(
    sc: Sidecar, path: str, headers: dict[str, str] | None = None
) -> tuple[int, bytes, aiohttp.ClientResponse]:
    """(status, body, response) of a GET that is not JSON (a page, a redirect)."""
    async with sc.http.get(sc.url + path, headers=headers or {}, allow_redirects=False) as r:
        return r.status, await r.read(), r


def code(data: Any) -> str:
    return str(data["error"]["code"])


async def keyed(sidecar: SidecarFactory, sim: AnthropicSim) -> Sidecar:
    return await sidecar(sim, api_key=API_KEY)


async def test_no_cookie_is_sent_to_sign_in(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    status, _, response = await page(sc, "/console/", {})
    assert status == 303 and response.headers["Location"] == "/console/login"
    status, _, response = await page(sc, "/console", {})
    assert status == 308 and response.headers["Location"] == "/console/"
    # A made-up cookie is no sign-in either, and the API stays shut without the key.
    bogus = with_cookie(sc, "not-a-session")
    status, _, response = await page(sc, "/console/", bogus)
    assert status == 303 and response.headers["Location"] == "/console/login"
    status, data, _ = await sc.call("GET", "/chats", headers=bogus)
    assert status == 401 and code(data) == "unauthorized"
    status, data, _ = await sc.call("GET", "/console/session", headers={})
    assert status == 401 and code(data) == "unauthorized"


async def test_a_wrong_key_is_refused_and_failures_are_throttled(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    # Hostile shapes first (refused as such, not counted as guesses): not a string, far
    # too long, not JSON at all.
    for body in ({"api_key": 5}, {"api_key": "x" * 5000}, ["x"]):
        status, data, _ = await sc.call("POST", "/console/login", body, headers={})
        assert status == 400 and code(data) == "invalid_request"
    status, data, _ = await sc.call(
        "POST", "/console/login", data="api_key=" + API_KEY, headers={"Content-Type": "text/plain"}
    )
    assert status == 415 and code(data) == "unsupported_media_type"
    for attempt in range(GatewayConfig().max_key_guesses_per_client):
        status, data, response = await sc.call(
            "POST", "/console/login", {"api_key": f"guess-{attempt}"}, headers={}
        )
        assert status == 401 and code(data) == "unauthorized"
        assert "Set-Cookie" not in response.headers
    # Now even the right key waits: a guesser cannot keep trying at full speed.
    status, data, response = await sc.call(
        "POST", "/console/login", {"api_key": API_KEY}, headers={}
    )
    assert status == 429 and code(data) == "too_many_sign_ins"
    assert "Set-Cookie" not in response.headers and int(response.headers["Retry-After"]) > 0


async def test_sign_in_sets_a_strict_http_only_cookie_that_opens_the_api(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    token, csrf, response = await sign_in(sc)
    [raw] = response.headers.getall("Set-Cookie")
    attributes = {part.strip().split("=")[0].lower(): part for part in raw.split(";")}
    assert "httponly" in attributes and attributes["samesite"].strip() == "SameSite=Strict"
    assert attributes["path"].strip() == "Path=/" and "max-age" in attributes
    assert token and csrf and token != csrf and API_KEY not in raw
    # The cookie alone opens the page's empty shell, no data; with the token the page
    # keeps, API routes answer without X-API-Key.
    status, _, _ = await page(sc, "/console/", with_cookie(sc, token))
    assert status == 200
    status, data, _ = await sc.call("GET", "/chats", headers=with_cookie(sc, token))
    assert status == 401 and code(data) == "unauthorized"
    status, data, _ = await sc.call("GET", "/chats", headers=signed(sc, token, csrf))
    assert status == 200 and "chats" in data
    status, data, _ = await sc.call("GET", "/console/session", headers=signed(sc, token, csrf))
    assert status == 200 and data["expires_in"] > 0


async def test_a_state_changing_request_needs_the_csrf_token(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    token, csrf, _ = await sign_in(sc)
    before = (await sc.call("GET", "/chats"))[1]["chats"]
    status, data, _ = await sc.call("POST", "/chats", {}, headers=with_cookie(sc, token))
    assert status == 403 and code(data) == "csrf_failed"
    wrong = with_cookie(
        sc, token, **{"X-CSRF-Token": csrf[:-1] + ("A" if csrf[-1] != "A" else "B")}
    )
    status, data, _ = await sc.call("POST", "/chats", {}, headers=wrong)
    assert status == 403 and code(data) == "csrf_failed"
    # The API key does not excuse a cookie-carrying request from its token.
    both = with_cookie(sc, token, **{"X-API-Key": API_KEY})
    status, data, _ = await sc.call("DELETE", "/chats/chat-default", headers=both)
    assert status == 403 and code(data) == "csrf_failed"
    assert (await sc.call("GET", "/chats"))[1]["chats"] == before  # nothing was created
    status, data, _ = await sc.call(
        "POST", "/chats", {}, headers=with_cookie(sc, token, **{"X-CSRF-Token": csrf})
    )
    assert status == 201 and data["channel"] == "console"


async def test_cross_site_posts_are_refused_and_same_origin_allowed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    token, csrf, _ = await sign_in(sc)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for origin in ("https://evil.example", "null", sc.url.replace("http:", "https:")):
        for path in ("/chats", "/console/logout", "/console/login"):
            headers = {"Origin": origin, **form}  # no cookie: a foreign page
            status, data, _ = await sc.call("POST", path, data="session_id=x", headers=headers)
            assert status == 403 and code(data) == "forbidden_origin", (origin, path)
            # With the cookie (SameSite=Strict keeps browsers from sending it) but no
            # token: refused whichever check answers first.
            headers = with_cookie(sc, token, Origin=origin, **form)
            status, data, _ = await sc.call("POST", path, data="session_id=x", headers=headers)
            assert status == 403, (origin, path)
            assert code(data) in ("forbidden_origin", "csrf_failed"), (origin, path)
            # Even with the token a foreign page is refused.
            headers["X-CSRF-Token"] = csrf
            status, data, _ = await sc.call("POST", path, data="session_id=x", headers=headers)
            assert status == 403 and code(data) == "forbidden_origin", (origin, path)
    # The sign-in survived (the logout post did nothing), and the page's own origin works.
    same = with_cookie(sc, token, Origin=sc.url, **{"X-CSRF-Token": csrf})
    status, data, _ = await sc.call("POST", "/chats", {"session_id": "same"}, headers=same)
    assert status == 201 and data["session_id"] == "same"
    # A form post from our own origin is still not JSON: refused, never acted on.
    same_form = with_cookie(sc, token, Origin=sc.url, **form, **{"X-CSRF-Token": csrf})
    status, data, _ = await sc.call("POST", "/chats", data="session_id=f", headers=same_form)
    assert status == 415 and code(data) == "unsupported_media_type"


def _check_headers(response: aiohttp.ClientResponse, what: str) -> None:
    headers = response.headers
    assert headers.get("X-Frame-Options") == "DENY", what
    assert headers.get("X-Content-Type-Options") == "nosniff", what
    csp = headers.get("Content-Security-Policy", "")
    assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp, what
    assert "unsafe-eval" not in csp and "http" not in csp and "*" not in csp, what
    directives = dict(
        (part.strip().split(" ", 1) + [""])[:2] for part in csp.split(";") if part.strip()
    )
    assert directives.get("default-src") == "'none'", what
    if "script-src" in directives:
        assert directives["script-src"] == "'self'", what
    assert "Access-Control-Allow-Origin" not in headers, what


def _assets() -> list[str]:
    return sorted(
        p.name for p in STATIC.iterdir() if re.fullmatch(r"[a-z0-9][\w-]*\.(js|css|svg)", p.name)
    )


async def _everything(sc: Sidecar, token: str) -> list[tuple[str, aiohttp.ClientResponse, bytes]]:
    """Every page, static file and console answer, as signed in with ``token``."""
    paths = ["/console/", "/console/login", "/console/session", "/console/strings"]
    paths += [f"/console/static/{name}" for name in _assets()]
    paths += ["/console/static/nothing.js", "/console/static/..%2Fpages.py", "/console"]
    paths += ["/chats", "/health", "/openapi.json", "/no-such-route"]
    out = []
    for path in paths:
        async with sc.http.get(
            sc.url + path, headers=with_cookie(sc, token), allow_redirects=False
        ) as response:
            out.append((path, response, await response.read()))
    return out


async def test_every_answer_carries_csp_and_frame_headers(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    token, _, login = await sign_in(sc)
    _check_headers(login, "POST /console/login")
    assert {"index.html", "login.html"} <= {p.name for p in STATIC.iterdir()}
    assert "app.js" in _assets() and "console.css" in _assets()
    answers = await _everything(sc, token)
    for path, response, _body in answers:
        _check_headers(response, path)
    served = {path: response for path, response, _ in answers}
    for name in _assets():
        response = served[f"/console/static/{name}"]
        assert response.status == 200, name
    assert served["/console/static/nothing.js"].status == 404
    assert served["/console/static/..%2Fpages.py"].status == 404
    assert served["/console/"].headers["Content-Type"].startswith("text/html")
    # The signed-out redirect carries them too.
    status, _, response = await page(sc, "/console/", {})
    assert status == 303
    _check_headers(response, "303 /console/")


async def test_pages_have_no_inline_script_or_style(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    token, _, _ = await sign_in(sc)
    for path, response, body in await _everything(sc, token):
        if not response.headers.get("Content-Type", "").startswith("text/html"):
            continue
        text = body.decode()
        for script in re.findall(r"<script\b[^>]*>(.*?)</script>", text, re.S | re.I):
            assert not script.strip(), path  # only <script src=...></script>
        assert not re.search(r"<style\b|\sstyle=|\son[a-z]+=", text, re.I), path
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text, re.I), path
    for name in _assets():
        if name.endswith(".js"):
            # The SVG namespace is a name, never fetched; any other absolute URL is out.
            source = (STATIC / name).read_text().replace('"http://www.w3.org/2000/svg"', "")
            assert "innerHTML" not in source and "eval(" not in source, name
            assert not re.search(r"""["'`]https?://""", source), name


async def test_the_api_key_is_never_served(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    token, _, _ = await sign_in(sc)
    async with sc.http.post(sc.url + "/console/login", json={"api_key": API_KEY}) as login:
        seen = [(b"POST /console/login", await login.read() + str(login.headers).encode())]
    seen += [(path.encode(), body) for path, _, body in await _everything(sc, token)]
    seen += [
        (b"headers", str(dict(r.headers)).encode()) for _, r, _ in await _everything(sc, token)
    ]
    needles = [API_KEY.encode(), API_KEY[:12].encode(), API_KEY[-12:].encode()]
    for where, body in seen:
        for needle in needles:
            assert needle not in body, where.decode()
    assert token != API_KEY and API_KEY not in token


async def test_sign_out_ends_the_session(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await keyed(sidecar, anthropic_sim)
    token, csrf, _ = await sign_in(sc)
    other, other_csrf, _ = await sign_in(sc)
    # Sign-out is state-changing: without its token it does nothing.
    status, data, _ = await sc.call("POST", "/console/logout", headers=with_cookie(sc, token))
    assert status == 403 and code(data) == "csrf_failed"
    assert (await sc.call("GET", "/chats", headers=signed(sc, token, csrf)))[0] == 200
    headers = signed(sc, token, csrf)
    status, data, response = await sc.call("POST", "/console/logout", headers=headers)
    assert status == 200 and data == {"signed_out": True}
    assert any(
        h.startswith(f"{cookie_name(sc.gateway.port)}=") and "Max-Age=0" in h
        for h in response.headers.getall("Set-Cookie")
    )
    status, data, _ = await sc.call("GET", "/chats", headers=signed(sc, token, csrf))
    assert status == 401 and code(data) == "unauthorized"
    status, _, _ = await page(sc, "/console/", with_cookie(sc, token))
    assert status == 303
    status, _, _ = await sc.call("GET", "/console/session", headers=signed(sc, token, csrf))
    assert status == 401
    # Another browser's sign-in is its own.
    assert (await sc.call("GET", "/chats", headers=signed(sc, other, other_csrf)))[0] == 200


async def test_an_expired_sign_in_is_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, gateway={"console_session_hours": 2})
    assert sc.gateway._runner is not None
    sessions = sc.gateway._runner.app[CONSOLE]
    clock = Clock()
    monkeypatch.setattr(sessions, "_clock", clock)
    token, csrf, _ = await sign_in(sc)
    clock.now += 2 * 3600 - 1
    status, data, _ = await sc.call("GET", "/console/session", headers=signed(sc, token, csrf))
    assert status == 200 and data["expires_in"] == 1
    clock.now += 1
    status, data, _ = await sc.call("GET", "/chats", headers=signed(sc, token, csrf))
    assert status == 401 and code(data) == "unauthorized"
    status, _, _ = await page(sc, "/console/", with_cookie(sc, token))
    assert status == 303
    # Not revived by going back in time: an expired sign-in is forgotten.
    clock.now -= 10
    assert (await sc.call("GET", "/console/session", headers=signed(sc, token, csrf)))[0] == 401


def test_console_sessions_expire_and_are_bounded_on_their_clock() -> None:
    clock = Clock()
    sessions = ConsoleSessions(1, clock)
    token, session = sessions.open()
    assert sessions.get(token) is session and sessions.seconds_left(session) == 3600
    assert sessions.get(None) is None and sessions.get("") is None and sessions.get("x") is None
    clock.now += 3600
    assert sessions.get(token) is None
    tokens = [sessions.open()[0] for _ in range(40)]
    assert sessions.get(tokens[0]) is None and sessions.get(tokens[-1]) is not None


async def test_with_no_key_a_loopback_peer_signs_in(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})
    token, csrf, _ = await sign_in(sc, key="")
    status, _, _ = await page(sc, "/console/", with_cookie(sc, token))
    assert status == 200
    status, data, _ = await sc.call("GET", "/console/strings", headers={})
    assert status == 200 and data["api_key_required"] is False
    status, data, _ = await sc.call("POST", "/chats", {}, headers=with_cookie(sc, token))
    assert status == 403 and code(data) == "csrf_failed"


async def test_dns_rebinding_is_refused_without_a_key(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})
    for host in ("evil.example", "127.0.0.1.evil.example", f"localhost.evil:{sc.gateway.port}"):
        for method, path, body in (
            ("GET", "/console/", None),
            ("GET", "/console/login", None),
            ("POST", "/console/login", {"api_key": ""}),
        ):
            status, data, response = await sc.call(
                method, path, body, headers={"Host": host}, allow_redirects=False
            )
            assert status == 403 and code(data) == "forbidden_host", (host, path)
            assert "Set-Cookie" not in response.headers


def _outside_address() -> str | None:
    """This machine's address on a non-loopback interface, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))  # no packet is sent (UDP connect)
            address = str(sock.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


async def test_with_no_key_a_peer_from_elsewhere_cannot_sign_in(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """The same application served on a non-loopback address (which Kernel never does
    without a key): a peer from there is refused even when it names a loopback Host."""
    address = _outside_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to connect from")
    sc = await sidecar(anthropic_sim)
    app = sc.gateway.build_app()
    app.on_shutdown.clear()  # the running sidecar's services are not this copy's to end
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, address, port, reuse_address=True)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        pytest.skip(f"cannot listen on {address}")
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"http://{address}:{port}/console/login",
                json={"api_key": ""},
                headers={"Host": f"127.0.0.1:{port}"},
            ) as response,
        ):
            data = await response.json()
            assert response.status == 401 and code(data) == "unauthorized"
            assert "Set-Cookie" not in response.headers
    finally:
        await runner.cleanup()
