"""send_message (issue 38 item 3; seed 001 ``SendMessage``): a parent turn follows up
in a child session it started with delegate_task and gets the child's next answer (the
child remembers its first job); a session that is not its child is refused. A real
Kernel, SQLite on disk, the real SDK against the model simulator."""

from __future__ import annotations

import json

from kernel.core.events import ToolResult, TurnEvent
from tests.agents.kit import AgentsFactory, child_sessions, messages_of, run
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply


def results(events: list[TurnEvent]) -> list[ToolResult]:
    return [e for e in events if isinstance(e, ToolResult) and e.name == "send_message"]


async def test_a_parent_follows_up_in_its_child_session(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(
        tool_reply("delegate_task", {"agent": "researcher", "task": "Find the code name"}),
        text_reply("It is BLUEBIRD."),
        tool_reply("send_message", {"agent": "researcher", "message": "And its year?"}),
        text_reply("BLUEBIRD launched in 1998."),
        text_reply("Code name BLUEBIRD, launched 1998."),
    )

    events = await run(kernel, "ask the researcher, then ask about the year")

    [result] = results(events)
    assert result.ok
    [child] = await child_sessions(kernel)  # the follow-up ran in the same child session
    stored = json.dumps(
        [m.text for m in await kernel.store.load_messages(child.id)], ensure_ascii=False
    )
    for said in ("Find the code name", "It is BLUEBIRD.", "And its year?", "launched in 1998"):
        assert said in stored
    # the child's second request carried its first job: it continues, not starts anew
    second_child_request = anthropic_sim.requests[3]
    assert "It is BLUEBIRD." in messages_of(second_child_request)
    # the parent's last request holds the child's answer as the tool's result
    assert "BLUEBIRD launched in 1998." in messages_of(anthropic_sim.requests[4])


async def test_a_session_that_is_not_its_child_is_refused(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(text_reply("hello"))
    await run(kernel, "hi")
    [own] = await kernel.store.list_sessions(limit=5)  # the parent's own session
    anthropic_sim.enqueue(
        tool_reply("send_message", {"session_id": own.id, "message": "psst"}),
        text_reply("I cannot."),
    )

    events = await run(kernel, "message session one")

    [result] = results(events)
    assert not result.ok
    refusal = f"session {own.id} is not a sub-agent session this chat started"
    assert refusal in messages_of(anthropic_sim.requests[-1])
    assert await child_sessions(kernel) == []
    assert len(anthropic_sim.requests) == 3  # no child turn was run
