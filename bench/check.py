"""``kernel check`` against a provider it cannot reach: how long until the FAIL line.

Cases (each run N times, median and max reported):
  refused, first     the first probe in the process (no SDK imported yet); run once
  refused probe      the provider probe (``kernel.check._provider``)
                     against a closed loopback port: connection refused at once
  silent probe       the same against a loopback port whose listen backlog is full, so
                     the TCP handshake never completes (what a firewalled or unroutable
                     host does): ended by ``general.check_connect_timeout`` (2 s)
  silent, no limit   the silent probe with ``check_connect_timeout = 120`` (the
                     provider's own request timeout, as before): ended by the part's
                     ``general.check_timeout`` (20 s) instead, and the line names no URL;
                     run once
  kernel check       the whole ``kernel check`` process (warm .pyc) with the provider and
                     Telegram on closed ports: what the owner waits for

    uv run python bench/check.py [-n 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernel.check import _bounded, _provider  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.core.i18n import set_language  # noqa: E402

KEY = "sk-ant-bench-0123456789abcdef"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def silent_port() -> tuple[int, list[socket.socket]]:
    """A listening socket whose backlog is full: further SYNs are dropped."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = int(server.getsockname()[1])
    held = [server]
    for _ in range(8):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
        held.append(client)
    time.sleep(0.2)
    return port, held


def write_config(folder: Path, port: int, connect_timeout: float = 2.0) -> Path:
    path = folder / "config.toml"
    path.write_text(
        f'[general]\ndefault_provider = "main"\ncheck_connect_timeout = {connect_timeout}\n'
        f'[telegram]\napi_base = "http://127.0.0.1:{closed_port()}"\n'
        f'[providers.main]\ntype = "claude"\napi_base = "http://127.0.0.1:{port}"\n'
        f'api_key = "{KEY}"\nmax_tokens = 16\ndefault_model = "m"\nmodels = ["m"]\n'
    )
    return path


async def probe(path: Path) -> tuple[float, str]:
    config = load_config(path, env={"KERNEL_LANGUAGE": "en"}, require_telegram=False)
    set_language(config.general.language)  # as `kernel check` does
    started = time.perf_counter()
    line = await _bounded(
        "provider main", lambda: _provider(config, "main"), config.general.check_timeout
    )
    return time.perf_counter() - started, line.render()


def report(name: str, times: list[float], line: str) -> None:
    print(f"{name:18} median {statistics.median(times):6.2f} s  max {max(times):6.2f} s")
    print(f"{'':18} {line}")


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        took, line = await probe(write_config(folder, closed_port()))  # the first: cold
        report("refused, first", [took], line)
        for name, make in (("refused probe", closed_port), ("silent probe", None)):
            times, line = [], ""
            for _ in range(runs):
                held: list[socket.socket] = []
                if make is None:
                    port, held = silent_port()
                else:
                    port = make()
                took, line = await probe(write_config(folder, port))
                times.append(took)
                for s in held:
                    s.close()
            report(name, times, line)
        port, held = silent_port()
        took, line = await probe(write_config(folder, port, connect_timeout=120))
        for s in held:
            s.close()
        report("silent, no limit", [took], line)


def whole_check(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"KERNEL_LANGUAGE": "en", "KERNEL_TELEGRAM_TOKEN": "1:bench"}
        env["KERNEL_TELEGRAM_ALLOWED_USER"] = "1"
        command = [sys.executable, "-m", "kernel", "check"]
        write_config(folder, closed_port())
        subprocess.run(command, cwd=folder, env=env, capture_output=True)  # writes .pyc
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
            times.append(time.perf_counter() - started)
        failed = [x for x in done.stdout.splitlines() if x.startswith("[FAIL] provider")]
        report("kernel check", times, failed[0] if failed else done.stdout[-300:])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="runs per case")
    runs = parser.parse_args().n
    asyncio.run(main(runs))
    whole_check(runs)
