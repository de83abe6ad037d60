"""/usage and /status in the Telegram simulator after real turns through the Anthropic
simulator, with prices configured and an injected clock; figures computed by hand."""

from __future__ import annotations

from datetime import UTC, datetime

from kernel.store.usage import UsageFilter
from tests.clock import ManualClock
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, ToolUse, text_reply
from tests.telegram.conftest import CONV, BotHarness, Factory
from tests.telegram.test_owner_words import gpt_provider

# model-a: $3 in, $15 out, $0.30 cache read per million tokens; model-b has no price.
PRICES = """
[providers.main.prices."model-a"]
input = 3.0
output = 15.0
cache_read = 0.3
[budget]
daily = 2.0
"""
GPT_PRICES = """
[providers.gpt.prices."gpt-4o"]
input = 3.0
output = 15.0
[budget]
daily = 2.0
"""
NOW = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)  # Wed 2 Dec, 10:00 in Asia/Shanghai


async def test_usage_after_real_turns_with_a_known_and_an_unknown_price(bot: Factory) -> None:
    clock = ManualClock(NOW)
    h = await bot(extra=PRICES, clock=clock)
    h.model.enqueue(text_reply("Hello!", usage=(10_000, 2_000)))  # 0.03 + 0.03 = $0.06
    assert await h.converse("hi") == "Hello!"
    clock.advance(3600)
    h.model.enqueue(text_reply("Again.", usage=(20_000, 4_000)))  # 0.06 + 0.06 = $0.12
    assert await h.converse("again") == "Again."
    assert await h.ask("/model model-b") == "Switched to model model-b"
    h.model.enqueue(text_reply("Unpriced.", usage=(5_000, 1_000)))
    assert await h.converse("on b") == "Unpriced."

    await h.ask("/usage")
    assert h.texts()[-1].splitlines() == [
        "📊 Usage and spend",
        "Today: $0.18 + 1 of unknown price · 3 calls · 35.0K in (0% cached) · 7.0K out",
        "This week: $0.18 + 1 of unknown price · 3 calls · 35.0K in (0% cached) · 7.0K out",
        "This month: $0.18 + 1 of unknown price · 3 calls · 35.0K in (0% cached) · 7.0K out",
        "This month input: fresh 35.0K · cache read 0 · cache write 0; output 7.0K",
        "This month: 1 calls of unknown price, not in the sums: set the model's price in"
        " [providers.<name>.prices]",
        "Daily cost, last 14 days: ▁▁▁▁▁▁▁▁▁▁▁▁▁█",
        "This month by model:",
        "• main:model-a $0.18 · 2 calls",
        "• main:model-b unknown cost · 1 calls",
        "By channel:",
        "• telegram $0.18 + 1 of unknown price · 3 calls",
        "Budget: today $0.18 / $2.00 · month $0.18 / no limit",
    ]
    # The menu offers it; /help lists it with the system commands.
    menu = h.tg.calls_to("setMyCommands")[-1].params["commands"]
    assert {"command": "usage", "description": "Usage and spend [today|week|month]"} in menu
    await h.ask("/help usage")
    assert h.texts()[-1].startswith("/usage — What was spent, in money and tokens")


async def test_status_during_a_turn_shows_its_usage_so_far(bot: Factory) -> None:
    h = await bot(extra=PRICES, clock=ManualClock(NOW))
    h.model.enqueue(
        # 2,000 in at $3 + 500 out at $15 = $0.0135, shown to the cent
        Reply(Text("Checking."), ToolUse("memory_list", {}), usage=(2_000, 500)),
        Reply(Text("still"), stall_after=1),  # the second call hangs: the turn runs
    )
    h.tg.inject_text("what do you know?")
    await h.tg.wait_until(lambda: len(h.model.requests) == 2)

    await h.ask("/status full")
    status = h.texts()[-1].splitlines()
    turn = next(line for line in status if line.startswith("This turn:"))
    assert turn == "This turn: 1 calls · 2.0K in (0% cached) · 500 out · $0.01"
    assert "Budget: today $0.01 / $2.00 · month $0.01 / no limit" in status
    assert status[2] == "State: replying"

    assert await h.ask("/cancel") == "Cancelled"
    await h.settle()
    await h.ask("/status full")
    status = h.texts()[-1].splitlines()
    assert not any(line.startswith("This turn:") for line in status)
    assert not h.kernel.agent.sessions.is_busy(CONV)


def _shown(h: BotHarness, words: str) -> bool:
    """Whether any Bot API call so far carried ``words`` (a draft, a message, an edit)."""
    return any(words in str(call.params.get("text", "")) for call in h.tg.calls)


