"""Model calls outside a plain turn (issue 23): a sub-agent's run records into its own
child session; a sidecar ``/v1`` call (no session) into the global chain as ``api``.
Every call is exactly one row."""

from __future__ import annotations

from typing import Any

from kernel.core.messages import Message, TextBlock
from kernel.core.provider import ChatRequest
from kernel.spend import CallTag
from kernel.store.audit import AuditRow
from kernel.store.usage import UsageFilter
from tests.agents.kit import CONV, AgentsFactory, child_sessions, run
from tests.agents.kit import make_agents as make_agents  # noqa: F401 - the fixture
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply

TASK = "Find the launch code name"


def facts(row: AuditRow) -> dict[str, Any]:
    assert row.data is not None
    return row.data


async def test_a_sub_agent_records_into_its_child_session(
    anthropic_sim: AnthropicSim, make_agents: AgentsFactory
) -> None:
    kernel = await make_agents(anthropic_sim)
    anthropic_sim.enqueue(
        tool_reply("delegate_task", {"agent": "researcher", "task": TASK}),
        tool_reply("memory_search", {"query": "launch code name"}),
        text_reply("The code name is Bluebird."),
        text_reply("Your researcher says: Bluebird."),
    )
    await run(kernel, "ask the researcher")
    parent = kernel.agent.sessions.current_session(CONV)
    [child] = await child_sessions(kernel)

    mine = await kernel.audit.events(parent)
    assert [r.kind for r in mine] == [
        "message.received",
        "model.call",
        "tool.call",
        "model.call",
        "turn.answered",
    ]
    assert facts(mine[2])["tool"] == "delegate_task"
    theirs = await kernel.audit.events(child.id)
    assert [r.kind for r in theirs] == [
        "message.received",
        "model.call",
        "tool.call",
        "model.call",
        "turn.answered",
    ]
    assert theirs[0].actor == "model"  # the task came from the parent's model
    assert facts(theirs[0])["channel"] == child.channel
    assert [facts(r)["purpose"] for r in theirs if r.kind == "model.call"] == ["subagent"] * 2
    assert facts(theirs[2])["tool"] == "memory_search"
    assert TASK not in str([r.raw_data for r in theirs])
    # Exactly one row per model call the ledger has.
    ledger = await kernel.agent.meter.ledger.entries(UsageFilter())
    calls = [r for r in await kernel.audit.events(limit=1000) if r.kind == "model.call"]
    assert sorted(facts(r)["ledger"] for r in calls) == sorted(e.id for e in ledger)
    assert (await kernel.audit.verify(child.id)).ok and (await kernel.audit.verify()).ok


async def test_a_sidecar_call_is_recorded_globally_as_the_api(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    anthropic_sim.enqueue(text_reply("from the v1 endpoint"))
    request = ChatRequest("model-a", "", [Message("user", [TextBlock("a v1 question")])])
    async for _ in kernel.agent.stream_request("main", request, CallTag("api")):
        pass
    [row] = [r for r in await kernel.audit.events() if r.kind == "model.call"]
    assert (row.session_id, row.seq, row.actor) == (None, None, "api")
    assert facts(row)["purpose"] == "api" and facts(row)["outcome"] == "ok"
    assert (await kernel.audit.verify()).ok
