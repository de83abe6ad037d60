"""``kernel chat`` shows each update of the plan (todo_write) as one compact block, in
place of the tool's own lines (an in-process Kernel, the real SDK, SQLite on disk)."""

from __future__ import annotations

import io

from kernel.console.chat import ConsoleChat
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, ToolUse, text_reply, tool_reply

FIRST = [
    {"content": "Check the weather", "status": "in_progress"},
    {"content": "Pack the bag", "status": "pending"},
]
SECOND = [
    {"content": "Check the weather", "status": "completed"},
    {"content": "Pack the bag", "status": "in_progress"},
]


async def test_each_plan_update_is_one_block(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(
        tool_reply("todo_write", {"items": FIRST}),
        Reply(Text("Halfway."), ToolUse("todo_write", {"items": SECOND})),
        tool_reply("todo_write", {"items": [{"content": "Pack", "status": "done"}]}),
        text_reply("Ready to go."),
    )
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)

    await chat.converse("plan my trip")

    assert out.getvalue().splitlines() == [
        "📋 Plan · 0/2 done",
        "  ▶ Check the weather",
        "  ☐ Pack the bag",
        "Halfway.",
        "📋 Plan · 1/2 done",
        "  ☑ Check the weather",
        "  ▶ Pack the bag",
        # a refused call shows as a failed tool's result (the model reads why)
        '  ✗ error: item 0 ("Pack"): status "done" is not one of pending, in_progress, completed',
        "Ready to go.",
    ]
    assert err.getvalue() == "" and not chat.failed
