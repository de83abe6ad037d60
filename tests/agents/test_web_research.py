"""The issue's sub-agent case end to end: a ``researcher`` whose only tool is web_search
answers through a tool loop of its own against a search provider's simulator; the
owner's /cancel stops it while the provider stalls; and it can never delegate again."""

from __future__ import annotations

import asyncio
import json

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config.web import WebSearchConfig
from kernel.core.events import Completed, ToolProgress, ToolResult
from kernel.core.i18n import t
from tests.agents.kit import (
    CONV,
    AgentsFactory,
    Sim,
    agent_file,
    answered,
    child_sessions,
    run,
    tool_names,
)
from tests.sim.script import Reply, ToolUse, text_reply, tool_reply
from tests.sim.search_sims import Hit, SearchSim

RESEARCHER = agent_file(
    "researcher",
    "[web_search]",
    "You research one question with web_search and answer with the source URL.",
)


def delegate(task: str) -> Reply:
    return Reply(ToolUse("delegate_task", {"agent": "researcher", "task": task}))


def searching(kernel: Kernel, search: SearchSim) -> None:
    kernel.config.web.search = WebSearchConfig(provider="searxng", base_url=search.base_url)


async def test_a_researcher_answers_with_web_search_in_a_loop_of_its_own(
    sim: Sim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(sim, files={"researcher": RESEARCHER})
    async with SearchSim("searxng") as search:
        search.hits = [
            Hit("Kernel 2.0 released", "https://example.org/k2", "Out on 20 Nov.", "2026-11-20")
        ]
        searching(kernel, search)
        sim.enqueue(
            delegate("When was Kernel 2.0 released? Give the source."),  # the parent
            tool_reply("web_search", {"query": "Kernel 2.0 release date"}),  # the child
            text_reply("20 Nov 2026 (https://example.org/k2)"),  # the child's answer
            text_reply("Kernel 2.0 came out on 20 November (example.org)."),  # the parent
        )
        events = await run(kernel, "when did Kernel 2.0 come out?")

    done = events[-1]
    assert isinstance(done, Completed)
    assert done.reply == "Kernel 2.0 came out on 20 November (example.org)."
    [call] = search.calls
    assert call.query["q"] == "Kernel 2.0 release date"
    parent_first, child_first, child_second, parent_second = sim.requests
    assert "delegate_task" in tool_names(parent_first)
    assert tool_names(child_first) == ["web_search"]  # only its tools, never delegate_task
    # the child read the results as outside content; the parent read the child's answer
    child_wire = json.dumps(child_second.body, ensure_ascii=False)
    assert "untrusted_content" in child_wire and "https://example.org/k2" in child_wire
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.ok and result.name == "delegate_task"
    parent_wire = json.dumps(parent_second.body, ensure_ascii=False)
    assert "20 Nov 2026 (https://example.org/k2)" in parent_wire
    # drawn from the web, the sub-agent's answer reaches the parent marked as outside
    assert 'untrusted_content source=\\"sub-agent researcher\\"' in parent_wire
    assert any(
        isinstance(e, ToolProgress) and "web_search" in e.text for e in events
    )  # the child's step, shown as the tool's progress line
    [child] = await child_sessions(kernel)
    assert child.meta["agent"] == "researcher"
    assert answered(await kernel.store.load_messages(child.id))


async def test_cancel_stops_the_researcher_while_the_provider_stalls(
    sim: Sim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(sim, files={"researcher": RESEARCHER})
    async with SearchSim("searxng") as search:
        search.stall_next(3600)
        searching(kernel, search)
        sim.enqueue(delegate("look it up"), tool_reply("web_search", {"query": "it"}))
        turn = kernel.agent.start_turn(CONV, UserInput("look it up"))
        await search.wait_until(lambda: len(search.calls) == 1)

        assert kernel.agent.sessions.cancel(CONV)
        done = await asyncio.wait_for(turn.wait(), timeout=30)
        assert isinstance(done, Completed) and done.cancelled
        assert not kernel.agent.sessions.is_busy(CONV)

        [child] = await child_sessions(kernel)
        history = await kernel.store.load_messages(child.id)
        assert answered(history)
        assert history[-1].tool_results[0].content == t("history.tool_cancelled")
        # the next turn (and the next search) work
        search.hits = [Hit("It", "https://example.org/it", "")]
        sim.enqueue(
            delegate("again"),
            tool_reply("web_search", {"query": "it"}),
            text_reply("found (https://example.org/it)"),
            text_reply("Found it."),
        )
        events = await run(kernel, "try again")
    assert isinstance(events[-1], Completed) and events[-1].reply == "Found it."


async def test_the_researcher_cannot_delegate_again(sim: Sim, make_agents: AgentsFactory) -> None:
    everything = agent_file("researcher", "[*]", "You may use any tool.")  # every tool
    kernel = await make_agents(sim, files={"researcher": everything})
    sim.enqueue(
        delegate("go deeper"),
        Reply(ToolUse("delegate_task", {"agent": "researcher", "task": "deeper"})),
        text_reply("I could not delegate, so here is my own answer."),
        text_reply("Done."),
    )
    events = await run(kernel, "research")
    assert isinstance(events[-1], Completed) and events[-1].reply == "Done."
    child_first = sim.requests[1]
    assert "delegate_task" not in tool_names(child_first)  # never offered at depth one
    refusal = json.dumps(sim.requests[2].body, ensure_ascii=False)
    assert "cannot delegate" in refusal
    assert len(await child_sessions(kernel)) == 1  # no grandchild session
