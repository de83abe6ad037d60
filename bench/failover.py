"""What a failover costs the owner: from the primary's last failure to the fallback's
first words (issue 17).

A real ``Kernel`` (real store on a SQLite file in a temporary folder, the built-in tools)
has two providers on in-process simulators over loopback: ``main`` (type ``claude``,
the Anthropic simulator) and ``backup`` (type ``openai_compat``, the OpenAI simulator),
``backup:model-z`` being main's fallback (``general.fallbacks``). The simulators answer
at once (no chunk delay) and retry waits are injected as no-waits, so what is timed is
Kernel's own failover path plus the SDKs and loopback HTTP.

Failover turns: main answers 529 ``overloaded_error`` to each of its 1 + ``max_retries``
(2) attempts; the turn's call then fails over and the backup answers. Each sample is the
time from the ``model_switch`` event (emitted right after the breaker is told of the
final failure, before the fallback's request is built) to the turn's first
``assistant_delta`` (the fallback's first words), both as the turn's consumer receives
them. ``routing.sticky_minutes = 0`` (every turn starts on main again) and a breaker
threshold the run never reaches keep every turn a failover turn.

For comparison, turns with no failover: ``step_started`` → first ``assistant_delta``
on main (Claude) and on backup alone (the owner's ``/provider backup``), i.e. the first
delta latency of one model call. Each turn uses a new conversation (one round of
history). The first failover of the run is reported on its own ("cold"): both clients
are built by then (the fallback's in the background at start) and main has answered
once, but the backup's connection is opened during that failover.

    uv run python bench/failover.py [--turns 50] [--warmup 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernel.agent.agent import UserInput  # noqa: E402
from kernel.app import Kernel  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.core.events import AssistantDelta, Completed, ModelSwitched, StepStarted  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.openai_sim import OpenAISim  # noqa: E402
from tests.sim.script import Error, text_reply  # noqa: E402

REPLY = "Here is the answer you asked for, in a few words."
RETRIES = 2


async def no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


def config_text(main_url: str, backup_url: str) -> str:
    return f"""[general]
default_provider = "main"
language = "en"
data_dir = "data"
fallbacks = ["backup:model-z"]

[gateway]
enabled = false

[providers.main]
type = "claude"
api_base = "{main_url}"
api_key = "sk-main-0123456789"
default_model = "model-a"
max_tokens = 1024
max_retries = {RETRIES}
retry_base_delay = 0.01

[providers.backup]
type = "openai_compat"
api_base = "{backup_url}"
api_key = "sk-backup-0123456789"
default_model = "model-z"
models = ["model-z"]
max_tokens = 1024
max_retries = 0

[routing]
sticky_minutes = 0
breaker_failures = 1000000
"""


@dataclass(slots=True)
class Sample:
    """One turn: ns from ``start`` (the switch, or the step's start) to the first delta,
    the whole turn's ns, and the longest the event loop was blocked during it."""

    to_first_delta: int
    turn: int
    stall: int = 0


class LoopWatch:
    """Wakes every millisecond; ``longest`` is the longest gap past that (ns): how long
    something kept the event loop (every channel) waiting."""

    def __init__(self) -> None:
        self.longest = 0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            before = time.perf_counter_ns()
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter_ns() - before - 1_000_000)

    async def __aenter__(self) -> LoopWatch:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def one_turn(kernel: Kernel, conv: str, *, failover: bool) -> Sample:
    async with LoopWatch() as watch:
        sample = await _one_turn(kernel, conv, failover=failover)
    sample.stall = watch.longest
    return sample


async def _one_turn(kernel: Kernel, conv: str, *, failover: bool) -> Sample:
    began = time.perf_counter_ns()
    turn = kernel.agent.start_turn(conv, UserInput("what is the answer?"))
    start: int | None = None
    first: int | None = None
    final: Any = None
    async for event in turn:
        now = time.perf_counter_ns()
        plain_start = isinstance(event, StepStarted) and not failover and start is None
        if plain_start or isinstance(event, ModelSwitched):
            start = now
        elif isinstance(event, AssistantDelta) and first is None:
            first = now
        final = event
    ended = time.perf_counter_ns()
    if not isinstance(final, Completed) or start is None or first is None:
        raise RuntimeError(f"turn {conv} did not go as scripted: {final!r}")
    return Sample(first - start, ended - began)


