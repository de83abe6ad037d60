"""A turn over the day's spend limit in Telegram (issue 16): one question with what was
spent, the limit and two buttons; only the owner's press counts; "raise" lets the same
turn go on, "stop", the timeout and /cancel end it; the 80% warning comes once."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from kernel.agent import turn as turn_module
from kernel.store.usage import UsageFilter
from tests.clock import ManualClock
from tests.sim.script import text_reply
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import CONV, BotHarness, Factory, asking

STRANGER = 4242
TZ = ZoneInfo("Asia/Shanghai")  # general.timezone of the test config
# Output at 0.001 a token: max_tokens 1024 makes any call's worst case above 1.02 (the
# input, at 0.00001 a token, adds little).
PRICED = """
[providers.main.prices.model-a]
input = 10.0
output = 1000.0
[budget]
currency = "USD"
daily = {daily}
step = {step}
"""


async def start(bot: Factory, daily: float = 2.0, step: float = 2.0) -> BotHarness:
    return await bot(extra=PRICED.format(daily=daily, step=step))


async def spend_most_of_today(h: BotHarness) -> None:
    """A first turn that costs 1.5 of the 2.0 limit: the next call's worst case passes it."""
    h.model.enqueue(text_reply("First.", usage=(0, 1500)))
    assert await h.converse("hello") == "First."
    assert len(h.model.requests) == 1


async def question(h: BotHarness) -> ChatMessage:
    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    return next(m for m in h.bot_messages() if asking(m))


def buttons(message: ChatMessage) -> list[dict[str, Any]]:
    assert message.reply_markup is not None
    return [b for row in message.reply_markup["inline_keyboard"] for b in row]


async def inbox_states(h: BotHarness) -> list[str]:
    wanted = ["waiting", "open", "answered", "failed", "cancelled", "dropped", "interrupted"]
    rows = await h.channel.mailroom.mailbox.inbox_rows("telegram", wanted)
    return [r.state for r in rows if r.kind == "text"]


async def nothing_unsent(h: BotHarness) -> None:
    await h.tg.wait_until(lambda: not h.channel.outbox.backlog(OWNER))
    assert await h.channel.mailroom.mailbox.unsent("telegram") == []


async def test_raise_lets_the_same_turn_go_on(bot: Factory) -> None:
    h = await start(bot)
    await spend_most_of_today(h)
    h.model.enqueue(text_reply("Second."))
    h.tg.inject_text("again")

    asked = await question(h)
    assert "$1.50" in asked.text and "$2.00" in asked.text  # spent, limit
    raise_it, stop = buttons(asked)
    assert (raise_it["text"], stop["text"]) == ("Raise by $2.00 and go on", "Stop")
    assert len(h.model.requests) == 1  # the over-budget call was not sent

    h.tg.inject_callback(raise_it["callback_data"], message_id=asked.message_id)
    await h.settle()

    assert len(h.model.requests) == 2  # the same turn, sent after the press
    assert h.texts()[-1] == "Second."
    closed = h.tg.message(OWNER, asked.message_id)
    assert closed is not None and closed.reply_markup is None
    assert closed.text.endswith("Chosen: Raise by $2.00 and go on")
    assert (await h.kernel.agent.meter.limits()).daily == 4.0
    assert await inbox_states(h) == ["answered", "answered"]
    await nothing_unsent(h)


async def test_stop_ends_the_turn_with_the_budget_message(bot: Factory) -> None:
    h = await start(bot)
    await spend_most_of_today(h)
    h.tg.inject_text("again")

    asked = await question(h)
    h.tg.inject_callback(buttons(asked)[1]["callback_data"], message_id=asked.message_id)
    await h.settle()

    assert len(h.model.requests) == 1
    assert "$2.00" in h.texts()[-1] and "not made" in h.texts()[-1]
    closed = h.tg.message(OWNER, asked.message_id)
    assert closed is not None and closed.text.endswith("Chosen: Stop")
    assert (await h.kernel.agent.meter.limits()).daily == 2.0
    assert await inbox_states(h) == ["answered", "failed"]
    await nothing_unsent(h)