async def test_a_call_cancelled_after_it_reported_usage_is_priced_and_the_totals_agree(
    bot: Factory,
) -> None:
    h = await bot(extra=PRICES, clock=ManualClock(NOW))
    h.model.enqueue(text_reply("Hello!", usage=(10_000, 2_000)))  # 0.03 + 0.03 = $0.06
    assert await h.converse("hi") == "Hello!"
    # The second answer reports its input in message_start (20,000 in: $0.06), writes a
    # few words slowly (a draft shows them once the chat's send budget allows) and hangs
    # before its end; the owner cancels it.
    words = [f"Part {n} " for n in range(12)]
    slow = Reply(Text("", words), stall_after=14, chunk_delay=0.3, usage=(20_000, 4_000))
    h.model.enqueue(slow)
    h.tg.inject_text("tell me more")
    await h.tg.wait_until(lambda: _shown(h, "Part"))
    await h.ask("/cancel")
    await h.settle()

    await h.ask("/usage")
    lines = h.texts()[-1].splitlines()
    assert lines[1].startswith("Today: $0.12 · 2 calls · 30.0K in")
    assert not any("unknown" in line or "prices]" in line for line in lines)
    assert lines[-1] == "Budget: today $0.12 / $2.00 · month $0.12 / no limit"
    [row] = [
        r
        for r in await h.kernel.agent.meter.ledger.entries(UsageFilter())
        if r.usage.input == 20_000
    ]
    assert row.cost is not None and 0.06 <= row.cost < 0.061


async def test_a_call_cancelled_before_the_model_sent_anything_is_not_billed(
    bot: Factory,
) -> None:
    h = await bot(extra=PRICES, clock=ManualClock(NOW), language="zh")
    h.model.enqueue(text_reply("Hello!", usage=(10_000, 2_000)))  # $0.06
    await h.converse("hi")
    h.model.enqueue(Reply(Text("never sent"), stall_after=0))  # headers, then silence
    h.tg.inject_text("tell me more")
    await h.tg.wait_until(lambda: len(h.model.requests) == 2)
    await h.ask("/cancel")
    await h.settle()

    await h.ask("/usage")
    lines = h.texts()[-1].splitlines()
    assert lines[1].startswith("今日：$0.06（1 次取消未计费） · 2 次调用")
    assert not any("价格未知" in line for line in lines)
    assert lines[-1] == "预算：今日 $0.06 / $2.00 · 本月 $0.06 / 不限"


async def test_the_budget_warning_never_shows_the_limit_beside_a_share_under_it(
    bot: Factory,
) -> None:
    prices = PRICES.replace("daily = 2.0", "daily = 0.1")
    h = await bot(extra=prices, clock=ManualClock(NOW), language="zh")
    # 12,333 in at $3 + 4,000 out at $15 = $0.096999: 97% of $0.10
    h.model.enqueue(text_reply("Hello!", usage=(12_333, 4_000)))
    h.tg.inject_text("hi")
    await h.tg.wait_until(lambda: any(text.startswith("💰") for text in h.texts()))
    [warning] = [text for text in h.texts() if text.startswith("💰")]
    assert warning == "💰 今日已花费 $0.097，达到上限 $0.10 的 97%。"
    await h.settle()
    await h.ask("/usage")
    assert h.texts()[-1].splitlines()[-1] == "预算：今日 $0.097 / $0.10 · 本月 $0.097 / 不限"


async def test_a_cancelled_call_of_a_provider_that_reports_no_early_usage_is_counted(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    """An OpenAI-compatible model may think unseen for a minute before its first word and
    bills it: cancelled then, the call is counted at its worst case, not as unbilled."""
    extra = gpt_provider("gpt", openai_sim.base_url) + GPT_PRICES
    h = await bot(extra=extra, clock=ManualClock(NOW))
    await h.ask("/provider gpt")
    openai_sim.enqueue(text_reply("Hello!", usage=(10_000, 2_000)))  # $0.06
    await h.converse("hi")
    openai_sim.enqueue(Reply(Text("never sent"), stall_after=0))  # thinking, unseen
    h.tg.inject_text("think hard")
    await h.tg.wait_until(lambda: len(openai_sim.requests) == 2)
    await h.ask("/cancel")
    await h.settle()

    entries = await h.kernel.agent.meter.ledger.entries(UsageFilter())
    [cancelled] = [row for row in entries if not row.usage_known]
    assert cancelled.cost is None and cancelled.bound is not None and cancelled.bound > 0
    await h.ask("/usage")
    lines = h.texts()[-1].splitlines()
    assert lines[1].startswith("Today: $") and "(incl. 1 estimated) · 2 calls" in lines[1]
    assert not any("not billed" in line for line in lines)
    spent = 0.06 + cancelled.bound
    assert lines[-1] == f"Budget: today ${spent:.2f} / $2.00 · month ${spent:.2f} / no limit"
