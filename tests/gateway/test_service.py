"""``python -m kernel`` as systemd runs it: the sidecar starts beside the Telegram channel,
answers, keeps runtime changes across a restart, and stops before the database."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KernelProcess, kernel_env, spawn_kernel, write_config
from tests.gateway.conftest import API_KEY
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.posix]  # a real `python -m kernel` process
# posix: ordered shutdown on SIGTERM


async def started(process: KernelProcess) -> tuple[str, list[str]]:
    """Read the log until the sidecar says where it listens; returns its URL."""
    assert process.stdout is not None
    seen: list[str] = []
    async with asyncio.timeout(30):
        while True:
            line = (await process.stdout.readline()).decode()
            assert line, "kernel exited: " + "".join(seen)
            seen.append(line)
            if "gateway listening on " in line:
                return line.split("gateway listening on ")[1].split()[0], seen


async def telegram_started(url: str) -> Any:
    """/healthz once the Telegram channel is past "starting" (the sidecar answers first)."""
    health: dict[str, Any] = {}

    async def past_starting() -> bool:
        health.update(await asyncio.to_thread(call, url + "/healthz"))
        return bool(health["channels"]["telegram"]["state"] != "starting")

    await wait_until(past_starting, what="Telegram past starting")
    return health


def call(url: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("X-API-Key", API_KEY)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.loads(response.read())


async def test_service_runs_the_sidecar_and_keeps_runtime_changes(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    tg = await TelegramSim().start()
    path = write_config(tmp_path, anthropic_sim.base_url, "claude", gateway={"api_key": API_KEY})
    path.write_text(
        path.read_text() + f'[telegram]\napi_base = "{tg.api_base}"\npoll_timeout = 1\n'
    )
    env = kernel_env(KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER))
    outputs: list[str] = []
    process: KernelProcess | None = None
    try:
        for round_ in (1, 2):
            process = await spawn_kernel(cwd=tmp_path, env=env)
            url, seen = await started(process)
            health = await telegram_started(url)
            assert health["status"] == "ok"
            assert health["channels"]["telegram"]["state"] == "running"
            if round_ == 1:
                anthropic_sim.enqueue(text_reply("over http"))
                reply = await asyncio.to_thread(
                    call,
                    url + "/agent/process",
                    "POST",
                    {"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
                )
                assert reply["reply"] == "over http"
                await asyncio.to_thread(call, url + "/envs/REGION", "PUT", {"value": "eu"})
            else:
                envs = await asyncio.to_thread(call, url + "/envs")
                assert envs["envs"] == [
                    {"key": "REGION", "value": "eu", "sensitive": False, "source": "runtime"}
                ]
                chat = await asyncio.to_thread(call, url + "/chats/chat-default")
                assert [m["role"] for m in chat["messages"]] == ["user", "assistant"]
            process.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(process.communicate(), timeout=30)
            assert process.returncode == 0, err.decode()
            outputs.append("".join(seen) + out.decode())
    finally:
        if process is not None and process.returncode is None:
            process.kill()  # a failed assertion must not leave the service running
            await process.wait()
        await tg.stop()
    for output in outputs:
        # After the store (Kernel started) and stopped before it (SPEC §8); it starts
        # beside Telegram's connecting, not before it.
        assert output.index("kernel started") < output.index("gateway listening")
        assert output.index("gateway stopped") < output.index("kernel stopped")
        assert API_KEY not in output and "over http" not in output
        assert "POST /agent/process -> 200" in output or "GET /envs -> 200" in output
    assert 'REGION = "eu"' in (tmp_path / "data" / "runtime.toml").read_text()
    assert "REGION" not in path.read_text()
