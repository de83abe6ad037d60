"""Issue 33 item 2: what can run a program or send a stored secret elsewhere is a
privilege of its own. Every cell against a real Kernel + Gateway: the sidecar's key may,
a web-console session only with the owner's confirmation in Telegram (none runs here:
refused, saying so), a keyless caller never; a keyed provider's new base_url needs its
key given again (a capture server shows where the next turn's key went)."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kernel.core.asks import Question
from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.conftest import SECRET_KEY
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.mcp.conftest import free_port, mcp_toml, stdio_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.telegram.conftest import Factory, asking
from tests.telegram.conftest import bot as bot  # noqa: F401 - the fixture, shared
from tests.telegram.test_approval import buttons, question

# One name per family of the rule (kernel/config/privilege.py), any case.
LOADERS = [
    "LD_PRELOAD",
    "ld_library_path",
    "DYLD_INSERT_LIBRARIES",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PATH",
    "PERL5OPT",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
    "GCONV_PATH",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_KEY_0",
    "HOME",
    "XDG_CONFIG_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "NPM_CONFIG_REGISTRY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_BASE",
    "https_proxy",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
]
ROUTES = ["PUT /envs", "PUT /envs/{key}"]


def _request(route: str, name: str, value: str) -> tuple[str, str, dict[str, Any]]:
    if route == "PUT /envs":
        return "PUT", "/envs", {"envs": {name: value}}
    return "PUT", f"/envs/{name}", {"value": value}


def _runtime_envs(sc: Sidecar) -> dict[str, str]:
    path = sc.kernel.config.runtime_path
    if not path.exists():
        return {}
    return dict(tomllib.loads(path.read_text()).get("envs", {}))


class Console:
    """A web-console session: its cookie and CSRF token, from a client keeping no jar."""

    def __init__(self, url: str, http: aiohttp.ClientSession, cookie: str, csrf: str):
        self.url, self.http, self.cookie, self.csrf = url, http, cookie, csrf

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Cookie": self.cookie, "X-CSRF-Token": self.csrf}
        async with self.http.request(method, self.url + path, json=body, headers=headers) as r:
            return r.status, await r.json()


@pytest.fixture
async def console_http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
        yield http


async def sign_in(sc: Sidecar | str, http: aiohttp.ClientSession) -> Console:
    url = sc if isinstance(sc, str) else sc.url
    async with http.post(url + "/console/login", json={"api_key": API_KEY}) as response:
        assert response.status == 200
        cookie = response.headers["Set-Cookie"].split(";", 1)[0]
        csrf = (await response.json())["csrf"]
    return Console(url, http, cookie, csrf)


def _refused(status: int, data: Any, field: str) -> None:
    assert status == 403, data
    assert data["error"]["code"] == "privilege_required"
    assert field in data["error"]["message"]
    assert field in data["error"]["details"]["fields"]


async def test_loader_names_need_the_key_on_every_envs_write_route(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, console_http: aiohttp.ClientSession
) -> None:
    keyed = await sidecar(anthropic_sim, api_key=API_KEY)
    console = await sign_in(keyed, console_http)
    keyless = await sidecar(anthropic_sim, gateway={"auth": "none"})
    for route in ROUTES:
        for name in LOADERS:
            method, path, body = _request(route, name, "/tmp/evil")
            status, data = await console.call(method, path, body)
            _refused(status, data, f"envs.{name}")
            assert "Telegram is not running" in data["error"]["message"]
            assert f"kernel env set {name} -" in data["error"]["message"]
            status, data, _ = await keyless.call(method, path, body)
            _refused(status, data, f"envs.{name}")
            assert "no API key" in data["error"]["message"]
            assert name not in _runtime_envs(keyed) and name not in _runtime_envs(keyless)
            assert name not in keyless.kernel.config.envs
            # The key holder may: kept in data/runtime.toml, in effect at once.
            status, data, _ = await keyed.call(method, path, body)
            assert status == 200, (route, name, data)
            assert _runtime_envs(keyed)[name] == "/tmp/evil"
            assert keyed.kernel.config.envs[name] == "/tmp/evil"
            await keyed.call("DELETE", f"/envs/{name}")
    # Names no family lists are guarded too (programs read more than any list names:
    # OPENSSL_CONF loads a library into every TLS user); a credential's name is anyone's.
    for name in ("OPENSSL_CONF", "GREETING"):
        status, data = await console.call("PUT", f"/envs/{name}", {"value": "/tmp/evil"})
        _refused(status, data, f"envs.{name}")
        status, data, _ = await keyless.call("PUT", "/envs", {"envs": {name: "/tmp/x"}})
        _refused(status, data, f"envs.{name}")
    status, _ = await console.call("PUT", "/envs/GITHUB_TOKEN", {"value": "ghp-0123456789"})
    assert status == 200 and _runtime_envs(keyed)["GITHUB_TOKEN"] == "ghp-0123456789"
    status, _, _ = await keyless.call("PUT", "/envs", {"envs": {"GITHUB_TOKEN": "ghp-1"}})
    assert status == 200 and _runtime_envs(keyless) == {"GITHUB_TOKEN": "ghp-1"}
    # Removing a guarded name needs no privilege.
    await keyed.call("PUT", "/envs/PATH", {"value": "/opt/bin"})
    status, _ = await console.call("DELETE", "/envs/PATH")
    assert status == 200 and "PATH" not in _runtime_envs(keyed)


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "key"])
async def test_the_pythonpath_attack_runs_only_with_the_key(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path, keyed: bool
) -> None:
    """The report's attack: PYTHONPATH, then restart a stdio server. Keyless it runs
    nothing; the same steps with the key do run it (the check, not something else,
    stopped the keyless one)."""
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "ran"
    (evil / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    extra = mcp_toml([stdio_server("tools")])
    who: dict[str, Any] = {"api_key": API_KEY} if keyed else {"gateway": {"auth": "none"}}
    sc = await sidecar(anthropic_sim, extra=extra, **who)
    status, data, _ = await sc.call("PUT", "/envs", {"envs": {"PYTHONPATH": str(evil)}})
    if keyed:
        assert status == 200
    else:
        _refused(status, data, "envs.PYTHONPATH")
    status, data, _ = await sc.call("POST", "/mcp/servers/tools/restart")
    assert status == 200 and data["state"] == "connected"
    assert marker.exists() is keyed


async def test_a_stdio_server_needs_the_key(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, console_http: aiohttp.ClientSession
) -> None:
    keyed = await sidecar(anthropic_sim, api_key=API_KEY)
    console = await sign_in(keyed, console_http)
    keyless = await sidecar(anthropic_sim, gateway={"auth": "none"})
    server = stdio_server("tools")
    status, data = await console.call("POST", "/mcp/servers", server)
    _refused(status, data, "mcp.servers.tools.command")
    assert "Telegram is not running" in data["error"]["message"]
    status, data, _ = await keyless.call("POST", "/mcp/servers", server)
    _refused(status, data, "mcp.servers.tools.command")
    status, data, _ = await keyed.call("POST", "/mcp/servers", server)
    assert status == 201 and data["state"] == "connected"


class Capture:
    """A plain HTTP server counting what reaches it (and the keys it was sent)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []  # (path, the key header's value)
        self.runner: web.AppRunner | None = None
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def _handle(self, request: web.Request) -> web.Response:
        sent = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        self.requests.append((request.path, sent))
        error = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
        return web.json_response(error, status=400)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def capture() -> AsyncIterator[Capture]:
    server = Capture()
    await server.start()
    yield server
    await server.stop()


