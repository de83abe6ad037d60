"""A project's working folder in a real turn: the model calls delegate_to_cli without a
cwd (or a relative one) and the stand-in CLI runs in the project's folder; without a
project, in the workspace as before."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kernel.agent.agent import UserInput
from kernel.agent.scope import PROJECT
from kernel.app import Kernel
from kernel.config import load_config
from tests.conftest import write_config
from tests.delegate.conftest import cli_section, record_of
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply

CONV = "console:default"


def lay_out(base: Path) -> Path:
    project = base / "src" / "site"
    (project / "docs").mkdir(parents=True)
    (base / "projects").mkdir()
    (base / "projects" / "site.md").write_text(
        "---\ndescription: the site\nfolder: src/site\n---\nHugo.\n"
    )
    return project


@pytest.fixture
async def kernel(
    tmp_path: Path, workspace: Path, bin_dir: dict[str, Path], anthropic_sim: AnthropicSim
) -> AsyncIterator[Kernel]:
    path = write_config(
        tmp_path, anthropic_sim.base_url, "claude", language="en", default_workspace=str(workspace)
    )
    section = cli_section("claude_code", command=str(bin_dir["claude_code"]))
    path.write_text(path.read_text() + "\n" + section, encoding="utf-8")
    started = Kernel(load_config(path, env={}, require_telegram=False))
    await started.start()
    yield started
    await started.stop()


async def delegate(kernel: Kernel, sim: AnthropicSim, args: dict[str, Any]) -> dict[str, Any]:
    sim.enqueue(tool_reply("delegate_to_cli", args), text_reply("done"))
    async for _ in kernel.agent.start_turn(CONV, UserInput("do it")):
        pass
    fed = [
        block
        for message in sim.requests[-1].body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ][-1]
    result: dict[str, Any] = json.loads(fed["content"])
    return result


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_the_cli_runs_in_the_projects_folder(
    kernel: Kernel,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = lay_out(tmp_path)
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))

    result = await delegate(kernel, anthropic_sim, {"task": "build"})
    assert result["ok"] is True and result["cwd"] == str(workspace)  # no project yet

    await kernel.agent.scopes.set(CONV, PROJECT, "site")
    result = await delegate(kernel, anthropic_sim, {"task": "build"})
    assert result["ok"] is True and result["cwd"] == str(project)
    assert record_of(record)["cwd"] == str(project)
    system = json.dumps(anthropic_sim.requests[-1].body["system"])
    assert str(project) in system  # the model is told where it works

    result = await delegate(kernel, anthropic_sim, {"task": "build", "cwd": "docs"})
    assert result["cwd"] == str(project / "docs")
    assert record_of(record)["cwd"] == str(project / "docs")

    await kernel.agent.scopes.set(CONV, PROJECT, None)
    result = await delegate(kernel, anthropic_sim, {"task": "build"})
    assert result["cwd"] == str(workspace)


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_a_project_folder_that_is_gone_is_a_tool_error_and_nothing_runs(
    kernel: Kernel, anthropic_sim: AnthropicSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = lay_out(tmp_path)
    project.joinpath("docs").rmdir()
    project.rmdir()
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    await kernel.agent.scopes.set(CONV, PROJECT, "site")
    anthropic_sim.enqueue(tool_reply("delegate_to_cli", {"task": "build"}), text_reply("sorry"))
    async for _ in kernel.agent.start_turn(CONV, UserInput("do it")):
        pass
    text = json.dumps(anthropic_sim.requests[-1].body["messages"][-1])
    assert str(project) in text and "not a directory" in text
    assert not record.exists()
