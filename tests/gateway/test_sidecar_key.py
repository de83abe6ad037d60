"""No keyless sidecar (issue 33, item 1): with no ``[gateway] api_key`` the first start
generates one into ``data/gateway.key`` (0600, never logged), every route but /healthz
and /version wants it, and Kernel's own clients find it with no setting; keyless is only
``gateway.auth = "none"``, on loopback, warned about."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import kernel.check
from kernel.config import load_config
from kernel.core.errors import ConfigError, StartupError
from kernel.core.i18n import set_language
from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.conftest import free_port, kernel_env, spawn_kernel, write_config
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.gateway.test_service import started
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim

KEY_FILE = "gateway.key"  # in the data directory


def status_of(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def run(*args: str, cwd: Path) -> tuple[int, str, str]:
    """``python -m kernel ARGS`` with no KERNEL_* setting at all (no key, no URL)."""
    process = await spawn_kernel(*args, cwd=cwd, env=kernel_env(KERNEL_LANGUAGE="en"))
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode or 0, out.decode(), err.decode()


@pytest.mark.slow
@pytest.mark.posix
async def test_a_fresh_start_generates_a_private_key_and_the_clients_find_it(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    tg = await TelegramSim().start()
    port = free_port()
    path = write_config(tmp_path, anthropic_sim.base_url, "claude", gateway={"port": port})
    path.write_text(path.read_text() + f'[telegram]\napi_base = "{tg.api_base}"\n')
    env = kernel_env(KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER))
    process = await spawn_kernel(cwd=tmp_path, env=env)
    try:
        url, seen = await started(process)
        key_file = tmp_path / "data" / KEY_FILE
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        assert len(key) >= 40
        # Nobody without the key: not a route, not the console's link.
        for route in ("/chats", "/envs", "/runtime-config"):
            assert await asyncio.to_thread(status_of, url + route) == 401, route
        assert await asyncio.to_thread(status_of, url + "/chats", {"X-API-Key": key}) == 200
        assert await asyncio.to_thread(status_of, url + "/version") == 200  # stays open
        # The owner's verbs find the key by themselves (cwd holds config.toml).
        code, out, err = await run("chats", "list", "--json", cwd=tmp_path)
        assert (code, err) == (0, ""), err
        assert "chat-default" in [c["id"] for c in json.loads(out)["chats"]]
        # …and so does `kernel console`: a one-time link, not the key.
        code, out, err = await run("console", cwd=tmp_path)
        assert code == 0, err
        assert out.startswith(f"{url}/console/#signin=") and key not in out + err
        process.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(process.communicate(), timeout=30)
        assert process.returncode == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await tg.stop()
    log = "".join(seen) + rest.decode()
    log += (tmp_path / "data" / "logs" / "kernel.log").read_text(errors="replace")
    assert key not in log
    assert f"api key in {key_file}" in log


@pytest.mark.posix
async def test_a_key_file_others_can_read_is_refused_never_used(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    path = write_config(tmp_path, anthropic_sim.base_url, "claude", language="en")
    config = load_config(path, env={}, require_telegram=False)
    key_file = config.data_dir / KEY_FILE
    config.data_dir.mkdir()
    key_file.write_text("k" * 43 + "\n")
    key_file.chmod(0o644)
    from kernel.app import Kernel

    kernel = Kernel(config)
    await kernel.start()
    try:
        with pytest.raises(StartupError) as refused:
            await Gateway(kernel.gateway_deps(), ROUTERS).start()
    finally:
        await kernel.stop()
    text = str(refused.value)
    assert str(key_file) in text and "644" in text and "delete it" in text
    assert "\n" not in text and "k" * 43 not in text
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o644  # the owner decides, not Kernel
    # The clients refuse it too, in the same words.
    code, out, err = await run("chats", "list", cwd=tmp_path)
    assert (code, out) == (2, "") and str(key_file) in err and "644" in err


def test_concurrent_first_starts_make_one_key(tmp_path: Path) -> None:
    from kernel.config.sidecar_key import sidecar_key

    path = write_config(tmp_path, "http://127.0.0.1:1", "claude")
    config = load_config(path, env={}, require_telegram=False)
    gate = threading.Barrier(8)
    keys: list[str] = []

    def start() -> None:
        gate.wait()
        keys.append(sidecar_key(config.gateway, config.data_dir, create=True))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and len(keys) == 8
    assert (config.data_dir / KEY_FILE).read_text().strip() == keys[0]
    assert sorted(p.name for p in config.data_dir.iterdir()) == [KEY_FILE]  # no leftovers
    if os.name == "posix":
        assert stat.S_IMODE((config.data_dir / KEY_FILE).stat().st_mode) == 0o600


async def test_a_configured_key_wins_and_no_file_is_made(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    assert sc.gateway.api_key == API_KEY and not (tmp_path / "data" / KEY_FILE).exists()


async def test_without_auth_none_a_loopback_peer_needs_the_key_to_sign_in(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)  # no key configured: the generated one
    status, data, _ = await sc.call("POST", "/console/login", {"api_key": ""}, headers={})
    assert status == 401 and data["error"]["code"] == "unauthorized"
    status, data, _ = await sc.call("GET", "/console/strings", headers={})
    assert status == 200 and data["api_key_required"] is True


def test_auth_none_is_refused_off_loopback_and_beside_a_key(tmp_path: Path) -> None:
    def load(**gateway: object) -> None:
        path = write_config(tmp_path, "http://127.0.0.1:1", "claude", gateway=gateway)
        load_config(path, env=kernel_env(KERNEL_LANGUAGE="en"), require_telegram=False)

    with pytest.raises(ConfigError) as refused:
        load(auth="none", host="0.0.0.0")
    assert refused.value.key == "gateway.auth"
    assert str(refused.value).startswith(
        'gateway.auth = "none" (no key) is for a loopback host only, and gateway.host = '
        "'0.0.0.0' is not one"
    )
    with pytest.raises(ConfigError) as refused:
        load(auth="none", api_key=API_KEY)
    assert refused.value.key == "gateway.auth"
    assert "gateway.auth" in str(refused.value) and "gateway.api_key" in str(refused.value)
    assert API_KEY not in str(refused.value)
    load(auth="none", host="127.0.0.1")  # on loopback it is the owner's choice


async def test_auth_none_is_keyless_and_makes_no_file(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})
    assert sc.gateway.api_key == "" and not (tmp_path / "data" / KEY_FILE).exists()
    status, data, _ = await sc.call("GET", "/runtime-config")
    assert status == 200 and data["features"]["api_key_required"] is False


def test_kernel_check_warns_about_auth_none(tmp_path: Path) -> None:
    def lines(**gateway: object) -> list[str]:
        path = write_config(tmp_path, "http://127.0.0.1:1", "claude", gateway=gateway)
        config = load_config(path, env=kernel_env(KERNEL_LANGUAGE="en"), require_telegram=False)
        set_language(config.general.language)  # loading returns it; kernel check sets it
        return [line.render() for line in kernel.check.sidecar(config)]

    [warned] = lines(auth="none")
    assert warned.startswith('[warn] gateway: gateway.auth = "none": the sidecar takes no key')
    assert "another user's too" in warned
    assert lines() == [] and lines(api_key=API_KEY) == []
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / KEY_FILE).write_text("k" * 43)
    if os.name == "posix":
        (tmp_path / "data" / KEY_FILE).chmod(0o640)
        [failed] = lines()
        assert failed.startswith("[FAIL] gateway: the sidecar's key file ")


def test_the_generated_key_goes_only_to_this_machine(tmp_path: Path) -> None:
    """A config.toml in the current folder may name the owner's data directory and any
    host: the generated key is sent to a loopback address only (a Kernel elsewhere has a
    configured key: a non-loopback bind requires one)."""
    from kernel.client.http import sidecar_from
    from kernel.config.sidecar_key import sidecar_key

    owner = write_config(tmp_path, "http://127.0.0.1:1", "claude")
    config = load_config(owner, env={}, require_telegram=False)
    generated = sidecar_key(config.gateway, config.data_dir, create=True)
    lure = tmp_path / "lure"
    lure.mkdir()
    (lure / "config.toml").write_text(
        f'[general]\ndata_dir = "{config.data_dir}"\n'
        '[gateway]\nhost = "203.0.113.7"\nport = 9999\napi_key = ""\n'
    )
    env = {"KERNEL_CONFIG": str(lure / "config.toml")}
    there = sidecar_from(env)
    assert there is not None and there.url == "http://203.0.113.7:9999"
    assert there.api_key == ""  # nothing of the owner's goes there
    (lure / "config.toml").write_text(
        f'[general]\ndata_dir = "{config.data_dir}"\n[gateway]\nhost = "::"\nport = 9999\n'
    )
    here = sidecar_from(env)
    assert here is not None and here.api_key == generated  # [::1]: this machine
