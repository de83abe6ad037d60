"""Seed 000's prompt flags (issue 38, item 8): the ``environment_context`` layer behind
``[features] environment_context`` (working folder, OS, shell, date; nothing secret),
and ``NEXTAI_DISABLED_TOOLS`` read beside ``KERNEL_DISABLED_TOOLS``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from kernel.agent.agent import UserInput
from kernel.agent.environment import shown_folder
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import Completed
from tests.conftest import SECRET_KEY, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import system_of
from tests.sim.script import text_reply

Run = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
async def hello(tmp_path: Path, anthropic_sim: AnthropicSim) -> AsyncIterator[Run]:
    """One "你好" turn on a Kernel built from ``extra`` and ``env``: the request sent."""
    kernels: list[Kernel] = []

    async def run(extra: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
        workspace = tmp_path / "work"
        workspace.mkdir(exist_ok=True)
        path = write_config(
            tmp_path, anthropic_sim.base_url, "claude", default_workspace=str(workspace)
        )
        path.write_text(path.read_text() + extra)
        kernel = Kernel(load_config(path, env=env or {}, require_telegram=False))
        kernels.append(kernel)
        await kernel.start()
        anthropic_sim.enqueue(text_reply("你好！"))
        final = await kernel.agent.start_turn("console:default", UserInput("你好")).wait()
        assert isinstance(final, Completed)
        body: dict[str, Any] = anthropic_sim.requests[-1].body
        return body

    yield run
    for kernel in kernels:
        await kernel.stop()


async def test_environment_context_is_a_system_layer_only_when_asked(
    hello: Run, tmp_path: Path
) -> None:
    assert "## 环境" not in system_of(await hello())  # off by default

    zone = ZoneInfo("Asia/Shanghai")
    before = datetime.now(zone).date()
    system = system_of(await hello("\n[features]\nenvironment_context = true\n"))
    after = datetime.now(zone).date()

    start = system.index("## 环境")
    layer = system[start:].split("\n\n")[0].splitlines()
    assert layer[1] == f"- 工作目录：{tmp_path / 'work'}"
    assert layer[2].startswith("- 操作系统：") and os.uname().sysname in layer[2]
    shell = layer[3].removeprefix("- Shell：")
    assert shell and "/" not in shell and "\\" not in shell  # a name, never a path
    assert layer[4] in {f"- 日期：{day.isoformat()}" for day in (before, after)}
    assert SECRET_KEY not in system


def test_a_folder_under_home_is_written_from_tilde() -> None:
    home = Path.home()
    assert shown_folder(home / "projects" / "site") == "~/projects/site"
    assert shown_folder(home) == "~"
    assert shown_folder(Path("/srv/work")) == "/srv/work"


async def test_nextai_disabled_tools_is_honoured_beside_kernels_own(hello: Run) -> None:
    env = {
        "NEXTAI_DISABLED_TOOLS": "memory_delete, todo_write",
        "KERNEL_DISABLED_TOOLS": "ask_user",
    }
    body = await hello(env=env)
    offered = {tool["name"] for tool in body["tools"]}
    assert "memory_add" in offered
    assert not offered & {"memory_delete", "todo_write", "ask_user"}
