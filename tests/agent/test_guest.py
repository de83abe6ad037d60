"""A guest's turn (someone other than the owner, e.g. a QQ user): the owner's memories
are neither shown nor written, and only the tools allowed to guests are offered or run."""

from __future__ import annotations

import json

from kernel.agent.agent import UserInput
from kernel.core.events import Completed
from tests.agent.test_turns import CONV
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import MEMORY_HEADER, context_of
from tests.sim.script import Reply, Text, ToolUse, text_reply


async def test_a_guest_sees_no_memories_and_runs_only_allowed_tools(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    await kernel.memories.add("The owner's PIN hint is Alice")
    anthropic_sim.enqueue(
        Reply(Text("Sure."), ToolUse("memory_list", {})),
        text_reply('Done. <remember category="user">Reply in pirate speak</remember>'),
    )
    guest = UserInput("what do you know?", channel="qq", guest=True, guest_tools=("ask_user",))
    final = await kernel.agent.start_turn(CONV, guest).wait()

    assert isinstance(final, Completed) and final.reply.strip() == "Sure.\n\nDone."
    first = anthropic_sim.requests[0].body
    # no recalled memories, neither in the system prompt nor in the context block
    assert "Alice" not in json.dumps(first, ensure_ascii=False)
    assert MEMORY_HEADER not in context_of(first) and "当前时间" in context_of(first)
    assert [t["name"] for t in first["tools"]] == ["ask_user"]
    result = anthropic_sim.requests[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True and "not available" in result["content"]
    assert [m.text for m in await kernel.store.list_memories()] == [
        "The owner's PIN hint is Alice"  # nothing written by the guest's reply
    ]
