"""A seeded soak: owner messages one after another, with faults drawn at random (kills at
chosen and at random moments, Bot API outages, 429 storms, lost answers), counted by the
ledger. Shared by tests/e2e/test_soak.py (bounded) and bench/soak.py (300 exchanges).

The faults are drawn up front (``plan``: the same seed gives the same steps, whatever
happens while they run), so a soak can run as independent shards (``soak(shard=...)``),
each a slice of the steps on its own Kernel and data folder, in parallel.

Each exchange sends one message ``m<i>`` and waits until the owner has its answer or a
notice naming it (or gives up after ``patience`` seconds: then it stays lost in the
ledger, the soak goes on). A run that loses ``give_up_after`` messages in a row stops early
(the rest would only time out the same way); the figures say so.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.harness import Ledger, Rig, is_draft, is_dropped_send, shows

# fault kind -> weight; "none" is a plain exchange
FAULTS: dict[str, float] = {
    "none": 70,
    "kill_streaming": 3,  # SIGKILL while the reply streams
    "kill_tool": 2,  # SIGKILL while an MCP tool runs
    "kill_at_random": 3,  # SIGKILL 0-3 s after the message, whatever runs then
    "kill_after_send": 2,  # a sendMessage processed, its answer lost, then SIGKILL
    "kill_idle": 2,  # SIGKILL between exchanges
    "lost_answer": 3,  # a sendMessage processed, its answer lost
    "refused": 3,  # the Bot API refuses connections for a few seconds mid-reply
    "bad_gateway": 3,  # every Bot API call answers 502 for a few seconds mid-reply
    "storm_429": 4,  # the next sends and edits answer 429 retry_after 1-2
    "hung_polls": 2,  # getUpdates hangs for a few seconds while the owner writes
}


@dataclass(frozen=True)
class Step:
    """One exchange as drawn: the message ``m<index> <words>`` and its fault."""

    index: int
    kind: str  # a key of FAULTS
    words: str  # keywords for the model simulator (SLOW, NAP, LONG, TOOL)
    storm: tuple[tuple[str, int, int], ...] = ()  # (method, times, retry_after) 429s
    pause: float = 0.0  # the outage's length, or how long after the message a kill comes

    @property
    def token(self) -> str:
        return f"m{self.index}"


def plan(seed: int, exchanges: int, outage: tuple[float, float] = (2.0, 8.0)) -> list[Step]:
    """The seeded steps, drawn in the order the soak has always drawn them."""
    rng = random.Random(seed)
    kinds, weights = list(FAULTS), list(FAULTS.values())
    steps = []
    for index in range(1, exchanges + 1):
        kind = rng.choices(kinds, weights)[0]
        storm: list[tuple[str, int, int]] = []
        if kind == "storm_429":
            for method in ("sendMessage", "editMessageText"):
                times = rng.randint(1, 4)
                storm.append((method, times, rng.randint(1, 2)))
        at_random = rng.choice(["", "SLOW", "NAP", "LONG"])
        plain = rng.choice(["", "", "", "NAP", "LONG"])
        words = {
            "kill_streaming": "SLOW",
            "kill_tool": "TOOL",
            "kill_after_send": "LONG SLOW",
            "lost_answer": "LONG SLOW",
            "refused": "SLOW",
            "bad_gateway": "SLOW",
            "kill_at_random": at_random,
        }.get(kind, plain)
        pause = 0.0
        if kind in ("hung_polls", "refused", "bad_gateway"):
            pause = rng.uniform(*outage)
        elif kind == "kill_at_random":
            pause = rng.uniform(0.0, 3.0)
        steps.append(Step(index, kind, words, tuple(storm), pause))
    return steps


def shard_of(steps: list[Step], shard: tuple[int, int]) -> list[Step]:
    """Shard ``number`` of ``count`` (0-based): a contiguous slice, all shards together
    exactly ``steps``."""
    number, count = shard
    size, extra = divmod(len(steps), count)
    start = number * size + min(number, extra)
    return steps[start : start + size + (number < extra)]


@dataclass
class Figures:
    exchanges: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    resends: int = 0
    unmarked_duplicates: int = 0
    recoveries: list[float] = field(default_factory=list)  # outage end -> reply seen, s
    integrity_failures: int = 0
    stopped_early: bool = False
    ledger: Ledger | None = None

    def report(self) -> str:
        recovery = "-"
        if self.recoveries:
            p50 = statistics.median(self.recoveries)
            recovery = f"p50 {p50:.1f} s, max {max(self.recoveries):.1f} s"
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()) if k != "none")
        early = " (stopped early)" if self.stopped_early else ""
        lines = [
            f"exchanges            {self.exchanges}{early}",
            f"faults injected      {sum(v for k, v in self.faults.items() if k != 'none')}"
            f" ({faults})",
            f"lost                 {len(self.lost)} {self.lost[:10]}",
            f"marked re-sends      {self.resends}",
            f"unmarked duplicates  {self.unmarked_duplicates}",
            f"recovery after outage {recovery} ({len(self.recoveries)} outages)",
            f"integrity failures   {self.integrity_failures}",
        ]
        return "\n".join(lines)


class Soak:
    def __init__(
        self,
        rig: Rig,
        *,
        patience: float = 90.0,
        give_up_after: int = 3,
    ) -> None:
        self.rig = rig
        self.patience = patience
        self.give_up_after = give_up_after
        self.figures = Figures()
        self._in_a_row = 0

    async def run(self, steps: list[Step]) -> Figures:
        await self.rig.start()
        for step in steps:
            self.figures.faults[step.kind] += 1
            self.figures.exchanges += 1
            await self.exchange(step)
            if self._in_a_row >= self.give_up_after:
                self.figures.stopped_early = True
                break
        book = self.rig.ledger()
        self.figures.ledger = book
        self.figures.lost = book.lost
        self.figures.resends = book.resends
        self.figures.unmarked_duplicates = book.unmarked_duplicates
        return self.figures

    async def exchange(self, step: Step) -> None:
        rig, token, kind = self.rig, step.token, step.kind
        if kind == "kill_idle":
            await self.restart()
            kind = "none"
        for method, times, retry_after in step.storm:
            rig.tg.fail(method, status=429, retry_after=retry_after, times=times)
        if kind == "hung_polls":
            rig.tg.hang_every_get_updates()
        since = len(rig.tg.calls)
        rig.send(f"{token} {step.words}".strip())
        outage_ended: float | None = None
        try:
            if kind == "hung_polls":
                await asyncio.sleep(step.pause)
                rig.tg.stop_failing()
                outage_ended = time.monotonic()
            elif kind == "kill_streaming":
                await rig.wait_call(is_draft, since=since)
                await self.restart()
            elif kind == "kill_tool":
                await rig.wait_call(shows("mcp_test__nap"), since=since)
                await self.restart()
            elif kind == "kill_at_random":
                await asyncio.sleep(step.pause)
                await self.restart()
            elif kind in ("kill_after_send", "lost_answer"):
                await rig.wait_call(is_draft, since=since)  # the reply streams
                rig.tg.drop_connections("sendMessage", after_processing=True)
                if kind == "kill_after_send":
                    await rig.wait_call(is_dropped_send, since=since)
                    await self.restart()
            elif kind in ("refused", "bad_gateway"):
                await rig.wait_call(is_draft, since=since)
                if kind == "refused":
                    await rig.tg.go_down()
                else:
                    rig.tg.fail_everything(502)
                await asyncio.sleep(step.pause)
                if kind == "refused":
                    await rig.tg.come_back()
                else:
                    rig.tg.stop_failing()
                outage_ended = time.monotonic()
            await rig.accounted(token, timeout=self.patience)
        except (AssertionError, TimeoutError):
            self._in_a_row += 1
            await self._clear_faults()
            return
        self._in_a_row = 0
        if outage_ended is not None and rig.ledger().entries[token].answered:
            self.figures.recoveries.append(time.monotonic() - outage_ended)
        await self._clear_faults()
        await rig.settle()

    async def _clear_faults(self) -> None:
        """Faults not consumed by this exchange do not leak into the next one."""
        self.rig.tg.clear_faults()
        self.rig.tg.stop_failing()
        if not self.rig.tg.serving:
            await self.rig.tg.come_back()

    async def restart(self) -> None:
        await self.rig.kill()
        if self.rig.integrity() != "ok":
            self.figures.integrity_failures += 1
        await self.rig.start()


async def soak(
    folder: Path,
    *,
    exchanges: int,
    seed: int,
    patience: float = 90.0,
    shard: tuple[int, int] = (0, 1),
) -> Figures:
    """The seeded soak, or shard ``(number, count)`` of it (its slice of the steps)."""
    steps = shard_of(plan(seed, exchanges), shard)
    async with Rig(folder, mcp=True) as rig:  # kill_tool runs an MCP tool
        return await Soak(rig, patience=patience).run(steps)
