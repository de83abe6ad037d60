"""The service entry point: start-up, ordered shutdown on SIGTERM, lazy SDK imports."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.conftest import SECRET_KEY, kernel_env, spawn_kernel, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim

pytestmark = [pytest.mark.slow, pytest.mark.posix]  # real `python -m kernel` processes
# posix: ordered shutdown on SIGTERM


async def test_service_answers_on_telegram_and_stops_on_sigterm(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """`python -m kernel` as systemd runs it: real process, real PTB polling the Bot API
    simulator, real anthropic SDK to the model simulator."""
    tg = await TelegramSim().start()
    try:
        path = write_config(tmp_path, anthropic_sim.base_url, "claude")
        path.write_text(
            path.read_text() + f'[telegram]\napi_base = "{tg.api_base}"\npoll_timeout = 1\n'
        )
        env = kernel_env(
            **{"KERNEL_TELEGRAM_TOKEN": DEFAULT_TOKEN, "KERNEL_TELEGRAM_ALLOWED_USER": str(OWNER)}
        )
        anthropic_sim.enqueue(text_reply("Hello from the service"))
        proc = await spawn_kernel(cwd=tmp_path, env=env, fresh=True)  # a new interpreter
        await tg.wait_until(lambda: tg.get_updates_completed >= 1, timeout=30)
        tg.inject_text("hi")
        await tg.wait_until(
            lambda: [m.text for m in tg.chat(OWNER, from_bot=True)] == ["Hello from the service"],
            timeout=30,
        )
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    finally:
        await tg.stop()
    output = out.decode()

    assert proc.returncode == 0, err.decode()
    assert "kernel started" in output and "telegram channel stopped" in output
    assert output.index("telegram channel stopped") < output.index("kernel stopped")
    log_file = (tmp_path / "data" / "logs" / "kernel.log").read_text()
    assert "kernel started" in log_file and "kernel stopped" in log_file
    for text in (output, err.decode(), log_file):
        assert DEFAULT_TOKEN not in text and SECRET_KEY not in text and "hi\n" not in text
    db = sqlite3.connect(tmp_path / "data" / "kernel.db")
    assert db.execute("pragma journal_mode").fetchone() == ("wal",)
    assert db.execute("select count(*) from messages").fetchone() == (2,)
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
    await k.agent.selection.provider()
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
