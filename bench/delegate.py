"""delegate_to_cli in Telegram: from the delegation's start to what the owner sees.

Everything runs in this one process and event loop, so every ``time.monotonic()`` stamp
compares directly: the Bot API simulator (``tests.sim.telegram_sim``), the Anthropic
simulator scripting the model, and a real ``Kernel`` + ``TelegramChannel`` (real
python-telegram-bot long polling, real anthropic SDK, SQLite on disk). The CLI is the
tests' stand-in (``tests/delegate/standins.py``): a Python executable printing Claude
Code's ``stream-json`` events, ``--delay`` seconds apart, in a process group of its own.

Each run: the owner's message → the model asks for ``delegate_to_cli`` → the Delegator
claims the run (its ``started`` stamp, "start" below) → the child is spawned → its JSONL
is parsed into steps → the progress message is edited in Telegram. Per run:

- start → first progress message: the "⏳ Running the task… (claude_code)" message
  arriving at the simulator (a silent message of its own: no placeholder stands while
  drafts show the turn, issue 37; before that, the placeholder's edit);
- start → first step parsed: the Delegator's first progress step (spawn, Python start-up
  of the stand-in, first displayable event, parsing);
- start → first step shown: the first edit carrying "Now: …"; throttled by design to one
  edit per ``telegram.progress_interval`` (default 3 s), so this is ~the interval.

    uv run python bench/delegate.py [--runs 20] [--interval 3.0] [--delay 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernel.app import Kernel  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.delegate.delegator import Delegator  # noqa: E402
from kernel.telegram.channel import TelegramChannel  # noqa: E402
from tests.conftest import write_config  # noqa: E402
from tests.delegate.conftest import cli_section  # noqa: E402
from tests.delegate.standins import make_cli  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.script import text_reply, tool_reply  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim  # noqa: E402

CONV = f"telegram:{OWNER}"
RUN_TIMEOUT = 60.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def first_step_times(delegator: Delegator) -> dict[int, float]:
    """Wrap the Delegator's version bump to stamp when a run's first step arrived."""
    stamps: dict[int, float] = {}
    original = delegator._bump

    def bump() -> None:
        running = delegator.running
        if running is not None and running.steps == 1 and id(running) not in stamps:
            stamps[id(running)] = time.monotonic()
        original()

    delegator._bump = bump  # type: ignore[method-assign]
    return stamps


async def main(runs: int, interval: float, delay: float) -> None:
    os.environ["STANDIN_DELAY"] = str(delay)
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        command = make_cli(base / "bin", "claude_code")
        tg = await TelegramSim().start()
        model = await AnthropicSim().start()
        path = write_config(base, model.base_url, "claude", language="en")
        path.write_text(
            path.read_text() + f'\n[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
            f'api_base = "{tg.api_base}"\npoll_timeout = 1\nprogress_interval = {interval}\n'
            + cli_section("claude_code", command=str(command))
        )
        kernel = Kernel(load_config(path, env={}))
        await kernel.start()
        channel = TelegramChannel(kernel.telegram_services())
        await channel.start()
        steps_at = first_step_times(kernel.delegator)
        to_edit: list[float] = []
        to_step: list[float] = []
        to_shown: list[float] = []
        try:
            for n in range(runs + 1):  # the first run warms up (SDK import, first spawn)
                model.enqueue(
                    tool_reply("delegate_to_cli", {"task": f"benchmark task {n}"}),
                    text_reply(f"Summary {n}."),
                )
                edits_before = len(tg.calls)
                tg.inject_text(f"run task {n}")
                await tg.wait_until(
                    lambda n=n: any(m.text == f"Summary {n}." for m in tg.chat(OWNER)),
                    timeout=RUN_TIMEOUT,
                )
                await tg.wait_until(
                    lambda: not kernel.agent.sessions.is_busy(CONV) and not channel._tasks,
                    timeout=10,
                )
                delegation = kernel.delegator.latest(CONV)
                assert delegation is not None and delegation.outcome == "ok"
                shows = ("sendMessage", "editMessageText")  # the progress message, its edits
                edits = [c for c in tg.calls[edits_before:] if c.method in shows]
                first = next(c.at for c in edits if str(c.params["text"]).startswith("⏳"))
                shown = next(
                    (c.at for c in edits if "Now: " in str(c.params["text"])), float("nan")
                )
                if n == 0:
                    continue
                to_edit.append((first - delegation.started) * 1000)
                to_step.append((steps_at[id(delegation)] - delegation.started) * 1000)
                to_shown.append((shown - delegation.started) * 1000)
        finally:
            await channel.stop()
            await kernel.stop()
            await tg.stop()
            await model.stop()

    print(f"runs={runs} progress_interval={interval}s stand-in delay={delay}s")
    print(f"{'from delegate_to_cli start to':42} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    for label, values in (
        ("first progress message (⏳ + CLI name)", to_edit),
        ("first step parsed (Delegator)", to_step),
        ("first step shown in Telegram", [v for v in to_shown if v == v]),
    ):
        if not values:
            print(f"{label:42} {'—':>9}")
            continue
        print(
            f"{label:42} {statistics.median(values):9.1f} "
            f"{percentile(values, 99):9.1f} {max(values):9.1f}"
        )
    missing = sum(1 for v in to_shown if v != v)
    if missing:
        print(f"({missing} runs ended before a step could be shown)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--interval", type=float, default=3.0, help="telegram.progress_interval")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds between CLI events")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.interval, args.delay))
