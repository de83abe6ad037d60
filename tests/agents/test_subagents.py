"""delegate_task end to end: a real Kernel, a real SQLite file, the real SDKs against
the model simulators; the parent's requests and the sub-agent's share one script."""

from __future__ import annotations

import asyncio

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.core.events import (
    AssistantDelta,
    Completed,
    ToolCall,
    ToolProgress,
    ToolResult,
    TurnEvent,
)
from kernel.core.i18n import t
from kernel.core.turns import Turn
from kernel.store.usage import UsageFilter, UsageStore
from kernel.tools.registry import ToolContext
from tests.agents.kit import (
    CONV,
    AgentsFactory,
    Sim,
    agent_file,
    answered,
    child_sessions,
    messages_of,
    run,
    tool_names,
)
from tests.sim import context
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Stall, Text, ToolUse, text_reply, tool_reply

TASK = "Find the launch code name"


def delegate(agent: str = "researcher", task: str = TASK) -> Reply:
    return tool_reply("delegate_task", {"agent": agent, "task": task})


def results(events: list[TurnEvent], name: str = "delegate_task") -> list[ToolResult]:
    return [e for e in events if isinstance(e, ToolResult) and e.name == name]


async def requests_made(sim: Sim, count: int) -> None:
    """Wait until the simulator has received ``count`` model requests."""
    await asyncio.wait_for(sim.wait_for_requests(count), timeout=30)


async def collect(turn: Turn) -> list[TurnEvent]:
    return [event async for event in turn]


def final(events: list[TurnEvent]) -> Completed:
    last = events[-1]
    assert isinstance(last, Completed), f"the turn did not complete: {last!r}"
    return last


