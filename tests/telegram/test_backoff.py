"""The Telegram channel's retries on the virtual clock (``kernel/core/backoff.py``): a
failed poll waits 1 s, half again as long after each failure, at most ``BACKOFF_CAP``;
an unreachable Bot API at start is tried again after 1 s, doubling to a minute. (The
outbox's backoff and Retry-After are in ``test_outbox.py``.) Real PTB bots against the
Bot API simulator; nothing waits wall-clock time."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kernel.app import Kernel
from kernel.config import load_config
from kernel.telegram.channel import TelegramChannel
from kernel.telegram.polling import BACKOFF_CAP, BackedOffError, PollingBot
from tests.clock import InstantClock
from tests.conftest import free_port, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim
from tests.telegram.virtual import JumpClock


async def test_failed_polls_wait_half_again_as_long_up_to_the_cap() -> None:
    tg = await TelegramSim(port=free_port()).start()
    clock = InstantClock(datetime.now(UTC))
    bot = PollingBot(DEFAULT_TOKEN, base_url=f"{tg.api_base}/bot", clock=clock)
    await bot.initialize()
    try:
        await tg.stop()  # the port now refuses connections
        for _ in range(8):
            with pytest.raises(BackedOffError):
                await bot.get_updates(timeout=0)
        assert clock.slept == [1.0, 1.5, 2.25, 3.375, 5.0625, 7.59375, BACKOFF_CAP, BACKOFF_CAP]
        assert bot.stats.backoff == BACKOFF_CAP  # what /status shows as the wait
        await tg.start()
        await bot.get_updates(timeout=0)  # answered: the next outage starts from 1 s
        assert bot.stats.backoff == 0.0
        await tg.stop()
        with pytest.raises(BackedOffError):
            await bot.get_updates(timeout=0)
        assert clock.slept[-1] == 1.0
    finally:
        await bot.shutdown()
        await tg.stop()


async def test_an_unreachable_bot_api_at_start_is_tried_again_doubling_to_a_minute(
    tmp_path: Path,
) -> None:
    tg = await TelegramSim(port=free_port()).start()
    model = await AnthropicSim().start()
    path = write_config(tmp_path, model.base_url, "claude", language="en")
    path.write_text(
        path.read_text() + f'\n[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
        f'api_base = "{tg.api_base}"\npoll_timeout = 1\nwatchdog_seconds = 2.0\n'
    )
    kernel = Kernel(load_config(path, env={}))
    await kernel.start()
    clock = JumpClock()
    channel = TelegramChannel(replace(kernel.telegram_services(), clock=clock))
    await tg.stop()  # Kernel starts before the network: the Bot API refuses
    starting = asyncio.create_task(channel.start())
    try:
        jumps = [await clock.jump() for _ in range(9)]
        assert jumps == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
        assert not tg.calls_to("setMyCommands")
        await clock.sleeping()  # the tenth try failed too: the API comes back during its wait
        await tg.start()
        await clock.jump()  # the wait under way ends: the next try gets through
        await starting
        assert tg.calls_to("setMyCommands")  # the menu is set once connected
        await tg.wait_until(lambda: channel.polling_state().state == "running")
    finally:
        starting.cancel()
        await channel.stop()
        await kernel.stop()
        await tg.stop()
        await model.stop()
