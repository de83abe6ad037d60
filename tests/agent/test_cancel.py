"""/cancel in every phase of a turn, each followed by a turn the model API accepts."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.core.events import AssistantDelta, Completed, ToolCall, TurnEvent
from kernel.core.i18n import t
from kernel.core.turns import Turn
from tests.agent.test_turns import CONV, Sim, run, sent
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Text, text_reply, tool_reply
from tests.waiting import wait_until


async def next_event(turn: Turn, kind: type) -> list[TurnEvent]:
    """Events up to and including the first one of ``kind``."""
    seen: list[TurnEvent] = []
    async for event in turn:
        seen.append(event)
        if isinstance(event, kind):
            return seen
    raise AssertionError(f"turn ended before a {kind.__name__}: {seen}")


async def cancel_and_finish(kernel: Kernel, turn: Turn) -> Completed:
    assert kernel.agent.sessions.cancel(CONV)
    final = await asyncio.wait_for(turn.wait(), timeout=30)
    assert isinstance(final, Completed) and final.cancelled
    assert not kernel.agent.sessions.is_busy(CONV)
    return final


async def test_cancel_during_streaming(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
    sim.enqueue(
        Reply(Text("partial answer that never ends", chunks=["partial ", "answer"]), stall_after=4)
    )
    turn = kernel.agent.start_turn(CONV, UserInput("tell me a long story"))
    await next_event(turn, AssistantDelta)

    final = await cancel_and_finish(kernel, turn)
    assert final.reply.startswith("partial")

    sim.enqueue(text_reply("short story then"))
    events = await run(kernel, "ok, short then")
    assert isinstance(events[-1], Completed) and events[-1].reply == "short story then"
    history = json.dumps(sent(sim), ensure_ascii=False)
    assert "tell me a long story" in history and "[已取消]" in history


async def test_cancel_during_slow_tool(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
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

    sim.enqueue(tool_reply("slow_job", {"name": "backup"}))
    turn = kernel.agent.start_turn(CONV, UserInput("run the backup"))
    await next_event(turn, ToolCall)
    await asyncio.wait_for(started.wait(), timeout=30)

    await cancel_and_finish(kernel, turn)
    assert finished == []

    sim.enqueue(text_reply("The backup was cancelled."))
    events = await run(kernel, "what happened?")
    assert isinstance(events[-1], Completed)
    # the simulator (like the real API) rejects an unanswered tool_use with a 400;
    # it accepted this one, and the answer says why the tool stopped
    history = json.dumps(sent(sim), ensure_ascii=False)
    assert t("history.tool_cancelled") in history


async def test_cancel_during_retry_wait(sim: Sim, make_kernel: KernelFactory) -> None:
    waiting = asyncio.Event()
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)
        waiting.set()
        await asyncio.sleep(delay)

    kernel = await make_kernel(sim, sleep=sleep)
    # A 503's Retry-After is honoured like a 429's: the turn waits the whole 20 s...
    sim.enqueue(Error(503, "api_error", "try later", retry_after=20))
    turn = kernel.agent.start_turn(CONV, UserInput("hello?"))
    await asyncio.wait_for(waiting.wait(), timeout=30)
    assert waits == [20]

    # ...unless the owner cancels it, which ends the wait at once.
    final = await cancel_and_finish(kernel, turn)
    assert final.reply == ""
    assert len(sim.requests) == 1

    sim.enqueue(text_reply("hello!"))
    events = await run(kernel, "hello again")
    assert isinstance(events[-1], Completed) and events[-1].reply == "hello!"
    users = json.dumps([m for m in sent(sim) if m["role"] == "user"])
    assert "hello?" in users and "hello again" in users


async def test_busy_conversation_refuses_a_second_turn(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    from kernel.core.errors import BusyError

    kernel = await make_kernel(anthropic_sim)
    anthropic_sim.enqueue(Reply(Text("slow", chunks=["s", "low"]), stall_after=3))
    turn = kernel.agent.start_turn(CONV, UserInput("first"))
    await next_event(turn, AssistantDelta)
    try:
        kernel.agent.start_turn(CONV, UserInput("second"))
    except BusyError as exc:
        assert "/cancel" in str(exc)
    else:
        raise AssertionError("a second turn was accepted while busy")
    # another conversation is independent
    anthropic_sim.enqueue(text_reply("other"))
    other = kernel.agent.start_turn("test:2", UserInput("parallel"))
    final = await asyncio.wait_for(other.wait(), timeout=30)
    assert isinstance(final, Completed) and final.reply == "other"
    await cancel_and_finish(kernel, turn)


async def test_cancel_before_the_turn_starts_keeps_the_message(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    turn = kernel.agent.start_turn(CONV, UserInput("cancelled at once"))
    await cancel_and_finish(kernel, turn)  # in the same tick: the task had not run yet
    assert anthropic_sim.requests == []
    anthropic_sim.enqueue(text_reply("ok"))
    await run(kernel, "next")
    assert "cancelled at once" in json.dumps(sent(anthropic_sim))


async def test_double_cancel_still_ends_the_turn_once(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
    sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3))
    turn = kernel.agent.start_turn(CONV, UserInput("go"))
    await next_event(turn, AssistantDelta)
    assert kernel.agent.sessions.cancel(CONV) and kernel.agent.sessions.cancel(CONV)
    final = await asyncio.wait_for(turn.wait(), timeout=30)
    assert isinstance(final, Completed) and final.cancelled


async def test_provider_error_after_a_tool_ran_leaves_a_valid_history(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    from kernel.core.events import ErrorEvent

    kernel = await make_kernel(sim)
    sim.enqueue(
        tool_reply("memory_add", {"text": "x likes y"}), Error(400, "invalid_request_error")
    )
    events = await run(kernel, "remember x likes y")
    assert isinstance(events[-1], ErrorEvent)
    sim.enqueue(text_reply("recovered"))
    events = await run(kernel, "and now?")
    assert events[-1] == Completed(1, "recovered")  # the strict simulator accepted the history


async def test_a_cancel_once_the_answer_is_queued_keeps_it(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    """Issue 37: the final answer is queued, not waited for (its hop is the reply's). A
    /cancel right after it was queued (the hop not gone yet) loses nothing: the turn
    stays answered and the next turn's history carries the answer once."""
    kernel = await make_kernel(anthropic_sim)
    store = kernel.store
    store._courier.linger = 3600  # the answer waits for the next waited call
    queue = store.append_messages_soon
    cancelled: list[bool] = []

    def queued(session_id: int, messages: Any, rows: Any) -> Any:
        storing = queue(session_id, messages, rows)
        if messages[0].role == "assistant":
            cancelled.append(kernel.agent.sessions.cancel(CONV))
        return storing

    store.append_messages_soon = queued  # type: ignore[method-assign]
    anthropic_sim.enqueue(text_reply("the answer"), text_reply("next answer"))
    turn = kernel.agent.start_turn(CONV, UserInput("a question"))
    assert await turn.wait() == Completed(1, "the answer")  # answered, not cancelled
    assert cancelled == [True]
    await wait_until(lambda: not kernel.agent.sessions.is_busy(CONV), what="the turn ended")
    events = await run(kernel, "another")
    assert events[-1] == Completed(1, "next answer")
    history = json.dumps(sent(anthropic_sim), ensure_ascii=False)
    assert history.count("the answer") == 1 and "已取消" not in history
