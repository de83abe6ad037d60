"""AskRegistry.on_end: how each wait ended reaches its listeners (a channel closes the
question's message at that moment)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kernel.core.asks import Answer, AskOutcome, AskRegistry, Question


def listen(asks: AskRegistry) -> tuple[list[tuple[str, Answer | None]], Callable[[], None]]:
    heard: list[tuple[str, Answer | None]] = []
    stop = asks.on_end(lambda q, a: heard.append((q.id, a)))
    return heard, stop


async def test_each_ending_is_heard_once_with_its_outcome() -> None:
    asks = AskRegistry()
    heard, _ = listen(asks)

    answered = Question("c", "?", ["a", "b"])
    waiting = asyncio.ensure_future(asks.wait(answered, 30))
    await asyncio.sleep(0)
    asks.answer(answered.id, 1)
    assert (await waiting).option == 1

    timed = Question("c", "?", ["a"])
    assert (await asks.wait(timed, 0.01)).outcome is AskOutcome.TIMEOUT

    cancelled = Question("c", "?", ["a"])
    waiting = asyncio.ensure_future(asks.wait(cancelled, 30))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    undelivered = Question("c", "?", ["a"])
    waiting = asyncio.ensure_future(asks.wait(undelivered, 30))
    await asyncio.sleep(0)
    asks.undelivered(undelivered.id)
    assert (await waiting).outcome is AskOutcome.UNDELIVERED

    assert [(i, a.outcome if a else None, a.choice if a else None) for i, a in heard] == [
        (answered.id, AskOutcome.ANSWERED, 1),
        (timed.id, AskOutcome.TIMEOUT, None),
        (cancelled.id, None, None),
        (undelivered.id, AskOutcome.UNDELIVERED, None),
    ]
    assert asks.waiting() == []  # withdrawn before the listeners hear of it


async def test_a_failing_listener_changes_nothing_and_a_stopped_one_hears_nothing() -> None:
    asks = AskRegistry()

    def broken(question: Question, answer: Answer | None) -> None:
        raise RuntimeError("listener bug")

    asks.on_end(broken)
    heard, stop = listen(asks)
    question = Question("c", "?", ["a"])
    waiting = asyncio.ensure_future(asks.wait(question, 30))
    await asyncio.sleep(0)
    asks.answer(question.id, 0)
    assert (await waiting).option == 0
    assert len(heard) == 1

    stop()
    stop()  # twice is harmless
    assert (await asks.wait(Question("c", "?", ["a"]), 0.01)).outcome is AskOutcome.TIMEOUT
    assert len(heard) == 1