async def test_no_answer_in_time_ends_the_turn(
    bot: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turn_module, "BUDGET_ASK_SECONDS", 0.3)
    h = await start(bot)
    await spend_most_of_today(h)
    h.tg.inject_text("again")

    asked = await question(h)
    await h.settle()

    assert len(h.model.requests) == 1
    assert "not made" in h.texts()[-1]
    closed = h.tg.message(OWNER, asked.message_id)
    assert closed is not None and closed.reply_markup is None
    assert "No answer in time" in closed.text
    assert await inbox_states(h) == ["answered", "failed"]
    await nothing_unsent(h)


async def test_a_strangers_press_does_not_raise_the_limit(bot: Factory) -> None:
    h = await start(bot)
    await spend_most_of_today(h)
    h.model.enqueue(text_reply("Second."))
    h.tg.inject_text("again")

    asked = await question(h)
    raise_it = buttons(asked)[0]["callback_data"]
    h.tg.inject_callback(raise_it, message_id=asked.message_id, user_id=STRANGER, chat_id=OWNER)
    status = await h.ask("/status full")  # handled after the stranger's press, in order

    assert "strangers 1" in status
    assert h.kernel.agent.sessions.is_busy(CONV) and len(h.model.requests) == 1
    assert h.kernel.agent.asks.waiting(CONV)
    assert (await h.kernel.agent.meter.limits()).daily == 2.0

    h.tg.inject_callback(raise_it, message_id=asked.message_id)
    await h.settle()
    assert len(h.model.requests) == 2 and h.texts()[-1] == "Second."


async def test_cancel_while_asking_ends_cleanly(bot: Factory) -> None:
    h = await start(bot)
    await spend_most_of_today(h)
    h.tg.inject_text("again")

    asked = await question(h)
    assert await h.ask("/cancel") == "Cancelled"
    await h.settle()

    assert h.kernel.agent.asks.waiting() == []
    assert len(h.model.requests) == 1
    closed = h.tg.message(OWNER, asked.message_id)
    assert closed is not None and closed.reply_markup is None
    assert "No longer waiting" in closed.text
    assert await inbox_states(h) == ["answered", "cancelled"]
    await nothing_unsent(h)


async def test_the_warning_comes_once_through_the_outbox(bot: Factory) -> None:
    h = await start(bot, daily=10.0)  # a call's worst case: about 1.04
    h.model.enqueue(
        text_reply("One.", usage=(0, 7000)),  # 70%
        text_reply("Two.", usage=(0, 1500)),  # 85%: warned
        text_reply("Three.", usage=(0, 500)),  # 90%: not again
    )
    for text in ("a", "b", "c"):
        await h.converse(text)
    await nothing_unsent(h)

    warnings = [m for m in h.texts() if m.startswith("💰")]
    assert len(warnings) == 1
    assert "85%" in warnings[0] and "$10.00" in warnings[0]
    total = await h.kernel.agent.meter.ledger.total(UsageFilter())
    assert total.calls == 3


async def test_a_raise_applies_to_today_only(bot: Factory) -> None:
    clock = ManualClock(datetime(2025, 6, 1, 23, 0, tzinfo=TZ))
    h = await bot(clock=clock, extra=PRICED.format(daily=2.0, step=2.0))
    await spend_most_of_today(h)
    h.model.enqueue(text_reply("Second."))
    h.tg.inject_text("again")
    asked = await question(h)
    h.tg.inject_callback(buttons(asked)[0]["callback_data"], message_id=asked.message_id)
    await h.settle()
    assert (await h.kernel.agent.meter.limits()).daily == 4.0

    clock.advance(to=datetime(2025, 6, 2, 0, 30, tzinfo=TZ))  # the owner's next day

    limits = await h.kernel.agent.meter.limits()
    assert (limits.daily, limits.raised_today) == (2.0, 0.0)
    h.model.enqueue(text_reply("New day."))
    assert await h.converse("morning") == "New day."  # nothing spent today: no question
    assert sum(1 for m in h.bot_messages() if "Raise by" in m.text) == 1
