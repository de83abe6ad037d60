"""The rate budget (kernel.telegram.budget): what it lets through, and what it thins.

A real python-telegram-bot ``ExtBot`` with Kernel's ``RateBudget`` against the in-process
Bot API simulator (one event loop, so the simulator's arrival stamps are the truth):

1. Steady finals: ``--finals`` messages to one private chat, one after another as fast
   as the budget lets them go, then the same spread over 40 chats at once: sends a
   second achieved (Telegram: about 1 a second in a chat, about 30 overall).
2. Calm, then a 429 storm: ``--turns`` simulated turns in ``--chats`` chats at once, each streaming
   drafts every 0.3 s, typing every 4 s, a progress edit every 3 s, then a reply of 3
   chunks; in the storm the simulator answers a random (seeded) call with 429 and
   ``retry_after`` 1-3 s about every ``--storm-every`` seconds. Counted: finals delivered
   (must be all), drafts and progress edits sent and thinned, 429s seen, calls that
   reached a chat before its block ended (must be 0).

    uv run python bench/rate_budget.py [--finals 20] [--turns 4] [--chats 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("PTB_TIMEDELTA", "true")  # as kernel.telegram.channel does

from telegram.error import TelegramError  # noqa: E402
from telegram.ext import ExtBot  # noqa: E402

from kernel.telegram.budget import Bot, RateArgs, RateBudget, Thinned  # noqa: E402
from tests.sim.telegram_sim import OWNER, BotCall, TelegramSim  # noqa: E402

STORM_METHODS = ["sendMessage", "editMessageText", "sendMessageDraft"]


async def make_bot(sim: TelegramSim) -> Bot:
    bot: Bot = ExtBot(sim.token, base_url=f"{sim.api_base}/bot", rate_limiter=RateBudget())
    await bot.initialize()
    return bot


def rate(calls: list[BotCall]) -> float:
    times = sorted(c.at for c in calls)
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0


async def steady(finals: int) -> None:
    async with TelegramSim() as sim:
        bot = await make_bot(sim)
        for n in range(finals):
            await bot.send_message(OWNER, f"final {n}")
        one = [c for c in sim.calls if c.method == "sendMessage"]
        chats = [OWNER + 1 + i for i in range(40)]
        for chat in chats:
            sim.add_chat(chat)
        start = len(sim.calls)
        await asyncio.gather(*(bot.send_message(c, f"m{k}") for c in chats for k in range(3)))
        spread = [c for c in sim.calls[start:] if c.method == "sendMessage"]
        await bot.shutdown()
    print(f"one chat:  {len(one)} finals, {rate(one):.2f} sends/s (burst 3, then 1/s)")
    print(f"40 chats:  {len(spread)} finals, {rate(spread):.1f} sends/s overall (limit 30/s)")


class Turn:
    """One simulated streaming turn in a chat, counting what it sent and what was thinned."""

    def __init__(self, bot: Bot, chat: int, counts: Counter[str]) -> None:
        self.bot, self.chat, self.counts = bot, chat, counts

    async def _low(self, kind: str, call: Awaitable[object]) -> None:
        try:
            await call
            self.counts[f"{kind} sent"] += 1
        except Thinned:
            self.counts[f"{kind} thinned"] += 1
        except TelegramError:  # a 429 on the call itself: the chat is blocked
            self.counts[f"{kind} 429"] += 1

    async def run(self, draft_id: int) -> None:
        sent = await self.bot.send_message(self.chat, "Working on a reply…")
        draft: RateArgs = {"priority": "draft"}
        progress: RateArgs = {"priority": "progress"}
        start = time.monotonic()
        ticks = 0
        while time.monotonic() - start < 4.0:
            if ticks % 13 == 0:
                typing = self.bot.send_chat_action(self.chat, "typing", rate_limit_args=draft)
                await self._low("typing", typing)
            text = f"draft {ticks}"
            await self._low(
                "draft",
                self.bot.send_message_draft(self.chat, draft_id, text, rate_limit_args=draft),
            )
            if ticks % 10 == 0:  # progress_interval = 3 s, as configured by default
                await self._low(
                    "progress",
                    self.bot.edit_message_text(
                        f"step {ticks}",
                        self.chat,
                        sent.message_id,
                        rate_limit_args=progress,
                    ),
                )
            ticks += 1
            await asyncio.sleep(0.3)
        for n in range(3):
            await self.bot.send_message(self.chat, f"reply {draft_id} chunk {n}")
            self.counts["finals delivered"] += 1


def violations(calls: list[BotCall]) -> int:
    """Calls that reached a chat before a 429's retry_after in that chat had passed."""
    bad = 0
    by_chat: dict[str, list[BotCall]] = {}
    for call in calls:
        by_chat.setdefault(str(call.params.get("chat_id")), []).append(call)
    for chat_calls in by_chat.values():
        for i, call in enumerate(chat_calls):
            if call.status == 429 and call.error:
                ends = call.at + int(call.error.rsplit(" ", 1)[1])
                bad += sum(1 for later in chat_calls[i + 1 :] if later.at < ends)
    return bad


async def storm(turns: int, chats: int, every: float, seed: int) -> None:
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    async with TelegramSim() as sim:
        ids = [OWNER + i for i in range(chats)]
        for chat in ids:
            sim.add_chat(chat)
        bot = await make_bot(sim)
        done = asyncio.Event()

        async def weather() -> None:
            while every and not done.is_set():
                await asyncio.sleep(rng.uniform(0.5, 1.5) * every)
                sim.fail(rng.choice(STORM_METHODS), retry_after=rng.randint(1, 3))

        storm_task = asyncio.create_task(weather())
        started = time.monotonic()

        async def chat_turns(chat: int) -> None:
            for n in range(turns):
                await Turn(bot, chat, counts).run(chat * 100 + n)

        await asyncio.gather(*(chat_turns(c) for c in ids))
        elapsed = time.monotonic() - started
        done.set()
        storm_task.cancel()
        limiter = bot.rate_limiter
        assert isinstance(limiter, RateBudget)
        stats = limiter.stats()
        await bot.shutdown()
        calls = list(sim.calls)
    wanted = turns * chats * 3
    title = f"429 storm (one about every {every} s)" if every else "calm (no 429)"
    print(f"{title}: {turns} turns x {chats} chats in {elapsed:.1f} s, seed {seed}")
    print(f"  429s answered: {sum(1 for c in calls if c.status == 429)}")
    print(f"  finals delivered: {counts['finals delivered']} of {wanted}")
    print(f"  finals retried after a 429: {stats['retried']}")
    for kind in ("draft", "typing", "progress"):
        sent, thinned, limited = (counts[f"{kind} {s}"] for s in ("sent", "thinned", "429"))
        print(f"  {kind}: {sent} sent, {thinned} thinned, {limited} answered 429")
    print(f"  calls before a chat's block ended: {violations(calls)}")


def main() -> None:
    logging.getLogger("kernel.telegram.budget").setLevel(logging.ERROR)  # one line per 429
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finals", type=int, default=20)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--chats", type=int, default=3)
    parser.add_argument("--storm-every", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(steady(args.finals))
    asyncio.run(storm(args.turns, args.chats, 0.0, args.seed))
    asyncio.run(storm(args.turns, args.chats, args.storm_every, args.seed))


if __name__ == "__main__":
    main()
