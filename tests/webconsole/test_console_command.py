"""``kernel console``: a one-time sign-in link to the console's address from config.toml
(or KERNEL_GATEWAY_URL), the sign-in and SSH-tunnel hint, and the browser opened only on
a desktop."""

from __future__ import annotations

import asyncio
import html
import stat
import urllib.parse
from pathlib import Path

import pytest

from kernel.__main__ import desktop, main
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs ``kernel console`` asked the browser to open (the standard library's
    webbrowser, not Kernel's own code, stands in for a desktop's browser)."""
    urls: list[str] = []

    def record(url: str, new: int = 0, autoraise: bool = True) -> bool:
        urls.append(url)
        return True

    monkeypatch.setattr("webbrowser.open", record)
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "KERNEL_GATEWAY_URL", "KERNEL_LANGUAGE"):
        monkeypatch.delenv(name, raising=False)
    return urls


def _page(address: str) -> Path:
    return Path(urllib.parse.unquote(urllib.parse.urlsplit(address).path))


def private_page(address: str, folder: Path) -> tuple[int, int]:
    """The modes of the file:// page ``address`` names (under ``folder``) and its folder."""
    page = _page(address)
    assert page.is_relative_to(folder)
    return stat.S_IMODE(page.stat().st_mode), stat.S_IMODE(page.parent.stat().st_mode)


def read_page(address: str) -> str:
    return _page(address).read_text(encoding="utf-8")


def config(folder: Path, monkeypatch: pytest.MonkeyPatch, gateway: str) -> Path:
    path = folder / "config.toml"
    path.write_text(f'[general]\nlanguage = "en"\n[gateway]\n{gateway}\n', encoding="utf-8")
    monkeypatch.setenv("KERNEL_CONFIG", str(path))
    return path


async def test_prints_a_link_and_opens_nothing_without_a_display(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    opened: list[str],
) -> None:
    sc = await sidecar(anthropic_sim)  # the generated key, found in its data directory
    port = sc.gateway.port
    (tmp_path / "cli").mkdir()
    config(tmp_path / "cli", monkeypatch, f"port = {port}")
    # No key in config.toml: the one Kernel generated, in the data directory it names.
    path = tmp_path / "cli" / "config.toml"
    data = sc.kernel.config.data_dir
    path.write_text(path.read_text().replace("[general]\n", f'[general]\ndata_dir = "{data}"\n'))
    assert await asyncio.to_thread(main, ["console"]) == 0  # the sidecar answers meanwhile
    out, err = capsys.readouterr()
    assert out.startswith(f"http://127.0.0.1:{port}/console/#signin=") and out.endswith("\n")
    assert f"ssh -L {port}:127.0.0.1:{port}" in err and "api_key" in err
    assert sc.api_key not in out + err
    assert opened == []


async def test_opens_the_browser_on_a_desktop(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    opened: list[str],
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    (tmp_path / "cli").mkdir()
    gateway = f'host = "0.0.0.0"\nport = {sc.gateway.port}\napi_key = {API_KEY!r}'
    config(tmp_path / "cli", monkeypatch, gateway)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    (tmp_path / "run").mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert await asyncio.to_thread(main, ["console"]) == 0
    out, err = capsys.readouterr()
    # A wildcard bind is reached on loopback; the key is never printed.
    assert out.startswith(f"http://127.0.0.1:{sc.gateway.port}/console/#signin=")
    assert API_KEY not in out + err
    # The browser (and its launcher's command line) gets a page's address, not the link:
    # a private page that goes on to it.
    [address] = opened
    token = out.strip().split("#signin=")[1]
    assert address.startswith("file://") and token not in address
    assert private_page(address, tmp_path / "run") == (0o600, 0o700)
    refresh = f'<meta http-equiv="refresh" content="0;url={html.escape(out.strip())}">'
    assert refresh in read_page(address)


def test_kernel_gateway_url_wins(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    opened: list[str],
) -> None:
    config(tmp_path, monkeypatch, "port = 0")
    monkeypatch.setenv("KERNEL_GATEWAY_URL", "http://[::1]:9000/")
    monkeypatch.setenv("DISPLAY", ":0")
    assert main(["console"]) == 0
    out, err = capsys.readouterr()
    assert out == "http://[::1]:9000/console/\n" and opened == ["http://[::1]:9000/console/"]
    # No key here (no configured one, none generated in this data directory): no link.
    assert err.startswith("No sidecar key was found here")


def test_refusals(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    opened: list[str],
) -> None:
    config(tmp_path, monkeypatch, "port = 8125\nconsole = false")
    assert main(["console"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "console = false" in err
    config(tmp_path, monkeypatch, "port = 0")  # an unknown port: no address to print
    assert main(["console"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "KERNEL_GATEWAY_URL" in err
    monkeypatch.setenv("KERNEL_CONFIG", str(tmp_path / "missing.toml"))
    assert main(["console"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "missing.toml" in err
    assert opened == []


@pytest.mark.parametrize(
    ("env", "platform", "expected"),
    [
        ({}, "linux", False),
        ({"DISPLAY": ":0"}, "linux", True),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "freebsd14", True),
        ({"DISPLAY": ""}, "linux", False),
        ({}, "darwin", True),
        ({}, "win32", True),
    ],
)
def test_desktop(env: dict[str, str], platform: str, expected: bool) -> None:
    assert desktop(env, platform) is expected


async def test_the_printed_url_is_the_running_console(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    opened: list[str],
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    (tmp_path / "cli").mkdir()
    config(tmp_path / "cli", monkeypatch, f"port = {sc.gateway.port}\napi_key = {API_KEY!r}")
    assert await asyncio.to_thread(main, ["console"]) == 0
    url = capsys.readouterr().out.strip()
    async with sc.http.get(url) as response:  # not signed in: on to the sign-in page
        assert response.status == 200 and response.url.path == "/console/login"
        assert '<form id="sign-in"' in await response.text()
