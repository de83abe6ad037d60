"""Memory scopes in real turns (issue 18): a chat in a project, with a persona, recalls
and searches global plus its project's and persona's memories, never another
project's; what the model adds (memory_add, <remember>) goes to the project."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernel.agent.agent import UserInput
from kernel.agent.scope import PERSONA, PROJECT
from kernel.app import Kernel
from kernel.core.events import Completed
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import recalled_of
from tests.sim.script import Reply, Text, ToolUse, text_reply

CHAT, OTHER = "console:kernel", "console:plain"


def write(base: Path, folder: str, name: str) -> None:
    path = base / folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {name} things\n---\nBe brief.\n")


async def turn(kernel: Kernel, conversation: str, text: str) -> None:
    final = await kernel.agent.start_turn(conversation, UserInput(text)).wait()
    assert isinstance(final, Completed)


def tool_results(sim: AnthropicSim, index: int) -> list[Any]:
    body = sim.requests[index].body
    assert body is not None
    blocks = body["messages"][-1]["content"]
    return [json.loads(b["content"]) for b in blocks if b.get("type") == "tool_result"]


async def test_recall_search_and_saving_follow_the_chat_scopes(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    for folder, name in (("projects", "kernel"), ("projects", "garden"), ("personas", "poet")):
        write(kernel.config.base_dir, folder, name)
    await kernel.agent.scopes.set(CHAT, PROJECT, "kernel")
    await kernel.agent.scopes.set(CHAT, PERSONA, "poet")
    await kernel.memories.add("the owner drinks oolong tea")
    await kernel.memories.add("kernel tea breaks are at four", None, "project:kernel")
    await kernel.memories.add("the garden tea bushes need shade", None, "project:garden")
    await kernel.memories.add("tea poems rhyme in haiku", None, "persona:poet")

    anthropic_sim.enqueue(
        Reply(
            Text("Noting it."),
            ToolUse("memory_add", {"text": "CI runs on every push"}),
            ToolUse("memory_search", {"query": "tea", "limit": 10}),
        ),
        text_reply("Done. <remember>releases are tagged on Fridays</remember>"),
    )
    await turn(kernel, CHAT, "tea time? note that CI runs on every push")

    recalled = recalled_of(anthropic_sim.requests[0])
    assert "oolong" in recalled and "four" in recalled and "haiku" in recalled
    assert "garden" not in recalled
    added, found = tool_results(anthropic_sim, 1)
    assert set(added) == {"id"}
    assert sorted((r["scope"], r["text"]) for r in found) == [
        ("global", "the owner drinks oolong tea"),
        ("persona:poet", "tea poems rhyme in haiku"),
        ("project:kernel", "kernel tea breaks are at four"),
    ]
    saved = {m.text: m.scope for m in await kernel.memories.recent()}
    assert saved["CI runs on every push"] == "project:kernel"
    assert saved["releases are tagged on Fridays"] == "project:kernel"

    # A chat with no project or persona recalls only the global memories.
    anthropic_sim.enqueue(text_reply("Tea."))
    await turn(kernel, OTHER, "tea time? CI? releases?")
    recalled = recalled_of(anthropic_sim.requests[2])
    assert "oolong" in recalled
    for hidden in ("four", "garden", "haiku", "CI runs", "Fridays"):
        assert hidden not in recalled
