"""A sub-agent's plan (todo_write) is its own session's: the parent turn gets no plan
event of it, only the parent call's progress line with the counts and the item in
progress (a real Kernel, the real SDK, SQLite on disk)."""

from __future__ import annotations

from kernel.core.events import PlanUpdated, ToolProgress
from tests.agents.kit import AgentsFactory, agent_file, run
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply

PLAN = [
    {"content": "Search the archive", "status": "completed"},
    {"content": "Summarise the findings", "status": "in_progress"},
]


async def test_a_sub_agents_plan_is_a_progress_line_of_the_parent_call(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(
        anthropic_sim, files={"researcher": agent_file("researcher", "todo_write")}
    )
    anthropic_sim.enqueue(
        tool_reply("delegate_task", {"agent": "researcher", "task": "dig"}),
        tool_reply("todo_write", {"items": PLAN}),
        text_reply("Found it."),
        text_reply("Your researcher found it."),
    )

    events = await run(kernel, "ask the researcher")

    assert not [e for e in events if isinstance(e, PlanUpdated)]
    progress = [e.text for e in events if isinstance(e, ToolProgress)]
    assert "researcher: plan 1/2 ▶ Summarise the findings" in progress
    assert events[-1].reply == "Your researcher found it."  # type: ignore[union-attr]
