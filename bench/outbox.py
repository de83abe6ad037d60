"""What the durable outbox costs per reply.

A 3-chunk reply delivered to the Bot API simulator (``tests.sim.telegram_sim``) by a real
python-telegram-bot ``Bot``, two ways, alternating so load drifts hit both alike:

- direct: three ``send_message`` calls one after another (what the view did before);
- outbox: ``Outbox.put`` of the three items (one SQLite transaction on a real file) and
  ``Ticket.wait`` until the worker has delivered all three (per row: a ``sending`` write
  before the call, a ``sent`` write after, and a read of the chat's queue).

Prints p50 and p90 per reply of each and the p50 difference (the overhead).

    uv run python bench/outbox.py [--replies 200]
"""

from __future__ import annotations

import argparse
import asyncio
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

from kernel.core.clock import SystemClock  # noqa: E402
from kernel.store.db import Store  # noqa: E402
from kernel.store.mailbox import Mailbox  # noqa: E402
from kernel.telegram.outbox import Outbox, plain_items  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim  # noqa: E402

CHUNKS = ["first chunk " * 40, "second chunk " * 40, "third chunk " * 40]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(replies: int) -> None:
    async with TelegramSim() as tg:
        with tempfile.TemporaryDirectory() as folder:
            store = Store(Path(folder) / "kernel.db")
            await store.start()
            bot = Bot(DEFAULT_TOKEN, base_url=f"{tg.api_base}/bot")
            await bot.initialize()
            outbox = Outbox(Mailbox(store), bot, expiry=timedelta(hours=1), clock=SystemClock())
            await outbox.start()
            items = [item for chunk in CHUNKS for item in plain_items(chunk)]
            direct: list[float] = []
            queued: list[float] = []
            try:
                for n in range(replies + 5):  # the first five warm up
                    start = time.perf_counter()
                    for chunk in CHUNKS:
                        await bot.send_message(OWNER, chunk)
                    took_direct = time.perf_counter() - start
                    start = time.perf_counter()
                    await (await outbox.put(OWNER, items)).wait()
                    took_queued = time.perf_counter() - start
                    if n >= 5:
                        direct.append(took_direct)
                        queued.append(took_queued)
            finally:
                await outbox.stop(0)
                await bot.shutdown()
                await store.close()
    ms = 1000.0
    print(f"3-chunk reply, {replies} each way (ms per reply)")
    for name, values in (("direct", direct), ("outbox", queued)):
        print(
            f"  {name:7} p50 {statistics.median(values) * ms:7.1f}"
            f"   p90 {quantile(values, 0.9) * ms:7.1f}"
        )
    overhead = statistics.median(queued) - statistics.median(direct)
    print(f"  overhead p50 {overhead * ms:+.1f} ms per reply")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=200)
    asyncio.run(main(parser.parse_args().replies))
