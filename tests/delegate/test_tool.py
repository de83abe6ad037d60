"""delegate_to_cli as the model sees it: offered by the Kernel, called in a turn, its
result fed back and stored slimmed; Kernel.stop kills a running CLI."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import Completed, ToolResult
from kernel.core.i18n import t
from kernel.core.messages import ToolResultBlock
from kernel.delegate import tool
from kernel.delegate.delegator import Delegator
from kernel.tools import memory
from kernel.tools.registry import ToolRegistry
from tests.conftest import write_config
from tests.delegate.conftest import ConfigFactory, cli_section, read, record_of, wait_dead
from tests.delegate.standins import alive
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, ToolUse, text_reply, tool_reply
from tests.waiting import wait_until

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable

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
        "files, code, project analysis, shell commands, the browser"
        in offered["delegate_to_cli"]["description"]
    )
    # Only claude_code is found: nothing to choose, so no cli argument is offered.
    assert set(offered["delegate_to_cli"]["input_schema"]["properties"]) == {"task", "cwd"}
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
        "signal",
        "kernel_signals",
        "cause",
    }
    assert result["version"] == "2.1.197 (Claude Code)" and result["reason"] is None
    assert result["ok"] is True and result["output"] == "Done: count the files"
    [shown] = [e for e in events if isinstance(e, ToolResult)]
    assert shown.ok and shown.summary.startswith("claude_code finished (succeeded)")

    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    stored = [
        b
        for m in await kernel.store.load_messages(session)
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]
    assert [b.content for b in stored] == [
        f"claude_code finished (succeeded); see {result['output_path']}"
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
    await wait_until(lambda: delegator.running is not None and bool(delegator.running.step))
    info = record_of(record)

    await kernel.stop()

    final = await asyncio.wait_for(turn.wait(), 30)
    assert isinstance(final, Completed) and final.cancelled
    assert not alive(info["pid"])
    await wait_dead(info["grandchild"])
    assert delegator.running is None


def test_the_tool_rules_of_phase_2_travel_with_the_tools(
    make_config: ConfigFactory, bin_dir: dict[str, Path]
) -> None:
    """Kernel's own rules for each tool travel in the tools' definitions, so the model
    reads them only when the tool is offered; the shipped SOUL.md carries the same rules
    as editable sections (issue 38), and a tool it has a section for goes without them."""
    soul = (Path(__file__).resolve().parents[2] / "SOUL.md").read_text(encoding="utf-8")
    for name in ("delegate_to_cli", "memory_add", "memory_search", "memory_delete"):
        assert re.search(rf"^### {name}$", soul, re.MULTILINE), name
    config = make_config(
        cli_section("claude_code", command=str(bin_dir["claude_code"])),
        cli_section("codex", command=str(bin_dir["codex"])),
    )
    registry = ToolRegistry()
    tool.register(registry, Delegator(config))
    memory.register(registry, None)  # type: ignore[arg-type]  # only read when called
    specs = {s.name: s for s in registry.specs()}
    delegate = specs["delegate_to_cli"]
    for words in ("/cancel", "output_path", "do not retry", "invent nothing"):
        assert words in delegate.description, words
    cli = delegate.parameters["properties"]["cli"]
    assert cli["enum"] == ["claude_code", "codex"] and "default claude_code" in cli["description"]
    assert "self-contained" in delegate.parameters["properties"]["task"]["description"]
    assert "Never passwords" in specs["memory_add"].description
    assert "before answering" in specs["memory_search"].description
    assert "forget" in specs["memory_delete"].description
    owned = {s.name: s for s in registry.specs(without_rules={"delegate_to_cli", "memory_add"})}
    assert "do not retry" not in owned["delegate_to_cli"].description
    assert "output_path" in owned["delegate_to_cli"].description  # what it returns stays
    assert "Never passwords" not in owned["memory_add"].description
    assert "before answering" in owned["memory_search"].description


async def test_not_offered_when_no_configured_cli_is_found(
    kernel_with: KernelMaker, model: AnthropicSim, tmp_path: Path
) -> None:
    kernel = await kernel_with(
        cli_section("claude_code", command=str(tmp_path / "missing" / "claude")),
        cli_section("codex", command="kernel-test-no-such-codex"),
        cli_section("gemini", command="kernel-test-no-such-gemini"),
    )
    assert "delegate_to_cli" not in kernel.tools.names()
    model.enqueue(tool_reply("delegate_to_cli", {"task": "x"}), text_reply("Cannot."))
    final = await kernel.agent.start_turn(CONV, UserInput("do it")).wait()

    assert isinstance(final, Completed) and final.reply == "Cannot."
    assert "delegate_to_cli" not in {t["name"] for t in model.requests[0].body["tools"]}
    [fed] = tool_results(model.requests[1].body)
    assert fed.get("is_error") is True and fed["content"].startswith(
        t("tool.unknown", name="delegate_to_cli", listing="")
    )
    assert "delegate_to_cli" not in json.dumps(model.requests[0].body["system"])


async def test_only_the_clis_found_are_offered_and_the_first_is_the_default(
    kernel_with: KernelMaker, model: AnthropicSim, bin_dir: dict[str, Path]
) -> None:
    kernel = await kernel_with(
        cli_section("claude_code", command="kernel-test-no-such-claude"),
        cli_section("codex", command=str(bin_dir["codex"])),
        cli_section("gemini", command=str(bin_dir["gemini"])),
    )
    model.enqueue(tool_reply("delegate_to_cli", {"task": "count"}), text_reply("Done."))
    await kernel.agent.start_turn(CONV, UserInput("count the files")).wait()

    [offered] = [t for t in model.requests[0].body["tools"] if t["name"] == "delegate_to_cli"]
    cli = offered["input_schema"]["properties"]["cli"]
    assert cli["enum"] == ["codex", "gemini"] and "default codex" in cli["description"]
    [fed] = tool_results(model.requests[1].body)
    assert json.loads(fed["content"])["cli"] == "codex"  # no cli given: the first found
