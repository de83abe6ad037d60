"""Outbox recovery: how late a queued reply lands after a 6-minute Bot API outage ends.

A real PTB ``Bot`` and the durable ``Outbox`` (real SQLite file) deliver to the Bot API
simulator (``tests.sim.telegram_sim``). The simulator goes away (connections refused),
a reply is queued ``offset`` seconds into the outage (seeded, so its backoff phase
differs per run), and the simulator comes back when the outage is 6 minutes old.

Time is scaled down ``--scale`` times (default 100): the backoff is the shipped
1 s doubling to 5 min divided by the scale, and so are the outage and the offset, so
the retry schedule relative to the outage is the shipped one. Two ways per run:

- ``before``: nothing tells the outbox that Telegram answers again (main at dd7e500):
  the reply waits for the end of its current backoff. Reported scaled back up.
- ``after``: polling's first answered ``getUpdates`` (a ``PollingBot`` whose
  ``recovery_listeners`` has ``Outbox.nudge``) tells it. The poll is made the moment
  the outage ends, so the figure is the outbox's own part (not scaled: no backoff is in
  it); polling's own recovery time is ``bench/poll_recovery.py``'s.

    uv run python bench/outbox_recovery.py [--runs 5] [--scale 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from telegram import Bot  # noqa: E402
from telegram.error import TelegramError  # noqa: E402

from kernel.core.backoff import Backoff  # noqa: E402
from kernel.core.clock import SystemClock  # noqa: E402
from kernel.store.db import Store  # noqa: E402
from kernel.store.mailbox import Mailbox  # noqa: E402
from kernel.telegram.outbox import BACKOFF, Outbox, plain_items  # noqa: E402
from kernel.telegram.polling import PollingBot  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim  # noqa: E402

OUTAGE = 360.0  # seconds, real time


async def one(folder: Path, scale: float, offset: float, nudged: bool) -> float:
    """Seconds from the end of the outage to the reply's delivery (unscaled)."""
    tg = await TelegramSim(port=free_port()).start()
    store = Store(folder / f"kernel-{nudged}-{offset:.0f}.db")
    await store.start()
    bot = Bot(DEFAULT_TOKEN, base_url=f"{tg.api_base}/bot")
    polls = PollingBot(DEFAULT_TOKEN, base_url=f"{tg.api_base}/bot")
    await bot.initialize()
    await polls.initialize()
    outbox = Outbox(
        Mailbox(store),
        bot,
        expiry=timedelta(hours=24),
        clock=SystemClock(),
        backoff=Backoff(first=BACKOFF.first / scale, cap=BACKOFF.cap / scale),
    )
    if nudged:
        polls.recovery_listeners.append(outbox.nudge)
    await outbox.start()
    try:
        await tg.stop()
        began = time.monotonic()
        seen = asyncio.create_task(polls.get_updates(timeout=0))  # polling sees the outage
        await asyncio.sleep(max(0.0, began + offset / scale - time.monotonic()))
        ticket = await outbox.put(OWNER, plain_items("after the outage"))
        await asyncio.sleep(max(0.0, began + OUTAGE / scale - time.monotonic()))
        with contextlib.suppress(TelegramError):
            await seen  # failed (and waited polling's own first backoff, 1 s)
        await tg.start()
        ended = time.monotonic()
        await polls.get_updates(timeout=0)  # the first answered poll
        await ticket.wait()
        return time.monotonic() - ended
    finally:
        await outbox.stop(0)
        await bot.shutdown()
        await polls.shutdown()
        await store.close()
        await tg.stop()


async def main(runs: int, scale: float, seed: int) -> None:
    rng = random.Random(seed)
    before: list[float] = []
    after: list[float] = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for _ in range(runs):
            offset = rng.uniform(0.0, 60.0)
            late, quick = await asyncio.gather(
                one(folder, scale, offset, nudged=False), one(folder, scale, offset, nudged=True)
            )
            before.append(late * scale)
            after.append(quick)
            print(
                f"  reply queued {offset:4.0f} s into the outage: before {late * scale:6.1f} s,"
                f" after {quick * 1000:6.1f} ms"
            )
    print(f"{runs} runs, outage {OUTAGE:.0f} s, time scaled 1/{scale:.0f}")
    print(f"  before: median {statistics.median(before):6.1f} s, max {max(before):6.1f} s")
    print(
        f"  after:  median {statistics.median(after) * 1000:6.1f} ms,"
        f" max {max(after) * 1000:6.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the retries' warnings are the point, not news
    asyncio.run(main(args.runs, args.scale, args.seed))
