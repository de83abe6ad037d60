"""``prompts/AGENTS.md`` and the ``[prompts] layers`` files as system layers after
SOUL.md (issue 20, point 2): in a stable order, listed by GET /agent/system-layers,
read fresh so a SelfOps change is in the very next request, skipped when missing or a
symlink loop; never part of a guest's turn."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from kernel.agent.agent import UserInput
from kernel.agent.prompt_files import LayerFile, PromptFiles
from kernel.config import load_config
from kernel.core.errors import ConfigError, PromptError
from kernel.core.events import Completed
from tests.conftest import KernelFactory, write_config
from tests.gateway.conftest import SidecarFactory
from tests.prompts.conftest import FLAGS_ON
from tests.selfops.test_mutations import apply, preview
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import system_of
from tests.sim.script import text_reply
from tests.telegram.conftest import Factory


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
    sc = await sidecar(anthropic_sim, extra=extra + FLAGS_ON)

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
    sc = await sidecar(anthropic_sim, extra=FLAGS_ON)
    _, data, _ = await sc.call("GET", "/agent/system-layers")
    assert "agents_md" not in [name for name, _ in names_of(data)]
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "AGENTS.md").write_text("  \n\n")
    _, data, _ = await sc.call("GET", "/agent/system-layers")
    assert "agents_md" not in [name for name, _ in names_of(data)]


async def test_a_selfops_change_to_agents_md_is_in_the_next_request(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, extra=FLAGS_ON)
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
    sc = await sidecar(anthropic_sim, extra=FLAGS_ON)
    anthropic_sim.enqueue(text_reply("a"), text_reply("b"))
    await sc.process("one")
    await sc.process("two")
    first, second = anthropic_sim.requests[-2:]
    assert first.body["system"] == second.body["system"]


async def test_a_missing_configured_layer_is_a_warning_then_skipped_until_it_exists(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    later = '\n[prompts]\nlayers = ["prompts/later.md"]\n'
    sc = await sidecar(anthropic_sim, extra=later + FLAGS_ON)
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
    sc = await sidecar(anthropic_sim, extra=FLAGS_ON)
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


def loops(folder: Path) -> None:
    """``prompts/AGENTS.md -> AGENTS.md``, ``a.md <-> b.md`` and ``x.md -> x.md``."""
    folder.mkdir(exist_ok=True)
    os.symlink("AGENTS.md", folder / "AGENTS.md")
    os.symlink("b.md", folder / "a.md")
    os.symlink("a.md", folder / "b.md")
    os.symlink("x.md", folder / "x.md")


async def test_a_symlink_loop_in_prompts_is_skipped_and_the_turn_goes_on(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """Review fix (issue 20): ``Path.resolve()`` raised RuntimeError on a loop, so every
    turn failed and GET /agent/system-layers answered 500."""
    loops(tmp_path / "prompts")
    (tmp_path / "prompts" / "style.md").write_text("Be terse.\n")
    extra = '\n[prompts]\nlayers = ["prompts/a.md", "prompts/style.md", "prompts/x.md"]\n'
    sc = await sidecar(anthropic_sim, extra=extra + FLAGS_ON)

    status, data, _ = await sc.call("GET", "/agent/system-layers")
    assert status == 200
    names = [name for name, _ in names_of(data)]
    assert "prompt_layer_2" in names
    assert not {"agents_md", "prompt_layer_1", "prompt_layer_3"} & set(names)
    anthropic_sim.enqueue(text_reply("fine"))
    status, reply = await sc.process("hello")
    assert status == 200 and reply["reply"] == "fine"
    assert "Be terse." in system_of(anthropic_sim.requests[-1])


def test_a_looping_file_is_read_as_nothing_and_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", language="en")
    path.write_text(path.read_text() + '\n[prompts]\nlayers = ["prompts/a.md"]\n' + FLAGS_ON)
    files = PromptFiles(load_config(path, env={}, require_telegram=False))
    loops(tmp_path / "prompts")

    with caplog.at_level(logging.WARNING, logger="kernel.agent.prompt_files"):
        assert files.layers() == [] and files.layers() == []
        assert files.read(tmp_path / "prompts" / "x.md") == ""
    warned = [r.getMessage() for r in caplog.records]
    assert warned.count("prompt layer AGENTS.md skipped: unreadable") == 1
    assert warned.count("prompt layer a.md skipped: unreadable") == 1
    assert [f.name for f in files.default_files()] == ["agents_md", "prompt_layer_1"]
    # a looping x.md is no template: not listed, and "not found" when named
    assert files.templates() == []
    with pytest.raises(PromptError) as caught:
        files.expand("/prompts:x")
    assert caught.value.code == "prompt_template_not_found"


async def test_a_guests_turn_gets_none_of_the_owners_prompt_files(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory, tmp_path: Path
) -> None:
    """Review fix (issue 20): AGENTS.md and the [prompts] layers are the owner's (SelfOps
    writes them), withheld from a guest like the persona, the project and memories."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "AGENTS.md").write_text("The owner's house rules.\n")
    (tmp_path / "prompts" / "extra.md").write_text("The owner's extra layer.\n")
    kernel = await make_kernel(anthropic_sim)
    kernel.config.prompts.layers.append("prompts/extra.md")
    anthropic_sim.enqueue(text_reply("guest answer"), text_reply("owner answer"))

    guest = UserInput("hi", channel="qq", guest=True, guest_tools=("ask_user",))
    assert isinstance(await kernel.agent.start_turn("qq:guest", guest).wait(), Completed)
    owner = UserInput("hi", channel="telegram")
    assert isinstance(await kernel.agent.start_turn("tg:owner", owner).wait(), Completed)

    guest_request, owner_request = (json.dumps(r.body) for r in anthropic_sim.requests)
    assert "house rules" not in guest_request and "extra layer" not in guest_request
    assert "house rules" in owner_request and "extra layer" in owner_request


async def test_a_selfops_change_to_agents_md_is_in_the_next_telegram_request(
    bot: Factory,
) -> None:
    """The same through the Telegram simulator: SelfOps (preview, then apply with its
    hash) changes prompts/AGENTS.md between two of the owner's messages."""
    h = await bot(extra=FLAGS_ON)
    h.model.enqueue(text_reply("one"), text_reply("two"))
    assert await h.converse("first") == "one"
    assert "Answer in rhyme." not in system_of(h.model.requests[-1])
    op = {"kind": "replace", "path": "prompts/AGENTS.md", "value": "Answer in rhyme.\n"}
    planned = await h.kernel.selfops.preview("workspace_file", [op])
    await h.kernel.selfops.apply(planned["mutation_id"], planned["confirm_hash"])
    assert await h.converse("second") == "two"
    assert "Answer in rhyme." in system_of(h.model.requests[-1])
