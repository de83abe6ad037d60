"""delegate_to_cli as the model sees it: offered by the Kernel, called in a turn, its
result fed back and stored slimmed; Kernel.stop kills a running CLI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import Completed, ToolResult
from kernel.core.messages import ToolResultBlock
from tests.conftest import write_config
from tests.delegate.conftest import cli_section, read, record_of, wait_dead, wait_for
from tests.delegate.standins import alive
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, ToolUse, text_reply, tool_reply

CONV = "console:default"
KernelMaker = Callable[..., Awaitable[Kernel]]


@pytest.fixture
async def model() -> AsyncIterator[AnthropicSim]:
    sim = AnthropicSim()
    await sim.start()
    yield sim
    await sim.stop()


@pytest.fixture
async def kernel_with(
    tmp_path: Path, workspace: Path, model: AnthropicSim
) -> AsyncIterator[KernelMaker]:
    started: list[Kernel] = []

    async def make(*sections: str) -> Kernel:
        path = write_config(
            tmp_path,
            model.base_url,
            "claude",
            language="en",
            default_workspace=str(workspace),
        )
        path.write_text(path.read_text() + "\n" + "\n".join(sections), encoding="utf-8")
        kernel = Kernel(load_config(path, env={}, require_telegram=False))
        await kernel.start()
        started.append(kernel)
        return kernel

    yield make
    for kernel in started:
        await kernel.stop()


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


async def test_the_model_delegates_reads_the_result_and_history_keeps_a_one_liner(
    kernel_with: KernelMaker, model: AnthropicSim, bin_dir: dict[str, Path]
) -> None:
    kernel = await kernel_with(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    model.enqueue(
        tool_reply("delegate_to_cli", {"task": "count the files"}),
        text_reply("You have two files."),
    )
    turn = kernel.agent.start_turn(CONV, UserInput("how many files?"))
    events = [e async for e in turn]

    final = events[-1]
    assert isinstance(final, Completed) and final.reply == "You have two files."
    offered = {t["name"]: t for t in model.requests[0].body["tools"]}
    assert (
        "文件操作、代码编辑、项目分析、Shell 命令、浏览器操作"
        in offered["delegate_to_cli"]["description"]
    )
    [fed] = tool_results(model.requests[1].body)
    result = json.loads(fed["content"] if isinstance(fed["content"], str) else "")
    assert set(result) == {
        "ok",
        "cli",
        "version",
        "cwd",
        "exit_code",
        "reason",
        "output_path",
        "output",
    }
    assert result["version"] == "2.1.197 (Claude Code)" and result["reason"] is None
    assert result["ok"] is True and result["output"] == "Done: count the files"
    [shown] = [e for e in events if isinstance(e, ToolResult)]
    assert shown.ok and shown.summary.startswith("claude_code 已完成(成功)")

    session = kernel.agent.current_session(CONV)
    assert session is not None
    stored = [
        b
        for m in await kernel.store.load_messages(session)
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]
    assert [b.content for b in stored] == [
        f"claude_code 已完成(成功)，详见 {result['output_path']}"
    ]
    assert read(result["output_path"])


async def test_two_delegations_in_one_step_the_second_is_refused_as_busy(
    kernel_with: KernelMaker,
    model: AnthropicSim,
    bin_dir: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_DELAY", "0.05")
    kernel = await kernel_with(
        cli_section("claude_code", command=str(bin_dir["claude_code"])),
        cli_section("codex", command=str(bin_dir["codex"])),
    )
    model.enqueue(
        Reply(
            ToolUse("delegate_to_cli", {"task": "job one"}),
            ToolUse("delegate_to_cli", {"task": "job two", "cli": "codex"}),
        ),
        text_reply("One ran, one was refused."),
    )
    await kernel.agent.start_turn(CONV, UserInput("do both")).wait()

    first, second = tool_results(model.requests[1].body)
    assert json.loads(first["content"])["ok"] is True
    assert second.get("is_error") is True
    assert "busy: claude_code is already running" in second["content"]


async def test_kernel_stop_kills_a_running_delegation(
    kernel_with: KernelMaker,
    model: AnthropicSim,
    bin_dir: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    for key, value in {
        "STANDIN_MODE": "step_then_hang",
        "STANDIN_GRANDCHILD": "1",
        "STANDIN_RECORD": str(record),
    }.items():
        monkeypatch.setenv(key, value)
    kernel = await kernel_with(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    model.enqueue(tool_reply("delegate_to_cli", {"task": "forever"}))
    turn = kernel.agent.start_turn(CONV, UserInput("start it"))
    delegator = kernel.delegator
    await wait_for(lambda: delegator.running is not None and bool(delegator.running.step))
    info = record_of(record)

    await kernel.stop()

    final = await asyncio.wait_for(turn.wait(), 30)
    assert isinstance(final, Completed) and final.cancelled
    assert not alive(info["pid"])
    await wait_dead(info["grandchild"])
    assert delegator.running is None


def test_soul_md_carries_the_tool_rules_of_phase_2() -> None:
    soul = (Path(__file__).resolve().parents[2] / "SOUL.md").read_text(encoding="utf-8")
    for name in ("delegate_to_cli", "memory_add", "memory_search", "memory_delete"):
        assert f"`{name}`" in soul
    assert "/cancel" in soul and "codex" in soul and "output_path" in soul
