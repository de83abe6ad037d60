"""``prompts/AGENTS.md`` and the ``[prompts] layers`` files as system layers after
SOUL.md (issue 20, point 2): in a stable order, listed by GET /agent/system-layers,
read fresh so a SelfOps change is in the very next request, skipped when missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernel.agent.prompt_files import LayerFile, PromptFiles
from kernel.config import load_config
from kernel.core.errors import ConfigError
from tests.conftest import write_config
from tests.gateway.conftest import SidecarFactory
from tests.selfops.test_mutations import apply, preview
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import system_of
from tests.sim.script import text_reply


def names_of(data: dict[str, object]) -> list[tuple[str, str]]:
    layers = data["layers"]
    assert isinstance(layers, list)
    return [(layer["name"], layer["source"]) for layer in layers]


async def test_agents_md_and_configured_layers_follow_soul_in_order(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    (tmp_path / "SOUL.md").write_text("You are Kay.\n")
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "AGENTS.md").write_text("Answer in haiku.\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "house.md").write_text("Never use emoji.\n")
    (tmp_path / "prompts" / "style.md").write_text("Be terse.\n")
    extra = '\n[prompts]\nlayers = ["prompts/style.md", "notes/house.md", "prompts/AGENTS.md"]\n'
    sc = await sidecar(anthropic_sim, extra=extra)

    status, data, _ = await sc.call("GET", "/agent/system-layers")

    assert status == 200
    # AGENTS.md once, right after SOUL.md; then the configured files in their order
    assert names_of(data)[:4] == [
        ("soul", "SOUL.md"),
        ("agents_md", "prompts/AGENTS.md"),
        ("prompt_layer_1", "prompts/style.md"),
        ("prompt_layer_2", "notes/house.md"),
    ]
    agents = data["layers"][1]
    assert agents["role"] == "system" and agents["content_preview"] == "Answer in haiku."
    assert len(agents["layer_hash"]) == 16 and agents["estimated_tokens"] > 0
    anthropic_sim.enqueue(text_reply("ok"))
    status, _ = await sc.process("hello")
    assert status == 200
    system = system_of(anthropic_sim.requests[-1])
    order = [system.index(s) for s in ("You are Kay.", "Answer in haiku.", "Be terse.", "emoji")]
    assert order == sorted(order)


async def test_without_agents_md_nothing_changes_and_an_empty_one_is_no_layer(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    _, data, _ = await sc.call("GET", "/agent/system-layers")
    assert "agents_md" not in [name for name, _ in names_of(data)]
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "AGENTS.md").write_text("  \n\n")
    _, data, _ = await sc.call("GET", "/agent/system-layers")
    assert "agents_md" not in [name for name, _ in names_of(data)]


async def test_a_selfops_change_to_agents_md_is_in_the_next_request(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
    assert (await sc.process("first"))[0] == 200
    assert "Speak like a pirate." not in system_of(anthropic_sim.requests[-1])

    op = {"kind": "replace", "path": "prompts/AGENTS.md", "value": "Speak like a pirate.\n"}
    status, _ = await apply(sc, await preview(sc, "workspace_file", op))
    assert status == 200
    assert (await sc.process("second"))[0] == 200
    assert "Speak like a pirate." in system_of(anthropic_sim.requests[-1])

    # Same size, same second: the inode or the nanosecond stamp still tells it changed.
    op = {"kind": "replace", "path": "prompts/AGENTS.md", "value": "Speak like a parrot.\n"}
    status, _ = await apply(sc, await preview(sc, "workspace_file", op))
    assert status == 200
    assert (await sc.process("third"))[0] == 200
    system = system_of(anthropic_sim.requests[-1])
    assert "Speak like a parrot." in system and "pirate" not in system


async def test_an_unchanged_layer_keeps_the_system_prompt_identical(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """The provider's prompt cache: two turns, the same system prompt byte for byte."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "AGENTS.md").write_text("Policy.\n")
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("a"), text_reply("b"))
    await sc.process("one")
    await sc.process("two")
    first, second = anthropic_sim.requests[-2:]
    assert first.body["system"] == second.body["system"]


async def test_a_missing_configured_layer_is_a_warning_then_skipped_until_it_exists(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, extra='\n[prompts]\nlayers = ["prompts/later.md"]\n')
    assert any("prompts/later.md" in w for w in sc.kernel.config.warnings)
    _, data, _ = await sc.call("GET", "/agent/system-layers")
    assert "prompt_layer_1" not in [name for name, _ in names_of(data)]

    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "later.md").write_text("Now here.\n")
    _, data, _ = await sc.call("GET", "/agent/system-layers")
    assert ("prompt_layer_1", "prompts/later.md") in names_of(data)

    os.remove(tmp_path / "prompts" / "later.md")
    _, data, _ = await sc.call("GET", "/agent/system-layers")
    assert "prompt_layer_1" not in [name for name, _ in names_of(data)]


async def test_a_layer_file_that_is_not_text_is_skipped(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "AGENTS.md").write_bytes(b"\xff\xfe\x00bad")
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("fine"))
    status, data = await sc.process("hello")
    assert status == 200 and data["reply"] == "fine"


def test_prompts_layers_must_be_a_list_of_text(tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", language="en")
    path.write_text(path.read_text() + '\n[prompts]\nlayers = "prompts/a.md"\n')
    with pytest.raises(ConfigError, match="prompts.layers"):
        load_config(path, env={}, require_telegram=False)


def test_a_list_of_layer_files_can_be_swapped_and_required_ones_checked(tmp_path: Path) -> None:
    """What a prompt mode will build on: its own files, in its order, some required."""
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", language="en")
    files = PromptFiles(load_config(path, env={}, require_telegram=False))
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "base.md").write_text("Base.\n")
    (tmp_path / "prompts" / "empty.md").write_text("\n")
    wanted = [
        LayerFile("mode_base", tmp_path / "prompts" / "base.md", "prompts/base.md", True),
        LayerFile("mode_empty", tmp_path / "prompts" / "empty.md", "prompts/empty.md", True),
        LayerFile("mode_gone", tmp_path / "prompts" / "gone.md", "prompts/gone.md", True),
        LayerFile("mode_extra", tmp_path / "prompts" / "extra.md", "prompts/extra.md"),
    ]
    assert [(x.name, x.text) for x in files.layers(wanted)] == [("mode_base", "Base.")]
    assert [f.name for f in files.unavailable(wanted)] == ["mode_empty", "mode_gone"]