async def test_a_sub_agent_answers_through_its_own_tool_loop(
    sim: Sim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(sim)
    await kernel.agent.memories.add("The launch code name is Bluebird.")
    sim.enqueue(
        delegate(),
        tool_reply("memory_search", {"query": "launch code name"}),
        text_reply("The code name is Bluebird."),
        text_reply("Your researcher says: Bluebird."),
    )

    events = await run(kernel, "what was the launch code name? ask the researcher")

    done = final(events)
    assert done.reply == "Your researcher says: Bluebird."
    assert len(sim.requests) == 4
    parent, child_first, child_second, parent_again = sim.requests
    # the parent is offered delegate_task and told which agents there are
    assert "delegate_task" in tool_names(parent)
    assert "researcher" in context.system_of(parent)
    # the sub-agent: its own prompt instead of SOUL.md, only its tools, the task as input
    assert tool_names(child_first) == ["memory_search"]
    system = context.system_of(child_first)
    assert "careful researcher" in system and t("prompt.soul_fallback") not in system
    assert context.owner_words(child_first) == TASK
    assert "Bluebird" in messages_of(child_second)  # its tool loop ran: memory_search's result
    # its final text is the parent's tool result
    assert "The code name is Bluebird." in messages_of(parent_again)
    [result] = results(events)
    assert result.ok
    # its steps appear as the parent call's progress line
    progress = [e.text for e in events if isinstance(e, ToolProgress)]
    assert "researcher: memory_search …" in progress
    # its own session, linked to the parent's, with a history a model accepts
    parent_session = kernel.agent.sessions.current_session(CONV)
    [child] = await child_sessions(kernel)
    assert child.meta["parent_session"] == parent_session
    assert child.meta["agent"] == "researcher"
    history = await kernel.store.load_messages(child.id)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[0].text == TASK and history[-1].text == "The code name is Bluebird."
    assert answered(history)
    # the parent's history holds only its own exchange
    assert "careful researcher" not in str(await kernel.store.load_messages(parent_session))
    # usage: the parent turn counts the sub-agent's two calls; the ledger tags them
    assert done.usage["calls"] == 4
    ledger = UsageStore(kernel.store)
    rows = await ledger.entries(UsageFilter(purpose="subagent"))
    assert len(rows) == 2
    assert {r.session_id for r in rows} == {child.id}
    parent_rows = await ledger.entries(UsageFilter(session_id=parent_session))
    [turn_id] = {r.turn_id for r in parent_rows}
    assert all(r.turn_id.startswith(turn_id + ".") for r in rows)


async def test_its_allow_list_limits_what_it_is_offered_and_may_run(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(
        delegate(),
        tool_reply("memory_add", {"text": "The owner is a spy."}),  # not in its allow-list
        text_reply("I could not save it."),
        text_reply("Done."),
    )

    events = await run(kernel, "go")

    assert final(events).reply == "Done."
    child_first = anthropic_sim.requests[1]
    assert "memory_add" not in tool_names(child_first)
    assert "delegate_task" not in tool_names(child_first)
    assert await kernel.agent.memories.recent(10) == []  # nothing ran
    child_second = messages_of(anthropic_sim.requests[2])
    assert "memory_add" in child_second and "researcher" in child_second  # the refusal


async def test_offered_only_while_a_usable_agent_exists(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    broken = "no front matter here"
    kernel = await make_agents(anthropic_sim, files={"broken": broken})
    anthropic_sim.enqueue(text_reply("hello"))
    await run(kernel, "hi")
    assert "delegate_task" not in tool_names(anthropic_sim.requests[-1])

    # a call made up anyway is refused in words naming where agents live
    anthropic_sim.enqueue(delegate("broken"), text_reply("no agents"))
    events = await run(kernel, "delegate it")
    [result] = results(events)
    assert not result.ok and "broken" in result.summary
    assert await child_sessions(kernel) == []

    (kernel.config.base_dir / "agents" / "summariser.md").write_text(
        agent_file("summariser", "[]"), encoding="utf-8"
    )
    assert [p.name for p in await kernel.agent.subagents.usable()] == ["summariser"]
    anthropic_sim.enqueue(text_reply("hello again"))
    await run(kernel, "hi again")
    assert "delegate_task" in tool_names(anthropic_sim.requests[-1])


async def test_the_offer_follows_the_folder_in_the_background(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    subagents = kernel.agent.subagents
    assert "delegate_task" in kernel.tools.names()  # scanned when the agent was built
    (kernel.config.base_dir / "agents" / "researcher.md").unlink()
    subagents.rescan_seconds = 0.0
    # listing the tools reads the last scan and starts a new one off the loop
    assert "delegate_task" in kernel.tools.names()
    rescan = subagents.rescanning
    assert rescan is not None
    await asyncio.wait_for(rescan, timeout=30)
    assert subagents.names == ()
    assert "delegate_task" not in kernel.tools.names()


async def test_an_unknown_agent_is_refused_naming_the_ones_there_are(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(delegate("oracle"), text_reply("There is no oracle."))

    events = await run(kernel, "ask the oracle")

    [result] = results(events)
    assert not result.ok
    assert "oracle" in result.summary and "researcher" in result.summary
    assert await child_sessions(kernel) == []
    assert final(events).reply == "There is no oracle."

    # a name that is a path reads no file outside agents/
    (kernel.config.base_dir / "secret.md").write_text(agent_file("secret", None), "utf-8")
    anthropic_sim.enqueue(delegate("../secret"), text_reply("No."))
    [result] = results(await run(kernel, "ask ../secret"))
    assert not result.ok and "researcher" in result.summary
    assert await child_sessions(kernel) == []


async def test_a_sub_agent_cannot_delegate(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    # an agent allowed every tool ("[*]") is offered every tool but delegate_task
    kernel = await make_agents(anthropic_sim, files={"anything": agent_file("anything", "[*]")})
    anthropic_sim.enqueue(
        delegate("anything"),
        delegate("anything", "and again, one level down"),
        text_reply("I cannot delegate; here is my own answer."),
        text_reply("Done."),
    )

    events = await run(kernel, "go")

    assert final(events).reply == "Done."
    offered = tool_names(anthropic_sim.requests[1])
    assert "memory_search" in offered and "delegate_task" not in offered
    refusal = messages_of(anthropic_sim.requests[2])
    assert "delegate_task" in refusal
    assert len(await child_sessions(kernel)) == 1  # no grandchild
    # the tool itself refuses at depth one, whoever calls it
    outcome = await kernel.tools.call(
        "delegate_task", {"agent": "anything", "task": "x"}, ToolContext(depth=1)
    )
    assert not outcome.ok and "cannot delegate" in outcome.content
    assert len(await child_sessions(kernel)) == 1


async def test_cancel_stops_the_sub_agent_with_its_parent(
    sim: Sim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(sim, files={"worker": agent_file("worker", "[slow_job]")})
    started = asyncio.Event()
    finished: list[bool] = []

    @kernel.tools.tool
    async def slow_job(name: str) -> str:
        """A job that takes very long.

        Args:
            name: job name
        """
        started.set()
        await asyncio.sleep(3600)
        finished.append(True)
        return "done"

    sim.enqueue(delegate("worker", "run the backup"), tool_reply("slow_job", {"name": "b"}))
    turn = kernel.agent.start_turn(CONV, UserInput("back up"))
    await asyncio.wait_for(started.wait(), timeout=30)

    assert kernel.agent.sessions.cancel(CONV)
    done = await asyncio.wait_for(turn.wait(), timeout=30)
    assert isinstance(done, Completed) and done.cancelled
    assert not kernel.agent.sessions.is_busy(CONV)
    assert finished == []
    left = [t for t in asyncio.all_tasks() if "slow_job" in repr(t.get_coro())]
    assert left == []

    # the sub-agent's history is closed: its tool call answered as cancelled
    [child] = await child_sessions(kernel)
    history = await kernel.store.load_messages(child.id)
    assert answered(history)
    assert history[-1].tool_results[0].content == t("history.tool_cancelled")
    # the parent's too, and its next turn is accepted by the model API
    sim.enqueue(text_reply("The backup was cancelled."))
    events = await run(kernel, "what happened?")
    assert final(events).reply == "The backup was cancelled."
    assert t("history.tool_cancelled").split("：")[0] in messages_of(sim.requests[-1])


async def test_cancel_while_the_sub_agent_streams(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(
        delegate(),
        Reply(Text("Searching the", chunks=["Searching ", "the"]), stall_after=4),
    )
    turn = kernel.agent.start_turn(CONV, UserInput("go"))
    await requests_made(anthropic_sim, 2)  # the sub-agent's model is answering

    assert kernel.agent.sessions.cancel(CONV)
    events = await asyncio.wait_for(collect(turn), timeout=30)
    done = events[-1]
    assert isinstance(done, Completed) and done.cancelled
    # the child's words are not the parent's: its steps show as progress only
    assert not any(isinstance(e, AssistantDelta) for e in events)
    assert any(isinstance(e, ToolProgress) for e in events)
    [child] = await child_sessions(kernel)
    history = await kernel.store.load_messages(child.id)
    assert answered(history) and history[0].text == TASK
    anthropic_sim.enqueue(text_reply("Stopped."))
    assert final(await run(kernel, "ok")).reply == "Stopped."


async def test_a_sub_agent_over_its_time_is_stopped(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim, max_seconds=1.0)
    anthropic_sim.enqueue(delegate(), Stall(), text_reply("It took too long."))

    events = await run(kernel, "go")

    [result] = results(events)
    assert not result.ok
    assert "max_seconds" in result.summary and "researcher" in result.summary
    assert final(events).reply == "It took too long."
    [child] = await child_sessions(kernel)
    assert answered(await kernel.store.load_messages(child.id))


async def test_a_sub_agent_stops_at_its_tool_call_cap(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim, max_tool_calls=1)
    search = {"query": "launch"}
    anthropic_sim.enqueue(
        delegate(),
        Reply(ToolUse("memory_search", search), ToolUse("memory_search", search)),
        text_reply("Done."),
    )

    events = await run(kernel, "go")

    assert final(events).reply == "Done."
    assert len(anthropic_sim.requests) == 3  # the child made one request: no second step
    [result] = results(events)
    assert "tool-call limit (1)" in result.summary
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.name for c in calls] == ["delegate_task"]  # the child's are not the parent's


async def test_a_failing_sub_agent_is_an_error_result(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(
        delegate(),
        Error(400, "invalid_request_error", "the prompt is malformed"),
        text_reply("The researcher failed."),
    )

    events = await run(kernel, "go")

    [result] = results(events)
    assert not result.ok
    assert "researcher" in result.summary and "malformed" in result.summary
    assert final(events).reply == "The researcher failed."


async def test_usage_reaches_the_parent_while_it_runs(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel: Kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(
        delegate(),
        tool_reply("memory_search", {"query": "x"}),
        Reply(Text("still thinking", chunks=["still ", "thinking"]), stall_after=4),
    )
    turn = kernel.agent.start_turn(CONV, UserInput("go"))
    await requests_made(anthropic_sim, 3)
    # the parent's first call and the child's first one are counted while the child runs
    assert turn.calls == 2 and turn.usage.output > 0
    kernel.agent.sessions.cancel(CONV)
    await asyncio.wait_for(turn.wait(), timeout=30)


async def test_its_model_answers_and_an_unknown_one_is_refused(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    files = {
        "fast": agent_file("fast", "[]", model="main:model-b"),
        "lost": agent_file("lost", "[]", model="nowhere:model-x"),
    }
    kernel = await make_agents(anthropic_sim, files=files)
    anthropic_sim.enqueue(delegate("fast"), text_reply("quick answer"), text_reply("Done."))

    events = await run(kernel, "go")

    assert final(events).reply == "Done."
    models = [r.body["model"] for r in anthropic_sim.requests]
    assert models == ["model-a", "model-b", "model-a"]

    anthropic_sim.enqueue(delegate("lost"), text_reply("It cannot run."))
    [result] = results(await run(kernel, "go again"))
    assert not result.ok and "nowhere" in result.summary
    assert len(await child_sessions(kernel)) == 1  # nothing made for the refused one


async def test_two_sub_agents_run_side_by_side(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    both = Reply(
        ToolUse("delegate_task", {"agent": "researcher", "task": "first"}),
        ToolUse("delegate_task", {"agent": "researcher", "task": "second"}),
    )
    anthropic_sim.enqueue(both, text_reply("one answer"), text_reply("another answer"))
    anthropic_sim.enqueue(text_reply("Both done."))

    events = await run(kernel, "ask twice")

    done = final(events)
    assert done.reply == "Both done."
    assert [r.ok for r in results(events)] == [True, True]
    children = await child_sessions(kernel)
    tasks = [(await kernel.store.load_messages(c.id))[0].text for c in children]
    assert sorted(tasks) == ["first", "second"]
    assert done.usage["calls"] == 4
