"""Exchanges per second in one chat, back to back, under the real rate budget (issue 37).

The real ``TelegramChannel`` (python-telegram-bot long-polling the in-process Bot API
simulator, Kernel's ``RateBudget`` at its real pace: one token a second per chat, a burst
of three) and a real ``Kernel`` whose model is the in-process Anthropic simulator in
``fallback="echo"`` mode (an instant answer). The owner writes the next message as soon
as the previous answer has reached the chat, ``--exchanges`` times after one warm-up
exchange and a pause that fills the chat's bucket again. Measured:

- exchanges per second: answers delivered over the time from the first to the last
  answer, overall and from the fourth on (the burst of three spent: the sustained rate;
  Telegram's limit is about one message a second in a chat);
- the chat's Bot API calls per exchange, by method (while the exchanges ran, and what
  followed until the outbox was empty: the 🔁 tidy-ups);
- the live 🔁 buttons left in the chat once everything was delivered (one is right);
- the answer's latency: the message written → its answer reaching the chat (median).

``--gap 2.5`` writes each message that many seconds after the previous answer instead
(a person's pace, as issue 37's harness): the rate then means little, the calls per
exchange are what to read.

    uv run python bench/back_to_back.py [--exchanges 30] [--runs 3] [--gap 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernel.app import Kernel  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.telegram.budget import REAL_PACE  # noqa: E402
from kernel.telegram.channel import TelegramChannel  # noqa: E402
from tests.conftest import write_config  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, BotCall, TelegramSim  # noqa: E402

TIMEOUT = 60.0  # seconds an answer may take before the run is declared stuck


def live_retries(tg: TelegramSim) -> int:
    """Messages in the owner's chat still showing a 🔁 (retry:… or again:…)."""
    count = 0
    for message in tg.chat(OWNER, from_bot=True):
        markup: Any = message.reply_markup or {}
        if isinstance(markup, str):
            markup = json.loads(markup)
        data = [str(b.get("callback_data")) for r in markup.get("inline_keyboard", []) for b in r]
        count += any(d.startswith(("retry:", "again:")) for d in data)
    return count


def chat_calls(calls: list[BotCall]) -> Counter[str]:
    return Counter(c.method for c in calls if str(c.params.get("chat_id")) == str(OWNER))


async def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"stuck: {what}")
        await asyncio.sleep(0.002)


async def run(exchanges: int, folder: Path, gap: float) -> dict[str, Any]:
    async with TelegramSim() as tg, AnthropicSim(fallback="echo") as model:
        path = write_config(folder, model.base_url, "claude", language="en")
        path.write_text(
            path.read_text() + f'\n[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
            f'api_base = "{tg.api_base}"\npoll_timeout = 1\n'
        )
        kernel = Kernel(load_config(path, env={}))
        await kernel.start()
        channel = TelegramChannel(kernel.telegram_services(), pace=REAL_PACE)
        await channel.start()
        try:
            return await exchange(tg, channel, exchanges, gap)
        finally:
            await channel.stop()
            await kernel.stop()


def answered(tg: TelegramSim, token: str) -> BotCall | None:
    for call in reversed(tg.calls):
        if call.method == "sendMessage" and call.ok and f"echo: {token} " in str(call.params):
            return call
    return None


def drained(channel: TelegramChannel) -> bool:
    return channel.outbox.stats()["undelivered"] == 0


async def exchange(
    tg: TelegramSim, channel: TelegramChannel, exchanges: int, gap: float
) -> dict[str, Any]:
    tg.inject_text("m0 warm up")
    await wait_for(lambda: answered(tg, "m0") is not None and drained(channel), "warm-up")
    await asyncio.sleep(4.0)  # the chat's bucket full again
    since = len(tg.calls)
    times: list[float] = []
    waits: list[float] = []
    for n in range(1, exchanges + 1):
        if gap and n > 1:
            await asyncio.sleep(gap)
        token = f"m{n}"
        written = time.monotonic()
        tg.inject_text(f"{token} what is on my calendar today?")
        await wait_for(lambda t=token: answered(tg, t) is not None, f"answer {token}")
        found = answered(tg, token)
        assert found is not None
        times.append(found.at)
        waits.append(found.at - written)
    during = chat_calls(tg.calls[since:])
    after = len(tg.calls)
    started = time.monotonic()
    await wait_for(lambda: drained(channel), "the outbox draining")
    drain = time.monotonic() - started
    tidy = chat_calls(tg.calls[after:])
    busy = sum(1 for c in tg.calls[since:] if "busy" in str(c.params.get("text", "")).lower())
    overall = (len(times) - 1) / (times[-1] - times[0])
    sustained = (len(times) - 4) / (times[-1] - times[3]) if len(times) > 4 else overall
    return {
        "overall": overall,
        "sustained": sustained,
        "during": during,
        "after": tidy,
        "drain": drain,
        "live": live_retries(tg),
        "busy": busy,
        "latency": statistics.median(waits),
    }


def per(counts: Counter[str], n: int) -> str:
    return ", ".join(f"{method} {count / n:.2f}" for method, count in sorted(counts.items()))


async def main(exchanges: int, runs: int, gap: float) -> None:
    logging.basicConfig(level=logging.ERROR)
    results = []
    for index in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            result = await run(exchanges, Path(folder), gap)
        results.append(result)
        print(
            f"run {index + 1}: {result['overall']:.2f} exchanges/s overall, "
            f"{result['sustained']:.2f} sustained; per exchange while running: "
            f"{per(result['during'], exchanges)}; afterwards ({result['drain']:.1f} s): "
            f"{per(result['after'], exchanges) or 'nothing'}; live 🔁 {result['live']}; "
            f"busy notices {result['busy']}; answer latency median "
            f"{result['latency'] * 1000:.0f} ms"
        )
    for key in ("overall", "sustained"):
        values = [r[key] for r in results]
        print(
            f"{key}: median {statistics.median(values):.2f} exchanges/s "
            f"(min {min(values):.2f}, max {max(values):.2f}) over {runs} runs of {exchanges}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.0, help="seconds between exchanges")
    args = parser.parse_args()
    asyncio.run(main(args.exchanges, args.runs, args.gap))
