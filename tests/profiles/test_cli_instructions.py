"""Issue 19 point 3 in a real turn: the model calls delegate_to_cli in a chat with a
persona and a project, and the stand-in Claude Code gets the configured instructions,
then the persona's, then the project's, as its ``--append-system-prompt``; a persona
deleted since it was chosen is skipped; a chat with neither gets the configured text
alone, and a missing instructions file reaches the model as a tool error by name."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel.agent.agent import UserInput
from kernel.agent.scope import PERSONA, PROJECT
from kernel.app import Kernel
from kernel.config import load_config
from tests.conftest import write_config
from tests.delegate.conftest import cli_section, record_of
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply

CONV = "console:default"
FLAG = "--append-system-prompt="


@pytest.fixture
async def kernel(
    tmp_path: Path, workspace: Path, bin_dir: dict[str, Path], anthropic_sim: AnthropicSim
) -> AsyncIterator[Kernel]:
    path = write_config(
        tmp_path, anthropic_sim.base_url, "claude", language="en", default_workspace=str(workspace)
    )
    section = cli_section(
        "claude_code",
        command=str(bin_dir["claude_code"]),
        instructions="Never push.",
        instructions_file="cli.md",
    )
    path.write_text(path.read_text() + "\n" + section, encoding="utf-8")
    (tmp_path / "cli.md").write_text("Run the tests first.\n", encoding="utf-8")
    (tmp_path / "personas").mkdir()
    (tmp_path / "personas" / "terse.md").write_text(
        "---\ndescription: short answers\n---\n-- Be terse.\n", encoding="utf-8"
    )
    (tmp_path / "projects").mkdir()
    (tmp_path / "projects" / "site.md").write_text(
        "---\ndescription: the site\n---\nThe site is built with Hugo.\n", encoding="utf-8"
    )
    started = Kernel(load_config(path, env={}, require_telegram=False))
    await started.start()
    yield started
    await started.stop()


async def turn(kernel: Kernel, sim: AnthropicSim) -> str:
    """One turn that delegates; the tool result the model got, as text."""
    sim.enqueue(tool_reply("delegate_to_cli", {"task": "build"}), text_reply("done"))
    async for _ in kernel.agent.start_turn(CONV, UserInput("do it")):
        pass
    return json.dumps(sim.requests[-1].body["messages"][-1])


def system_of(record: Path) -> str:
    argv: list[str] = record_of(record)["argv"]
    flags = [arg for arg in argv if arg.startswith(FLAG)]
    assert len(flags) == 1 and argv.index(flags[0]) == argv.index("--") - 1
    assert argv[-1] == "build"
    return flags[0].removeprefix(FLAG)


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_configured_persona_and_project_instructions_reach_claude_code(
    kernel: Kernel,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))

    await turn(kernel, anthropic_sim)
    assert system_of(record) == "Never push.\n\nRun the tests first."

    await kernel.agent.scopes.set(CONV, PERSONA, "terse")
    await kernel.agent.scopes.set(CONV, PROJECT, "site")
    await turn(kernel, anthropic_sim)
    assert system_of(record) == (
        "Never push.\n\nRun the tests first.\n\n## Persona: terse\n-- Be terse.\n\n"
        "## Project: site\nThe site is built with Hugo."
    )

    (tmp_path / "personas" / "terse.md").unlink()  # gone since it was chosen: skipped
    await turn(kernel, anthropic_sim)
    assert system_of(record) == (
        "Never push.\n\nRun the tests first.\n\n## Project: site\nThe site is built with Hugo."
    )


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_a_missing_instructions_file_is_a_tool_error_naming_it(
    kernel: Kernel,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    (tmp_path / "cli.md").unlink()

    fed = await turn(kernel, anthropic_sim)

    assert (
        "cli.claude_code.instructions_file" in fed
        and json.dumps(str(tmp_path / "cli.md"))[1:-1] in fed
    )
    assert not record.exists()