async def run(args: argparse.Namespace) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {"first failover": [], "failover": [], "main": [], "backup": []}
    async with AnthropicSim() as main, OpenAISim() as backup:
        with tempfile.TemporaryDirectory(prefix="kernel-bench-") as tmp:
            path = Path(tmp) / "config.toml"
            path.write_text(config_text(main.base_url, backup.base_url), encoding="utf-8")
            config = load_config(path, env={}, require_telegram=False)
            async with Kernel(config, sleep=no_wait) as kernel:
                overloaded = Error(529, "overloaded_error", "Overloaded")
                n = 0

                async def failover_turn() -> Sample:
                    nonlocal n
                    n += 1
                    main.enqueue(*[overloaded] * (RETRIES + 1))
                    backup.enqueue(text_reply(REPLY))
                    return await one_turn(kernel, f"console:f{n}", failover=True)

                async def plain_turn(sim: AnthropicSim | OpenAISim) -> Sample:
                    nonlocal n
                    n += 1
                    sim.enqueue(text_reply(REPLY))
                    return await one_turn(kernel, f"console:p{n}", failover=False)

                # Both clients built (the fallback's in the background at start), main's
                # connection open: the first failover still opens the backup's.
                await kernel.agent.background.wait(60)
                await plain_turn(main)
                out["first failover"].append(await failover_turn())
                for _ in range(args.warmup):
                    await failover_turn()
                    await plain_turn(main)
                for _ in range(args.turns):
                    out["failover"].append(await failover_turn())
                    out["main"].append(await plain_turn(main))
                await kernel.agent.selection.set_provider("backup")
                for _ in range(args.warmup):
                    await plain_turn(backup)
                for _ in range(args.turns):
                    out["backup"].append(await plain_turn(backup))
                decisions = await kernel.agent.decisions.recent(limit=1)
                assert decisions and decisions[0].chosen == "backup:model-z"
    return out


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def print_table(results: dict[str, list[Sample]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.turns} timed turns per row after {args.warmup} warm-up "
        "(ms; 'to first delta' = from the switch, or from step_started, to the first words)"
    )
    header = (
        f"{'case':<16} {'n':>3} {'p50':>7} {'p90':>7} {'max':>7} {'mean':>7}   "
        f"{'turn p50':>8} {'turn p90':>8}   {'stall p50':>9} {'stall max':>9}"
    )
    print(header)
    print("-" * len(header))
    labels = {
        "first failover": "failover, cold",
        "failover": "failover",
        "main": "no failover, main",
        "backup": "no failover, bkp",
    }
    for key, samples in results.items():
        first = sorted(s.to_first_delta / 1e6 for s in samples)
        turn = sorted(s.turn / 1e6 for s in samples)
        stall = sorted(s.stall / 1e6 for s in samples)
        print(
            f"{labels[key]:<16} {len(samples):>3} {percentile(first, 50):>7.2f} "
            f"{percentile(first, 90):>7.2f} {first[-1]:>7.2f} {statistics.fmean(first):>7.2f}   "
            f"{percentile(turn, 50):>8.2f} {percentile(turn, 90):>8.2f}   "
            f"{percentile(stall, 50):>9.2f} {stall[-1]:>9.2f}"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50, help="timed turns per case")
    parser.add_argument("--warmup", type=int, default=5, help="untimed turns first")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    logging.getLogger("kernel").setLevel(logging.ERROR)  # not a line per failover
    print(f"Python {sys.version.split()[0]}, {sys.platform}")
    print_table(asyncio.run(run(args)), args)


if __name__ == "__main__":
    main()
