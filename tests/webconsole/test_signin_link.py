"""``kernel console``'s one-time sign-in link (issue 33, item 1): the running sidecar
gives a short-lived, single-use token to the key only; ``/console/login`` exchanges it
once for the usual cookie and CSRF token, and never again."""

from __future__ import annotations

import asyncio
import re
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kernel.__main__ import main
from kernel.gateway.console import CONSOLE, ConsoleSessions
from kernel.gateway.console.auth import cookie_name
from tests.gateway.conftest import Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.webconsole.test_security import Clock, sign_in, signed

SPENT = "This sign-in link was already used or has expired"
LINK_SECONDS = 60  # a link's life


def cli_config(folder: Path, sc: Sidecar, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config.toml for the command line naming the sidecar's port and data directory,
    and no key: `kernel console` must find the generated one."""
    folder.mkdir()
    path = folder / "config.toml"
    data = sc.kernel.config.data_dir
    path.write_text(
        f'[general]\nlanguage = "en"\ndata_dir = "{data}"\n[gateway]\nport = {sc.gateway.port}\n'
    )
    monkeypatch.setenv("KERNEL_CONFIG", str(path))
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "KERNEL_GATEWAY_URL", "KERNEL_GATEWAY_API_KEY"):
        monkeypatch.delenv(name, raising=False)


async def bare(
    sc: Sidecar, path: str, headers: dict[str, str] | None = None, body: Any = None
) -> tuple[int, Any, str]:
    """(status, body, the cookie's token or "") of a POST from a fresh browser: no key
    (unless ``headers`` give one), no cookie."""
    async with (
        aiohttp.ClientSession() as client,
        client.post(sc.url + path, headers=headers or {}, json=body) as response,
    ):
        cookie: SimpleCookie = SimpleCookie()
        for header in response.headers.getall("Set-Cookie", []):
            cookie.load(header)
        name = cookie_name(sc.gateway.port)
        session = cookie[name].value if name in cookie else ""
        return response.status, await response.json(), session


async def redeem(sc: Sidecar, token: str) -> tuple[int, Any, str]:
    """A link's sign-in, as the sign-in page sends it."""
    return await bare(sc, "/console/login", body={"link": token})


async def test_the_link_signs_in_once_and_never_again(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sc = await sidecar(anthropic_sim)  # no key configured: the generated one
    cli_config(tmp_path / "cli", sc, monkeypatch)
    assert await asyncio.to_thread(main, ["console"]) == 0  # the sidecar answers meanwhile
    out, err = capsys.readouterr()
    match = re.fullmatch(re.escape(sc.url) + r"/console/#signin=([A-Za-z0-9_-]{40,})\n", out)
    assert match is not None, out
    assert sc.api_key not in out + err and "signs in once" in err
    token = match[1]

    status, data, session = await redeem(sc, token)
    assert status == 200 and session and isinstance(data["csrf"], str)
    status, _, _ = await sc.call("GET", "/chats", headers=signed(sc, session, str(data["csrf"])))
    assert status == 200  # a real sign-in: the API answers the page

    status, data, session = await redeem(sc, token)  # the same link again
    assert (status, session) == (401, "")
    error = data["error"]
    assert isinstance(error, dict) and error["code"] == "unauthorized"
    assert error["message"].startswith(SPENT) and "run kernel console again" in error["message"]


async def test_an_expired_link_is_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    sc = await sidecar(anthropic_sim)
    assert sc.gateway._runner is not None
    clock = Clock()
    monkeypatch.setattr(sc.gateway._runner.app[CONSOLE], "_clock", clock)
    status, data, _ = await sc.call("POST", "/console/link")
    assert status == 200 and data["expires_in"] == LINK_SECONDS
    late = data["link"]
    status, data, _ = await sc.call("POST", "/console/link")
    timely = data["link"]
    clock.now += LINK_SECONDS - 1
    assert (await redeem(sc, timely))[0] == 200
    clock.now += 1
    status, data, session = await redeem(sc, late)
    assert (status, session) == (401, "") and data["error"]["message"].startswith(SPENT)


async def test_only_the_key_makes_a_link(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, data, _ = await bare(sc, "/console/link")
    assert status == 401 and data["error"]["message"].startswith("A sign-in link needs")
    status, data, _ = await bare(sc, "/console/link", {"X-API-Key": "wrong"})
    assert status == 401
    # A console sign-in (cookie and CSRF token) cannot mint sign-ins for others.
    status, data, token = await bare(sc, "/console/login", body={"api_key": sc.api_key})
    assert status == 200
    status, data, _ = await bare(sc, "/console/link", signed(sc, token, data["csrf"]))
    assert status == 401 and data["error"]["code"] == "unauthorized"
    # Malformed and unknown tokens: refused, and the key field still signs in.
    for bad in ("", 5, "x" * 5000):
        status, data, _ = await bare(sc, "/console/login", body={"link": bad})
        assert status == 400 and data["error"]["details"]["field"] == "link"
    assert (await redeem(sc, "not-a-link"))[0] == 401
    await sign_in(sc, sc.api_key)


async def test_no_links_without_a_key(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})
    status, data, _ = await sc.call("POST", "/console/link")
    assert status == 403 and 'gateway.auth = "none"' in data["error"]["message"]
    # `kernel console` prints the bare address then (a loopback peer signs in).
    cli_config(tmp_path / "cli", sc, monkeypatch)
    (tmp_path / "cli" / "config.toml").write_text(
        (tmp_path / "cli" / "config.toml").read_text() + 'auth = "none"\n'
    )
    assert await asyncio.to_thread(main, ["console"]) == 0
    out, err = capsys.readouterr()
    assert out == f"{sc.url}/console/\n" and "only this machine can sign in" in err


def test_kernel_console_without_a_running_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import free_port

    path = tmp_path / "config.toml"
    path.write_text(f'[general]\nlanguage = "en"\n[gateway]\nport = {free_port()}\n')
    monkeypatch.setenv("KERNEL_CONFIG", str(path))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "gateway.key").write_text("k" * 43)
    (tmp_path / "data" / "gateway.key").chmod(0o600)
    assert main(["console"]) == 3
    out, err = capsys.readouterr()
    assert out == "" and "cannot reach Kernel" in err and "start it first" in err


def test_links_are_bounded_single_use_and_timed_on_their_clock() -> None:
    from kernel.gateway.console.auth import MAX_LINKS

    clock = Clock()
    sessions = ConsoleSessions(1, clock)
    first = sessions.link()
    later = [sessions.link() for _ in range(MAX_LINKS)]  # the first one is dropped
    assert not sessions.redeem(first)
    assert sessions.redeem(later[0]) and not sessions.redeem(later[0])
    clock.now += LINK_SECONDS
    assert not sessions.redeem(later[1])  # expired
    assert first not in repr(sessions.__dict__)  # kept as digests only
