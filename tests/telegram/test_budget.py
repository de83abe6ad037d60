"""The rate budget (kernel.telegram.budget) under a real PTB ExtBot against the Bot API
simulator: what reached the simulator, and when (its own arrival times), is the truth."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from telegram.error import NetworkError, RetryAfter
from telegram.ext import ExtBot

from kernel.core.window import SlidingWindow
from kernel.telegram.budget import Bot, Bucket, RateBudget, Thinned, priority_of
from tests.sim.script import Reply, Text, text_reply
from tests.sim.telegram_sim import OWNER, BotCall, TelegramSim
from tests.telegram.conftest import Factory

GROUP = -100200300
# The budget counts when a call leaves; the simulator stamps its arrival. Latencies differ
# a little (the first call on a fresh connection), so spacing is checked with this slack.
JITTER = 0.1
OTHER = 515151
RETRY_AFTER = {f"Too Many Requests: retry after {n}": n for n in range(1, 10)}
Maker = Callable[..., Awaitable[Bot]]


@pytest.fixture(autouse=True)
def _timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    # What kernel.telegram.channel sets at import: RetryAfter warns without it.
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def tg() -> AsyncIterator[TelegramSim]:
    async with TelegramSim() as sim:
        sim.add_chat(GROUP, "supergroup")
        sim.add_chat(OTHER)
        yield sim


@pytest.fixture
async def make_bot(tg: TelegramSim) -> AsyncIterator[Maker]:
    """An ExtBot with a RateBudget (``limits`` passed on), shut down after the test."""
    bots: list[Bot] = []

    async def make(**limits: Any) -> Bot:
        bot: Bot = ExtBot(
            tg.token, base_url=f"{tg.api_base}/bot", rate_limiter=RateBudget(**limits)
        )
        await bot.initialize()
        bots.append(bot)
        return bot

    yield make
    for bot in bots:
        await bot.shutdown()


def budget(bot: Bot) -> RateBudget:
    limiter = bot.rate_limiter
    assert isinstance(limiter, RateBudget)
    return limiter


def chat_calls(sim: TelegramSim, chat_id: int) -> list[BotCall]:
    return [c for c in sim.calls if str(c.params.get("chat_id")) == str(chat_id)]


def assert_blocks_honoured(calls: list[BotCall]) -> None:
    """After every 429 with retry_after r at time t, no call of that chat before t + r."""
    for i, call in enumerate(calls):
        if call.status == 429:
            ends = call.at + RETRY_AFTER[call.error or ""]
            assert all(later.at >= ends for later in calls[i + 1 :]), (call.method, i)


async def test_a_429_storm_delivers_every_final_in_order_and_waits_out_each_block(
    tg: TelegramSim, make_bot: Maker
) -> None:
    bot = await make_bot(max_retries=3)
    tg.fail("sendMessage", retry_after=1, times=3)  # three in a row: the first final's limit
    texts = [f"final {i}" for i in range(5)]
    sends = [asyncio.create_task(bot.send_message(OWNER, text)) for text in texts]
    await asyncio.gather(*sends)

    assert [m.text for m in tg.chat(OWNER, from_bot=True)] == texts
    calls = chat_calls(tg, OWNER)
    assert [c.status for c in calls] == [429, 429, 429] + [200] * 5
    assert_blocks_honoured(calls)
    stats = budget(bot).stats()
    assert stats["limited"] == 3 and stats["retried"] == 3 and stats["waiting"] == 0


async def test_a_final_past_its_retries_raises_retry_after_and_the_block_still_holds(
    tg: TelegramSim, make_bot: Maker
) -> None:
    bot = await make_bot(max_retries=1)
    tg.fail("sendMessage", retry_after=1, times=3)
    with pytest.raises(RetryAfter):  # never dropped in silence: the outbox reschedules it
        await bot.send_message(OWNER, "first")
    await bot.send_message(OWNER, "second")  # one more 429, then through

    assert [m.text for m in tg.chat(OWNER, from_bot=True)] == ["second"]
    calls = chat_calls(tg, OWNER)
    assert [c.status for c in calls] == [429, 429, 429, 200]
    assert_blocks_honoured(calls)


async def test_drafts_typing_and_progress_are_thinned_while_the_chat_is_blocked(
    tg: TelegramSim, make_bot: Maker
) -> None:
    bot = await make_bot()
    sent = await bot.send_message(OWNER, "placeholder")
    tg.fail("sendMessage", retry_after=2)
    final = asyncio.create_task(bot.send_message(OWNER, "the reply"))
    await tg.wait_for(lambda c: c.status == 429)
    await tg.wait_until(lambda: budget(bot).limited == 1)  # the bot has the answer too
    before = len(tg.calls)

    with pytest.raises(Thinned):
        await bot.send_message_draft(OWNER, 1, "draft", rate_limit_args={"priority": "draft"})
    with pytest.raises(Thinned):
        await bot.send_chat_action(OWNER, "typing", rate_limit_args={"priority": "draft"})
    with pytest.raises(Thinned):
        await bot.edit_message_text(
            "progress",
            chat_id=OWNER,
            message_id=sent.message_id,
            rate_limit_args={"priority": "progress"},
        )
    assert len(tg.calls) == before  # none of them reached the API
    # Another chat is not blocked: its draft and final go at once, before the retry.
    await bot.send_message_draft(OTHER, 2, "elsewhere", rate_limit_args={"priority": "draft"})
    await bot.send_message(OTHER, "other chat")
    assert not final.done()

    await final
    assert [m.text for m in tg.chat(OWNER, from_bot=True)] == ["placeholder", "the reply"]
    assert_blocks_honoured(chat_calls(tg, OWNER))
    assert budget(bot).stats()["thinned"] == {"draft": 2, "progress": 1}


async def test_progress_is_thinned_while_a_final_waits_and_when_it_would_leave_no_room(
    tg: TelegramSim, make_bot: Maker
) -> None:
    bot = await make_bot(chat_rate=0.25, chat_burst=3)
    sent = await bot.send_message(OWNER, "one")  # 2 tokens left

    async def progress(text: str) -> None:
        await bot.edit_message_text(
            text, OWNER, sent.message_id, rate_limit_args={"priority": "progress"}
        )

    await progress("two")
    with pytest.raises(Thinned):  # it would take the one token a final needs
        await progress("three")
    await bot.send_message(OWNER, "final takes the last token")
    waiting = asyncio.create_task(bot.send_message(OWNER, "final that waits"))
    await tg.wait_until(lambda: budget(bot).stats()["waiting"] == 1)  # ~4 s for a token
    with pytest.raises(Thinned):
        await bot.send_message_draft(OWNER, 1, "d", rate_limit_args={"priority": "draft"})
    with pytest.raises(Thinned):
        await progress("four")
    await waiting

    texts = [m.text for m in tg.chat(OWNER, from_bot=True)]
    assert texts == ["two", "final takes the last token", "final that waits"]
    # Four calls took tokens: 3 (the burst) + 0.25 a second needs 4 s from first to last.
    costed = chat_calls(tg, OWNER)
    assert [c.method for c in costed] == ["sendMessage", "editMessageText", *["sendMessage"] * 2]
    assert costed[-1].at - costed[0].at >= 4.0 - JITTER


async def test_room_waits_until_a_token_is_spare_and_finals_go_first(
    tg: TelegramSim, make_bot: Maker
) -> None:
    """Issue 37: what may wait as long as it must but never cost a final its turn (the
    outbox's tidy rows) waits for :meth:`RateBudget.room`, then goes as ``progress``."""
    bot = await make_bot(chat_rate=2.0, chat_burst=3)
    sent = await bot.send_message(OWNER, "one")
    await bot.send_message(OWNER, "two")  # one token left: none to spare
    room = asyncio.create_task(budget(bot).room(OWNER))
    finals = [asyncio.create_task(bot.send_message(OWNER, f"final {n}")) for n in range(3)]
    await room
    await bot.edit_message_text(
        "one, tidied", OWNER, sent.message_id, rate_limit_args={"priority": "progress"}
    )  # admitted: not thinned
    await asyncio.gather(*finals)

    calls = chat_calls(tg, OWNER)
    assert [c.method for c in calls] == [*["sendMessage"] * 5, "editMessageText"]
    assert budget(bot).stats()["thinned"] == {}


async def test_a_group_gets_its_per_minute_window_and_a_private_chat_is_not_held_by_it(
    tg: TelegramSim, make_bot: Maker
) -> None:
    bot = await make_bot(chat_burst=10, group=(3, 1.5))
    await asyncio.gather(*(bot.send_message(GROUP, f"g{i}") for i in range(5)))
    await bot.send_message(OWNER, "private")

    group = [c.at for c in chat_calls(tg, GROUP)]
    assert len(group) == 5
    assert group[3] - group[0] >= 1.5 - JITTER  # 3 in any 1.5 s
    assert group[4] - group[1] >= 1.5 - JITTER
    private = chat_calls(tg, OWNER)[0]
    assert private.at >= group[4]  # sent after (gather), but did not wait itself


async def test_the_overall_window_spans_chats(tg: TelegramSim, make_bot: Maker) -> None:
    bot = await make_bot(overall=(2, 1.0))
    # The third send waits a second after the first two took their tokens, which is
    # after this moment; measured from it, not from the first's arrival at the simulator
    # (which a loaded machine can delay, shortening the gap as seen there).
    started = time.monotonic()
    await asyncio.gather(
        bot.send_message(OWNER, "a"), bot.send_message(OTHER, "b"), bot.send_message(GROUP, "c")
    )
    times = sorted(c.at for c in tg.calls if c.method == "sendMessage")
    assert times[2] - started >= 1.0


async def test_a_429_on_a_chatless_method_blocks_every_chat(
    tg: TelegramSim, make_bot: Maker
) -> None:
    bot = await make_bot()
    tg.fail("setMyCommands", retry_after=1)
    commands = asyncio.create_task(bot.set_my_commands([("help", "Help")]))
    blocked = await tg.wait_for(lambda c: c.status == 429)
    await tg.wait_until(lambda: budget(bot).limited == 1)  # the bot has the answer too
    await bot.send_message(OWNER, "waits for the block")
    await commands

    assert chat_calls(tg, OWNER)[0].at >= blocked.at + 1
    retried = tg.calls_to("setMyCommands")[-1]
    assert retried.ok and retried.at >= blocked.at + 1


async def test_a_cancelled_final_leaves_the_queue(tg: TelegramSim, make_bot: Maker) -> None:
    bot = await make_bot()
    tg.fail("sendMessage", retry_after=1)
    first = asyncio.create_task(bot.send_message(OWNER, "first"))
    await tg.wait_for(lambda c: c.status == 429)
    await tg.wait_until(lambda: budget(bot).limited == 1)  # the bot has the answer too
    second = asyncio.create_task(bot.send_message(OWNER, "second (cancelled)"))
    await asyncio.sleep(0.05)
    assert budget(bot).stats()["waiting"] == 2
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    await first
    await bot.send_message(OWNER, "third")

    assert [m.text for m in tg.chat(OWNER, from_bot=True)] == ["first", "third"]
    assert budget(bot).stats()["waiting"] == 0


def test_an_unknown_priority_is_a_final() -> None:
    assert priority_of({"priority": "draft"}) == "draft"
    assert priority_of({"priority": "urgent"}) == "final"
    assert priority_of(["draft"]) == "final"
    assert priority_of(None) == "final"


async def test_a_flood_ban_longer_than_max_wait_is_left_to_the_caller(
    tg: TelegramSim, make_bot: Maker
) -> None:
    bot = await make_bot(max_wait=0.5)
    tg.fail("sendMessage", retry_after=3)
    with pytest.raises(RetryAfter):  # not waited out in memory: the outbox reschedules it
        await bot.send_message(OWNER, "first")
    with pytest.raises(RetryAfter) as later:  # the block holds: no call at all
        await bot.send_message(OWNER, "second")
    left = later.value.retry_after
    assert isinstance(left, dt.timedelta) and 0 < left.total_seconds() <= 3
    assert len(chat_calls(tg, OWNER)) == 1
    assert budget(bot).stats()["blocked_chats"] == 1


async def test_a_final_that_fails_otherwise_frees_its_turn(
    tg: TelegramSim, make_bot: Maker
) -> None:
    bot = await make_bot()
    tg.drop_connections("sendMessage")
    with pytest.raises(NetworkError):
        await bot.send_message(OWNER, "lost")
    await bot.send_message(OWNER, "next")
    assert [m.text for m in tg.chat(OWNER, from_bot=True)] == ["next"]
    assert budget(bot).stats()["waiting"] == 0


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_a_streaming_turn_in_a_429_storm_still_delivers_its_reply(bot: Factory) -> None:
    """The real channel: drafts, typing, the reply and the tidy-up of the previous 🔁
    share the chat's budget."""
    h = await bot(real_pace=True)  # the blocks are real seconds
    h.model.enqueue(text_reply("calm before"))
    await h.converse("before the storm")
    since = len(h.tg.calls)
    h.tg.fail("sendMessageDraft", retry_after=1, times=2)
    h.tg.fail("editMessageReplyMarkup", retry_after=2, times=2)  # the old 🔁's tidy-up
    h.tg.fail("sendMessage", retry_after=1, times=1)  # the answer's first try
    chunks = [f"part {i} " for i in range(6)]
    h.model.enqueue(Reply(Text("".join(chunks), chunks=chunks), chunk_delay=0.35))

    assert await h.converse("stream in a storm") == "part 0 part 1 part 2 part 3 part 4 part 5"
    assert h.texts() == ["calm before", "part 0 part 1 part 2 part 3 part 4 part 5"]
    calls = chat_calls(h.tg, OWNER)
    assert_blocks_honoured(calls)
    limited = Counter(c.method for c in calls if c.status == 429)
    assert limited["sendMessage"] == 1 and limited["editMessageReplyMarkup"] == 2
    # The tidy-up went in the end: only the newest answer keeps a 🔁.
    assert [m.text for m in h.bot_messages() if m.reply_markup] == [h.texts()[-1]]
    # A draft goes only while the bucket is not empty; its 429 ends drafts for the turn.
    drafts = [c.status for c in h.tg.calls[since:] if c.method == "sendMessageDraft"]
    assert drafts in ([], [429])
    assert isinstance(h.channel.app.bot.rate_limiter, RateBudget)


def test_the_limits_on_a_driven_clock() -> None:
    bucket = Bucket(rate=1.0, burst=3.0, now=0.0)
    for _ in range(3):
        assert bucket.wait(0.0) == 0.0
        bucket.take(0.0)
    assert bucket.wait(0.0) == pytest.approx(1.0)
    assert bucket.wait(0.5) == pytest.approx(0.5)
    assert bucket.level(100.0) == 3.0  # never more than the burst

    window = SlidingWindow(20, 60.0)
    for n in range(20):
        assert window.wait(n * 0.1) == 0.0
        window.take(n * 0.1)
    assert window.wait(2.0) == pytest.approx(58.0)  # the first of the 20 leaves at 60.0
    assert window.level(60.0) == 1.0
    assert not window.idle(60.0) and window.idle(62.0)
