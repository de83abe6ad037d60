""" "明天早上 9 点提醒我交报告": the model schedules a one-shot job with its cron tool,
and at that time (an injected clock, no waiting) the reminder reaches the owner's
Telegram chat through the real PTB bot and the Bot API simulator."""

from __future__ import annotations

import logging
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.delivery import Target
from kernel.core.errors import ChannelError
from kernel.telegram.channel import TelegramChannel
from tests.clock import ManualClock
from tests.sim.context import context_index, context_of, owner_texts, system_of
from tests.sim.script import text_reply, tool_reply
from tests.telegram.conftest import BotHarness, Factory

TZ = ZoneInfo("Asia/Shanghai")
START = datetime(2025, 6, 1, 10, 30, tzinfo=TZ)  # a Sunday
DUE = datetime(2025, 6, 2, 9, 0, tzinfo=TZ)


async def idle(h: BotHarness, clock: ManualClock) -> None:
    """The scheduler has looked at the clock and gone back to sleep."""
    await h.tg.wait_until(lambda: any(not f.done() for _, f in clock._sleepers))


async def test_one_shot_reminder_set_by_the_model_arrives_at_its_time(bot: Factory) -> None:
    clock = ManualClock(START)
    h = await bot(clock=clock)
    h.model.enqueue(
        tool_reply(
            "cron_create",
            {"name": "交报告提醒", "schedule": "2025-06-02T09:00", "text": "提醒主人交报告"},
        ),
        text_reply("好的，明天早上 9 点提醒你交报告。"),
        text_reply("⏰ 该交报告了！"),
    )
    assert await h.converse("明天早上 9 点提醒我交报告") == "好的，明天早上 9 点提醒你交报告。"
    # The model was told the local time (in the context block of the owner's message, not
    # in the cached system prompt), and its tool call came back with the plan.
    told = context_of(h.model.requests[0])
    assert "2025-06-01T10:30:00+0800" in told and "Asia/Shanghai" in told
    assert "2025-06-01T10:30" not in system_of(h.model.requests[0])
    result = h.model.requests[1].body["messages"][-1]["content"][0]
    assert '"next_run_at": "2025-06-02T09:00+08:00"' in str(result["content"])

    [job] = [j for j in h.kernel.cron.list() if j.row.created_by == "agent"]
    assert (job.spec.name, job.spec.schedule.kind, job.spec.dispatch.channel) == (
        "交报告提醒",
        "once",
        "telegram",
    )
    assert (
        await h.ask("/status full")
        and 'Next scheduled job: "交报告提醒" at 2025-06-02 09:00' in (h.texts()[-1])
    )

    before = len(h.model.requests)
    clock.advance(to=datetime(2025, 6, 2, 8, 59, tzinfo=TZ))
    await idle(h, clock)
    assert len(h.model.requests) == before  # not yet

    clock.advance(to=DUE)
    await h.tg.wait_until(lambda: "⏰ 该交报告了！" in h.texts())
    body = h.model.requests[-1].body
    assert context_index(body) == len(body["messages"]) - 1
    # the job's own prompt, in its own session, told the time it runs at
    assert owner_texts(body["messages"][-1])[-1] == "提醒主人交报告"
    assert "2025-06-02T09:00:00+0800" in context_of(body)
    await h.tg.wait_until(lambda: job.row.last_status == "succeeded")
    assert job.spec.enabled is False and job.row.next_run_at is None  # one-shot: done
    assert job.row.last_result == "⏰ 该交报告了！"
    session = await h.kernel.store.open_session("cron", "", job.id, create=False)
    assert session[0] is not None and session[0].message_count == 2

    clock.advance(to=datetime(2025, 6, 3, 9, 0, tzinfo=TZ))
    await idle(h, clock)
    assert h.texts().count("⏰ 该交报告了！") == 1  # never again


async def test_a_reminder_missed_during_a_restart_waits_for_telegram_to_start(
    bot: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(START)
    h = await bot(clock=clock)
    job = await h.kernel.cron.create(
        {"name": "交报告提醒", "schedule": "2025-06-02T09:00", "text": "提醒主人交报告"}
    )
    await h.channel.stop()
    await h.kernel.stop()  # down over 09:00 …

    # … back at 09:02, within the grace period: the run fires as the Kernel starts,
    # before Telegram runs; its delivery waits for the channel instead of being lost.
    caplog.set_level(logging.INFO, logger="kernel.core.delivery")
    h.model.enqueue(text_reply("⏰ 该交报告了！"))
    clock = ManualClock(datetime(2025, 6, 2, 9, 2, tzinfo=TZ))
    kernel = Kernel(load_config(h.kernel.config.path, env={}), clock=clock)
    await kernel.start()
    channel: TelegramChannel | None = None
    try:
        await h.tg.wait_until(
            lambda: any("waits for the channel" in r.getMessage() for r in caplog.records)
        )
        assert "⏰ 该交报告了！" not in h.texts()
        channel = TelegramChannel(kernel.telegram_services())
        await channel.start()
        await h.tg.wait_until(lambda: "⏰ 该交报告了！" in h.texts())
        restarted = kernel.cron.get(job.id)
        await h.tg.wait_until(lambda: restarted.row.last_status == "succeeded")
        assert restarted.row.run_count == 1 and restarted.spec.enabled is False
    finally:
        if channel is not None:
            await channel.stop()
        await kernel.stop()


async def test_a_delivery_to_telegram_when_it_is_not_coming_fails_at_once(
    bot: Factory,
) -> None:
    h = await bot(clock=ManualClock(START))
    await h.channel.stop()  # stopped: not pending, so no wait for the delivery timeout
    registry = h.kernel.channel_registry
    with pytest.raises(ChannelError) as info:
        await registry.send("telegram", Target(), "x", timeout=30)
    assert info.value.code == "channel_disabled"
