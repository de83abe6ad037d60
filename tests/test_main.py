"""The service entry point: start-up, ordered shutdown on SIGTERM, lazy SDK imports."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path

from tests.conftest import SECRET_KEY, write_config
from tests.sim.anthropic_sim import AnthropicSim


async def test_service_starts_and_stops_on_sigterm(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    write_config(tmp_path, anthropic_sim.base_url, "claude")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_")}
    env |= {"KERNEL_TELEGRAM_TOKEN": "123:abcdefghijklmnop", "KERNEL_TELEGRAM_ALLOWED_USER": "7"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kernel",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout
    lines: list[str] = []
    async with asyncio.timeout(30):
        while not any("kernel started" in line for line in lines):
            line = (await proc.stdout.readline()).decode()
            assert line, "the service exited before it started"
            lines.append(line)
    proc.send_signal(signal.SIGTERM)
    rest, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    output = "".join(lines) + rest.decode()

    assert proc.returncode == 0, err.decode()
    assert "kernel stopped" in output
    log_file = (tmp_path / "data" / "logs" / "kernel.log").read_text()
    assert "kernel started" in log_file and "kernel stopped" in log_file
    assert "abcdefghijklmnop" not in output + log_file and SECRET_KEY not in log_file
    db = sqlite3.connect(tmp_path / "data" / "kernel.db")
    assert db.execute("pragma journal_mode").fetchone() == ("wal",)
    db.close()


def test_sdks_are_imported_only_for_configured_provider_types(tmp_path: Path) -> None:
    write_config(tmp_path, "http://127.0.0.1:9/v1", "openai_compat")
    code = """
import asyncio, sys
from kernel.config import load_config
from kernel.app import Kernel
assert "anthropic" not in sys.modules and "openai" not in sys.modules, "eager SDK import"
async def main():
    k = Kernel(load_config(require_telegram=False))
    await k.start()
    await k.agent.provider()
    await k.stop()
asyncio.run(main())
print("openai" in sys.modules, "anthropic" in sys.modules)
"""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]
