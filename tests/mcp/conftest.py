"""MCP fixtures: a real Kernel whose config.toml lists MCP servers (our SDK-built stdio
server, mcp-server-time, streamable HTTP on loopback), wired to a model simulator."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.clock import Clock
from tests.conftest import free_port as free_port  # for the MCP tests' own servers
from tests.conftest import write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.telegram.conftest import bot  # noqa: F401  # the Telegram harness, for /status
from tests.waiting import wait_until as wait_until  # tests/telegram imports it here
from tests.zygote import python_script

SERVER_SCRIPT = Path(__file__).with_name("stdio_server.py")


def stdio_server(name: str = "test", *extra_args: str, **keys: Any) -> dict[str, Any]:
    """A [[mcp.servers]] table running tests/mcp/stdio_server.py (forked from the run's
    zygote through tests/mcp/launch.py: tests/zygote.py)."""
    command, args = python_script(SERVER_SCRIPT, *extra_args)
    return {"name": name, "type": "stdio", "command": command, "args": args, **keys}


def time_server(name: str = "time") -> dict[str, Any]:
    """mcp-server-time from PyPI (a dev dependency), run from this environment."""
    return {
        "name": name,
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    }


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
        )
    raise TypeError(value)


def mcp_toml(servers: list[dict[str, Any]], settings: dict[str, Any] | None = None) -> str:
    lines = ["", "[mcp]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in (settings or {}).items()]
    for server in servers:
        lines.append("[[mcp.servers]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in server.items()]
    return "\n".join(lines) + "\n"


MCPKernel = Callable[..., Awaitable[Kernel]]


@pytest.fixture
async def model() -> AsyncIterator[AnthropicSim]:
    sim = AnthropicSim()
    await sim.start()
    yield sim
    await sim.stop()


@pytest.fixture
async def mcp_kernel(tmp_path: Path) -> AsyncIterator[MCPKernel]:
    """``await mcp_kernel(sim, [server tables], settings={...}, env={...}, clock=...,
    **general)``."""
    started: list[Kernel] = []

    async def factory(
        sim: AnthropicSim | OpenAISim,
        servers: list[dict[str, Any]],
        *,
        settings: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        start: bool = True,
        clock: Clock | None = None,
        **general: Any,
    ) -> Kernel:
        kind = "claude" if isinstance(sim, AnthropicSim) else "openai_compat"
        general.setdefault("language", "en")
        path = write_config(tmp_path, sim.base_url, kind, **general)
        defaults = {"reconnect_base_delay": 0.05, "reconnect_max_delay": 0.2}
        path.write_text(path.read_text() + mcp_toml(servers, defaults | (settings or {})))
        kernel = Kernel(load_config(path, env=env or {}, require_telegram=False), clock=clock)
        started.append(kernel)
        if start:
            await kernel.start()
        return kernel

    yield factory
    for kernel in started:
        await kernel.stop()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
