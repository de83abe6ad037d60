"""The agent's keyed sessions: one conversation per session, queueing behind a running
turn (also one started from another channel), turn lookup, model resolution."""

from __future__ import annotations

import asyncio

import pytest

from kernel.agent.agent import SessionKey, UserInput
from kernel.core.errors import BusyError
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply

KEY = SessionKey("console", "u1", "s1")


async def test_same_key_same_conversation(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    first = await kernel.agent.sessions.open_session(KEY, meta={"x": 1})
    again = await kernel.agent.sessions.open_session(KEY)
    assert first is not None and again is not None
    assert first.created and not again.created
    assert first.conversation == again.conversation == f"session:{first.row.id}"
    assert (
        await kernel.agent.sessions.open_session(SessionKey("qq", "u1", "s1"), create=False) is None
    )


async def test_waiters_queue_and_time_out(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    agent = kernel.agent
    opened = await agent.sessions.open_session(KEY)
    assert opened is not None
    anthropic_sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3))
    turn = agent.start_turn(opened.conversation, UserInput("one"))
    await anthropic_sim.wait_for_requests(1)
    with pytest.raises(BusyError):
        agent.start_turn(opened.conversation, UserInput("two"))
    with pytest.raises(BusyError):
        await agent.sessions.wait_idle(opened.conversation, 0.05)
    assert agent.sessions.waiting(opened.conversation) == 0
    waiter = asyncio.create_task(agent.sessions.wait_idle(opened.conversation, 10))
    await asyncio.sleep(0)
    assert agent.sessions.waiting(opened.conversation) == 1 and not waiter.done()
    assert agent.sessions.find_turn(turn.id) is turn
    turn.cancel()
    await asyncio.wait_for(waiter, 30)
    assert not agent.sessions.is_busy(opened.conversation)
    assert agent.sessions.find_turn("turn-0") is None
    # An ended turn is still known (cancelling it does nothing), but no longer held:
    # its events, queue and usage go with it (issue 37: memory flat over many turns).
    assert turn.task is not None
    await asyncio.wait({turn.task}, timeout=30)
    ended = agent.sessions.find_turn(turn.id)
    assert ended is not None and ended is not turn and ended.cancel() is False


async def test_a_session_resumed_elsewhere_is_busy_for_both(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    agent = kernel.agent
    opened = await agent.sessions.open_session(KEY)
    assert opened is not None
    await agent.sessions.resume("telegram:42", opened.row.id)  # the owner resumed it in Telegram
    anthropic_sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3), text_reply("ok"))
    turn = agent.start_turn("telegram:42", UserInput("from telegram", channel="telegram"))
    await anthropic_sim.wait_for_requests(1)
    assert agent.sessions.is_busy(opened.conversation)
    with pytest.raises(BusyError):
        agent.start_turn(opened.conversation, UserInput("from http"))
    turn.cancel()
    await turn.wait()
    await agent.sessions.wait_idle(opened.conversation, 5)
    final = await agent.start_turn(opened.conversation, UserInput("from http")).wait()
    assert getattr(final, "reply", "") == "ok"


async def test_clear_history_keeps_the_session(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    agent = kernel.agent
    opened = await agent.sessions.open_session(KEY)
    assert opened is not None
    anthropic_sim.enqueue(text_reply("a"))
    await agent.start_turn(opened.conversation, UserInput("q", user_id="u1")).wait()
    assert await agent.sessions.clear_history(opened.conversation) == 2
    row = await kernel.store.get_session(opened.row.id)
    assert row is not None and row.message_count == 0


async def test_resolve_model_and_provider_changes(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    agent = kernel.agent
    kernel.config.providers["main"].aliases["fast"] = "model-b"
    assert agent.selection.resolve_model("model-b") == ("main", "model-b")
    assert agent.selection.resolve_model("fast") == ("main", "model-b")
    assert agent.selection.resolve_model("unknown") == ("main", "model-a")
    await agent.selection.set_model("fast")
    assert agent.selection.model == "model-b"
    old = await agent.selection.provider()
    kernel.config.providers["main"].models = ["model-a"]
    agent.selection.providers_changed({"main"})
    assert agent.selection.model == "model-a"  # the chosen model is gone: back to the default
    assert await agent.selection.provider() is not old  # rebuilt with the new settings
