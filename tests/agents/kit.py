"""A real Kernel with sub-agents: ``agents/<name>.md`` files beside its config.toml and
``[agents]`` limits, on one model simulator that answers the parent's requests and the
sub-agent's alike (in the order they are made: the child runs inside the tool call)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import TurnEvent
from kernel.core.messages import Message
from kernel.store.db import SessionRow
from tests.conftest import toml_value, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import RecordedRequest

Sim = AnthropicSim | OpenAISim
CONV = "console:agents"
RESEARCHER = """---
name: researcher
description: looks things up in memory and reports back
tools: [memory_search]
---

You are a careful researcher. Search, then answer in one sentence.
"""
AgentsFactory = Callable[..., Awaitable[Kernel]]


def agent_file(name: str, tools: str | None, body: str = "Do the task.", **extra: str) -> str:
    """An ``agents/<name>.md`` text; ``tools`` None: no allow-list (every tool)."""
    lines = ["---", f"name: {name}", f"description: the {name} agent"]
    if tools is not None:
        lines.append(f"tools: {tools}")
    lines += [f"{key}: {value}" for key, value in extra.items()]
    return "\n".join([*lines, "---", "", body, ""])


def write_agents(folder: Path, files: dict[str, str]) -> None:
    agents = folder / "agents"
    agents.mkdir(exist_ok=True)
    for name, text in files.items():
        (agents / f"{name}.md").write_text(text, encoding="utf-8")


@pytest.fixture
async def make_agents(tmp_path: Path) -> AsyncIterator[AgentsFactory]:
    """``await make_agents(sim, files={name: text}, max_seconds=…, max_tool_calls=…)``:
    a started Kernel on ``sim`` with those agent files and ``[agents]`` settings."""
    started: list[Kernel] = []

    async def factory(sim: Sim, files: dict[str, str] | None = None, **limits: Any) -> Kernel:
        sleep = limits.pop("sleep", None)
        kind = "claude" if isinstance(sim, AnthropicSim) else "openai_compat"
        path = write_config(tmp_path, sim.base_url, kind, language="en")
        if limits:
            lines = ["[agents]", *(f"{k} = {toml_value(v)}" for k, v in limits.items())]
            with path.open("a", encoding="utf-8") as out:
                out.write("\n".join(lines) + "\n")
        write_agents(tmp_path, {"researcher": RESEARCHER} if files is None else files)
        config = load_config(path, env={}, require_telegram=False)
        kernel = Kernel(config, sleep=sleep) if sleep else Kernel(config)
        await kernel.start()
        started.append(kernel)
        return kernel

    yield factory
    for kernel in started:
        await kernel.stop()


async def run(kernel: Kernel, text: str) -> list[TurnEvent]:
    turn = kernel.agent.start_turn(CONV, UserInput(text))
    return [event async for event in turn]


def tool_names(request: RecordedRequest) -> list[str]:
    """The tools a recorded request offered, in either wire format."""
    body = request.body
    assert isinstance(body, dict)
    names = []
    for tool in body.get("tools") or []:
        names.append(tool["function"]["name"] if "function" in tool else tool["name"])
    return names


def messages_of(request: RecordedRequest) -> str:
    """A request's conversation messages as JSON text (system message excluded)."""
    body = request.body
    assert isinstance(body, dict)
    return json.dumps(
        [m for m in body["messages"] if m.get("role") != "system"], ensure_ascii=False
    )


async def child_sessions(kernel: Kernel) -> list[SessionRow]:
    return await kernel.store.list_sessions(limit=50, channel="agent")


def answered(history: list[Message]) -> bool:
    """Every tool call in ``history`` has its result in the next message."""
    for index, message in enumerate(history):
        uses = {use.id for use in message.tool_uses}
        if not uses:
            continue
        if index + 1 >= len(history):
            return False
        results = {r.tool_use_id for r in history[index + 1].tool_results}
        if not uses <= results:
            return False
    return True