async def test_a_keyed_providers_base_url_moves_only_with_its_key(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    capture: Capture,
    console_http: aiohttp.ClientSession,
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    console = await sign_in(sc, console_http)
    keyless = await sidecar(anthropic_sim, gateway={"auth": "none"})
    moved = {"base_url": capture.url}
    for refused in (
        await sc.call("PUT", "/models/main/config", moved),
        await keyless.call("PUT", "/models/main/config", moved),
        (*(await console.call("PUT", "/models/main/config", moved)), None),
    ):
        status, data, _ = refused
        _refused(status, data, "providers.main.api_base")
        assert "--api-key" in data["error"]["message"]
    assert sc.kernel.config.providers["main"].api_base == anthropic_sim.base_url
    anthropic_sim.enqueue(text_reply("still here"))
    status, data = await sc.process("hello")
    assert status == 200 and data["reply"] == "still here"
    assert capture.requests == []  # the key went nowhere new
    # Given again in the same request: moved, and the next turn's key goes there.
    status, data, _ = await sc.call("PUT", "/models/main/config", {**moved, "api_key": SECRET_KEY})
    assert status == 200 and data["base_url"] == capture.url
    await sc.process("hello again")
    assert capture.requests and SECRET_KEY in capture.requests[0][1]


async def test_a_selfops_move_of_a_keyed_provider_needs_its_key(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    capture: Capture,
    console_http: aiohttp.ClientSession,
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    console = await sign_in(sc, console_http)
    keyless = await sidecar(anthropic_sim, gateway={"auth": "none"})
    op = {"kind": "replace", "path": "main.api_base", "value": capture.url}
    preview_body = {"target": "provider_config", "operations": [op], "allow_sensitive": True}

    async def apply(caller: Any, body: dict[str, Any]) -> tuple[int, Any, Any]:
        """(status, answer) of the apply, and the preview's checks."""
        if isinstance(caller, Console):
            status, preview = await caller.call("POST", PREVIEW, body)
        else:
            status, preview, _ = await caller.call("POST", PREVIEW, body)
        assert status == 200, preview
        confirm = {
            "mutation_id": preview["mutation_id"],
            "confirm_hash": preview["confirm_hash"],
            "allow_sensitive": True,
        }
        if isinstance(caller, Console):
            return (*(await caller.call("POST", APPLY, confirm)), preview["checks"])
        status, data, _ = await caller.call("POST", APPLY, confirm)
        return status, data, preview["checks"]

    for caller in (sc, console, keyless):
        status, data, checks = await apply(caller, preview_body)
        _refused(status, data, "providers.main.api_base")
        assert checks["privileged_fields"] == ["providers.main.api_base"]
    assert sc.kernel.config.providers["main"].api_base == anthropic_sim.base_url
    assert not sc.kernel.config.runtime_path.exists()  # nothing written
    anthropic_sim.enqueue(text_reply("still here"))
    assert (await sc.process("hello"))[0] == 200
    assert capture.requests == []
    # The change giving the key itself: applied, and the next turn goes there.
    with_key = {"kind": "replace", "path": "main.api_key", "value": SECRET_KEY}
    status, data, checks = await apply(sc, {**preview_body, "operations": [op, with_key]})
    assert status == 200 and data["applied"] is True
    assert checks["privileged_fields"] == []
    await sc.process("hello again")
    assert capture.requests and SECRET_KEY in capture.requests[0][1]


PREVIEW = "/agent/self/config-mutations/preview"
APPLY = "/agent/self/config-mutations/apply"


async def test_a_guarded_name_kept_in_runtime_toml_is_named_at_start(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, caplog: pytest.LogCaptureFixture
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    data_dir = sc.kernel.config.runtime_path.parent
    await sc.stop()
    (data_dir / "runtime.toml").write_text('[envs]\nLD_PRELOAD = "/tmp/x.so"\nGREETING = "hi"\n')
    with caplog.at_level("WARNING"):
        await sidecar(anthropic_sim, api_key=API_KEY, keep_config=True)
    named = [r.getMessage() for r in caplog.records if "runtime.toml" in r.getMessage()]
    assert len(named) == 1 and "LD_PRELOAD" in named[0] and "GREETING" not in named[0]
    assert "kernel env delete" in named[0]


async def test_an_owner_only_question_is_not_listed_or_answered_by_the_sidecar(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    asks = sc.kernel.agent.asks
    question = Question("privilege", "allow?", ["Allow", "Deny"], owner_only=True)
    waiting = asyncio.ensure_future(asks.wait(question, 60))
    await asyncio.sleep(0)
    status, data, _ = await sc.call("GET", "/agent/asks")
    assert status == 200 and data["asks"] == []
    status, data, _ = await sc.call("POST", f"/agent/asks/{question.id}/answer", {"choice": 0})
    assert status == 404
    assert not waiting.done()
    waiting.cancel()


async def test_a_console_change_waits_for_the_owners_word_in_telegram(
    bot: Factory, console_http: aiohttp.ClientSession
) -> None:
    h = await bot(gateway={"api_key": API_KEY})
    gateway = Gateway(h.kernel.gateway_deps(), ROUTERS)
    await gateway.start()
    try:
        console = await sign_in(gateway.url, console_http)
        call = console.call("PUT", "/envs/LD_PRELOAD", {"value": "/tmp/evil.so"})
        pending = asyncio.ensure_future(call)
        asked = await question(h)
        assert "LD_PRELOAD" in asked.text and "/tmp/evil.so" in asked.text
        assert "web console" in asked.text
        assert not pending.done() and "LD_PRELOAD" not in h.kernel.config.envs
        allow, deny = buttons(asked)
        assert (allow["text"], deny["text"]) == ("Allow", "Deny")
        h.tg.inject_callback(allow["callback_data"], message_id=asked.message_id)
        status, data = await pending
        assert status == 200 and h.kernel.config.envs["LD_PRELOAD"] == "/tmp/evil.so"
        # Denied: refused, saying so, and nothing kept.
        first = asked.message_id
        pending = asyncio.ensure_future(console.call("PUT", "/envs/PATH", {"value": "/tmp"}))
        await h.tg.wait_until(
            lambda: any(asking(m) and m.message_id != first for m in h.bot_messages())
        )
        asked = next(m for m in h.bot_messages() if asking(m) and m.message_id != first)
        assert "PATH" in asked.text
        h.tg.inject_callback(buttons(asked)[1]["callback_data"], message_id=asked.message_id)
        status, data = await pending
        _refused(status, data, "envs.PATH")
        assert "denied" in data["error"]["message"]
        assert data["error"]["details"]["reason"] == "denied"
        assert h.kernel.config.envs.get("PATH") != "/tmp"
    finally:
        await gateway.stop()


async def test_a_long_value_shows_the_owner_its_end(
    bot: Factory, console_http: aiohttp.ClientSession
) -> None:
    """300 characters of harmless flags first: the owner still reads the tail they hide."""
    h = await bot(gateway={"api_key": API_KEY})
    gateway = Gateway(h.kernel.gateway_deps(), ROUTERS)
    await gateway.start()
    try:
        console = await sign_in(gateway.url, console_http)
        value = "--no-warnings " * 22 + "--require /tmp/x.js"
        call = console.call("PUT", "/envs/NODE_OPTIONS", {"value": value})
        pending = asyncio.ensure_future(call)
        asked = await question(h)
        h.tg.inject_callback(buttons(asked)[1]["callback_data"], message_id=asked.message_id)
        status, data = await pending
        _refused(status, data, "envs.NODE_OPTIONS")
        assert "--require /tmp/x.js" in asked.text and f"{len(value)} characters" in asked.text
        assert value[:100] in asked.text
    finally:
        await gateway.stop()
