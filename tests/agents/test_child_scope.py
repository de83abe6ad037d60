"""A sub-agent works inside the chat that started it (review of issue 18): the chat's
persona still limits its tools, a guest's sub-agent is that guest's, the chat's project
is its memory scope, a cron job's budget counts its calls, and /history leaves child
sessions out."""

from __future__ import annotations

from kernel.agent.agent import SessionKey, UserInput
from kernel.agent.scope import PERSONA, PROJECT
from kernel.app import Kernel
from kernel.commands import Commands
from kernel.core.events import Completed, ToolResult
from kernel.core.messages import ToolResultBlock
from kernel.memory import scopes
from kernel.store.usage import UsageFilter, UsageStore
from tests.agent.test_personas import write_profile
from tests.agents.kit import CONV, AgentsFactory, agent_file, child_sessions, run, tool_names
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, text_reply, tool_reply

ANYTHING = agent_file("helper", "[*]", "Do whatever the task says.")


def delegate(task: str = "tidy up") -> Reply:
    return tool_reply("delegate_task", {"agent": "helper", "task": task})


async def child_result(kernel: Kernel) -> ToolResultBlock:
    """The first tool result in the (one) child session's history."""
    [child] = await child_sessions(kernel)
    history = await kernel.store.load_messages(child.id)
    return next(m for m in history if m.tool_results).tool_results[0]


async def test_the_chats_persona_limits_a_sub_agents_tools(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim, files={"helper": ANYTHING})
    persona = "---\nname: safe\ndescription: only delegates\ntools: [delegate_task]\n---\n"
    write_profile(kernel, "personas", "safe", persona)
    row, _ = await kernel.memories.add("The owner's bike is blue")
    await kernel.agent.scopes.set(CONV, PERSONA, "safe")
    anthropic_sim.enqueue(
        delegate(),
        tool_reply("memory_delete", {"id": row.id}),  # the child tries what "safe" forbids
        text_reply("I could not."),
        text_reply("Nothing was changed."),
    )
    events = await run(kernel, "tidy my memories")

    assert isinstance(events[-1], Completed)
    assert tool_names(anthropic_sim.requests[1]) == []  # nothing both lists allow
    result = await child_result(kernel)
    assert result.is_error and "safe" in result.content
    assert [m.id for m in await kernel.store.list_memories()] == [row.id]


async def test_a_guests_sub_agent_is_the_guests(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)  # the researcher: tools [memory_search]
    await kernel.memories.add("The owner's PIN hint is bluebird")
    anthropic_sim.enqueue(
        tool_reply("delegate_task", {"agent": "researcher", "task": "find the PIN hint"}),
        tool_reply("memory_search", {"query": "PIN"}),
        text_reply("Nothing found."),
        text_reply("I found nothing."),
    )
    guest = UserInput(
        "what is the PIN hint?", channel="qq", guest=True, guest_tools=("delegate_task",)
    )
    final = await kernel.agent.start_turn(CONV, guest).wait()

    assert isinstance(final, Completed)
    assert tool_names(anthropic_sim.requests[1]) == []  # memory_search is not the guest's
    result = await child_result(kernel)
    assert result.is_error
    wire = str([r.body for r in anthropic_sim.requests])
    assert "bluebird" not in wire


async def test_a_sub_agent_remembers_into_the_chats_project(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim, files={"helper": ANYTHING})
    write_profile(kernel, "projects", "alpha", "---\nname: alpha\ndescription: a\n---\n")
    await kernel.agent.scopes.set(CONV, PROJECT, "alpha")
    anthropic_sim.enqueue(
        delegate("note that alpha ships friday"),
        tool_reply("memory_add", {"text": "alpha ships friday"}),
        text_reply("Noted."),
        text_reply("Done."),
    )
    events = await run(kernel, "note it")
    assert isinstance(events[-1], Completed)
    [memory] = await kernel.store.list_memories()
    assert memory.scope == scopes.project("alpha")
    results = [e for e in events if isinstance(e, ToolResult)]
    assert results and results[-1].ok


async def test_a_cron_jobs_budget_counts_its_sub_agents_calls(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    opened = await kernel.agent.sessions.open_session(
        SessionKey("cron", "", "job-digest"), meta={"source": "cron", "cron_job_id": "digest"}
    )
    assert opened is not None
    anthropic_sim.enqueue(
        tool_reply("delegate_task", {"agent": "researcher", "task": "look"}),
        text_reply("found"),
        text_reply("digest done"),
    )
    final = await kernel.agent.start_turn(
        opened.conversation, UserInput("run the digest", channel="cron")
    ).wait()
    assert isinstance(final, Completed)
    rows = await UsageStore(kernel.store).entries(UsageFilter(job_id="digest"))
    assert sorted(r.purpose for r in rows) == ["cron", "cron", "subagent"]


async def test_history_leaves_child_sessions_out(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(
        tool_reply("delegate_task", {"agent": "researcher", "task": "look"}),
        text_reply("found"),
        text_reply("done"),
    )
    await run(kernel, "research")
    assert len(await child_sessions(kernel)) == 1
    listed = await kernel.agent.sessions.list_sessions()
    assert [row.channel for row in listed] == ["console"]
    reply = await Commands(kernel).run(CONV, "history", "")
    assert reply is not None and "look" not in reply.text


async def test_deleting_a_session_deletes_its_sub_agents_sessions(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(
        tool_reply("delegate_task", {"agent": "researcher", "task": "look"}),
        text_reply("found"),
        text_reply("done"),
        text_reply("other chat"),
    )
    await run(kernel, "research")
    parent = kernel.agent.sessions.current_session(CONV)
    await kernel.agent.start_turn("console:other", UserInput("hi")).wait()
    other = kernel.agent.sessions.current_session("console:other")
    assert parent is not None and other is not None and len(await child_sessions(kernel)) == 1
    kernel.agent.sessions.new_session(CONV)
    assert await kernel.agent.sessions.delete_sessions([parent]) == 1
    assert await child_sessions(kernel) == []
    assert await kernel.store.get_session(other) is not None
