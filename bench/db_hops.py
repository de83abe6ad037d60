"""Database hops per Telegram exchange: how often the event loop hands work to the
database thread for one plain text message, and what that thread spends on it.

A real Kernel and the real :class:`TelegramChannel` (python-telegram-bot long-polling
the Bot API simulator ``tests/sim/telegram_sim.py``), the real anthropic SDK against the
model simulator in ``fallback="echo"`` mode, SQLite on disk: the ``bot`` harness of
``tests/telegram/conftest.py``, in this process so that the store can be watched.

Counted per exchange (from the message injected to the reply delivered, the outbox
empty and 0.5 s quiet):

- hops: hand-offs to the database thread (``submit`` on the store's executor), each a
  thread wake-up and a wake-up of the loop when it lands;
- calls: store calls (each ``op``; several ride one hop when queued together), by op
  and by turn phase: *inbound accepted* (the update read, before the turn starts),
  *turn start* (until the model request arrives), *model call done* (until the first
  Bot API call that shows the reply), *reply delivered* (the rest). A hop that carries
  the audit anchor's check is the anchor's own, counted apart: its once-a-second timer
  (kernel/audit/log.py) sends it ~1 s after the turn's first audit row, with what was
  queued to wait for company meanwhile (the old 🔁's "sent" mark and its audit row,
  ``TIDY_LINGER``); at a person's pace every exchange has one;
- db-thread time: wall time of the calls' own work on the database thread (their SQL,
  BEGIN/SAVEPOINT/COMMIT), not the hand-offs;
- process CPU: this whole process's CPU time (Kernel, PTB and the simulators together),
  from the message injected to 0.5 s after the reply: indicative only.

Then what a hop costs: 3,000 one-row writes on a bare Store, each awaited alone (one
hop each) and ten at a time (``asyncio.gather``: one hop and one transaction for ten with
group commit), the process CPU and wall time per write.

    uv run python bench/db_hops.py [--exchanges 30] [--warmup 3] [--timeline]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernel.app import Kernel  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.store import database  # noqa: E402
from kernel.store.database import Database  # noqa: E402
from kernel.store.db import Store  # noqa: E402
from kernel.telegram.channel import TelegramChannel  # noqa: E402
from tests.clock import WarpPace  # noqa: E402
from tests.conftest import write_config  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim  # noqa: E402

PHASES = ("inbound accepted", "turn start", "model call done", "reply delivered")
ANCHOR = "audit anchor check"  # the op of the anchor's timer (kernel/audit/log.py)
REPLY_METHODS = ("sendMessage", "editMessageText")
QUIET = 0.5
MESSAGE = "Benchmark message {n}: what is on my calendar today, in one line?"


@dataclass
class Watch:
    """What the store did, stamped with ``time.monotonic()``."""

    hops: list[float] = field(default_factory=list)
    carried: list[list[str]] = field(default_factory=list)  # the ops each hop took
    busy: list[float] = field(default_factory=list)  # seconds of the calls' work, db thread
    calls: list[tuple[float, str]] = field(default_factory=list)
    turns: list[float] = field(default_factory=list)

    def clear(self) -> None:
        for items in (self.hops, self.carried, self.busy, self.calls, self.turns):
            items.clear()


def watch_store(kernel: Kernel, watch: Watch) -> None:
    """Count every hand-off to the store's executor and every store call by op."""
    executor = kernel.store._executor
    assert executor is not None
    submit = executor.submit

    def counted(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        watch.hops.append(time.monotonic())
        jobs = args[-1] if args and isinstance(args[-1], list) else []
        watch.carried.append([getattr(job, "op", "?") for job in jobs])
        return submit(fn, *args, **kwargs)

    executor.submit = counted  # type: ignore[method-assign]
    time_db_work(watch)
    entry = "_submit" if hasattr(Database, "_submit") else "_run"  # before group commit: _run
    original = getattr(kernel.store, entry)

    def call(op: str, *args: Any, **kwargs: Any) -> Any:
        watch.calls.append((time.monotonic(), op))
        return original(op, *args, **kwargs)

    setattr(kernel.store, entry, call)
    start_turn = kernel.agent.start_turn

    def turn(*args: Any, **kwargs: Any) -> Any:
        watch.turns.append(time.monotonic())
        return start_turn(*args, **kwargs)

    kernel.agent.start_turn = turn  # type: ignore[method-assign]


def time_db_work(watch: Watch) -> None:
    """Time the calls' own work on the db thread (their SQL, BEGIN/SAVEPOINT/COMMIT):
    ``run_hop`` with group commit, ``Database._call`` (one call) before it."""
    owner: object = database
    name = "run_hop"
    if not hasattr(database, name):
        owner, name = Database, "_call"
    original = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            watch.busy.append(time.perf_counter() - began)

    setattr(owner, name, timed)


@dataclass
class Exchange:
    hops: int
    busy_ms: float
    cpu_ms: float  # the whole process (Kernel, PTB, the simulators): indicative only
    ops: Counter[str]
    phases: Counter[str]
    hop_phases: Counter[str]
    carried: list[list[str]]
    left: list[float]  # when each hop left, seconds after the message was injected


async def exchange(
    n: int,
    tg: TelegramSim,
    model: AnthropicSim,
    kernel: Kernel,
    channel: TelegramChannel,
    watch: Watch,
) -> Exchange:
    kernel_busy = kernel.agent.sessions.is_busy
    watch.clear()
    began = time.monotonic()
    cpu = time.process_time()
    text = MESSAGE.format(n=n)
    tg.inject_text(text)

    def replied() -> bool:
        return any(c.at >= began and "echo:" in str(c.params.get("text", "")) for c in tg.calls)

    await tg.wait_until(replied, timeout=60)
    await tg.wait_until(
        lambda: (
            not kernel_busy(f"telegram:{OWNER}")
            and not channel._tasks
            and not channel.outbox.backlog(OWNER)
        ),
        timeout=60,
    )
    await asyncio.sleep(QUIET)
    cpu = time.process_time() - cpu
    asked = next(r.received_at for r in reversed(model.requests) if r.received_at >= began)
    shown = min(
        c.at
        for c in tg.calls
        if c.at >= began and c.method in REPLY_METHODS and "echo:" in str(c.params.get("text"))
    )
    turn = watch.turns[0] if watch.turns else asked
    bounds = (turn, asked, shown)
    phases = Counter(PHASES[sum(at >= b for b in bounds)] for at, _op in watch.calls)
    hop_phases = Counter(
        "the anchor's timer" if ANCHOR in carried else PHASES[sum(at >= b for b in bounds)]
        for at, carried in zip(watch.hops, watch.carried, strict=True)
    )
    return Exchange(
        hops=len(watch.hops),
        busy_ms=sum(watch.busy) * 1000,
        cpu_ms=cpu * 1000,
        ops=Counter(op for _, op in watch.calls),
        phases=phases,
        hop_phases=hop_phases,
        carried=list(watch.carried),
        left=[at - began for at in watch.hops],
    )


async def run(exchanges: int, warmup: int) -> list[Exchange]:
    with tempfile.TemporaryDirectory(prefix="kernel-db-hops-") as tmp:
        folder = Path(tmp)
        tg = await TelegramSim().start()
        model = await AnthropicSim(fallback="echo").start()
        path = write_config(folder, model.base_url, "claude", language="en")
        path.write_text(
            path.read_text() + f'\n[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
            f'api_base = "{tg.api_base}"\npoll_timeout = 1\nwatchdog_seconds = 2.0\n'
        )
        kernel = Kernel(load_config(path, env={}))
        await kernel.start()
        channel = TelegramChannel(kernel.telegram_services(), pace=WarpPace())
        await channel.start()
        watch = Watch()
        watch_store(kernel, watch)
        try:
            results = []
            for n in range(warmup + exchanges):
                result = await exchange(n, tg, model, kernel, channel, watch)
                if n >= warmup:
                    results.append(result)
            return results
        finally:
            await channel.stop()
            await kernel.stop()
            await tg.stop()
            await model.stop()


def spread(what: str, values: list[int] | list[float], fmt: str = "g") -> None:
    low, mid, high = min(values), statistics.median(values), max(values)
    print(f"{what + ':':20s} median {mid:{fmt}} (min {low:{fmt}}, max {high:{fmt}})")


def report(results: list[Exchange], timeline: bool) -> None:
    count = len(results)
    hops = [r.hops for r in results]
    calls = [sum(r.ops.values()) for r in results]
    busy = [r.busy_ms for r in results]
    print(f"exchanges: {count} (plain Telegram text, instant echo model)")
    spread("hops per exchange", hops)
    spread("calls per exchange", calls)
    spread("db-thread ms/exch.", busy, ".2f")
    spread("process CPU ms/exch.", [r.cpu_ms for r in results], ".1f")
    print("by phase (mean per exchange):    calls   hops")
    for phase in PHASES:
        calls_in = sum(r.phases[phase] for r in results) / count
        hops_in = sum(r.hop_phases[phase] for r in results) / count
        print(f"  {phase:30s} {calls_in:5.1f}  {hops_in:5.1f}")
    anchor = sum(r.hop_phases["the anchor's timer"] for r in results) / count
    print(f"  {'the anchor timer (apart)':30s} {'':5s}  {anchor:5.1f}")
    print("calls by op (mean per exchange):")
    ops: Counter[str] = Counter()
    for r in results:
        ops.update(r.ops)
    for op, total in ops.most_common():
        print(f"  {total / count:5.2f}  {op}")
    if timeline:
        print("the last exchange's hops, with the calls each carried:")
        last = results[-1]
        for n, (left, carried) in enumerate(zip(last.left, last.carried, strict=True), 1):
            print(f"  {n:3d}  {left * 1000:7.1f} ms  {' + '.join(carried) or '(one call)'}")


async def hop_cost(writes: int = 3000) -> None:
    """CPU and wall time per one-row write, one a hop and ten gathered."""
    with tempfile.TemporaryDirectory(prefix="kernel-db-hops-") as tmp:
        store = Store(Path(tmp) / "kernel.db")
        await store.start()
        await store._write("table", lambda conn: conn.execute("CREATE TABLE t (v INTEGER)"))

        def insert(conn: Any) -> None:
            conn.execute("INSERT INTO t VALUES (1)")

        print(f"what a hop costs ({writes:,} one-row writes, alternating):")
        for label, together in (("alone", 1), ("ten gathered", 10)) * 2:
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(writes // together):
                await asyncio.gather(*(store._write("w", insert) for _ in range(together)))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(
                f"  {label:13s} {cpu / writes * 1e3:.3f} ms CPU, {wall / writes * 1e3:.3f} ms wall"
            )
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--timeline", action="store_true", help="list the last exchange's hops and their calls"
    )
    args = parser.parse_args()
    report(asyncio.run(run(args.exchanges, args.warmup)), args.timeline)
    asyncio.run(hop_cost())


if __name__ == "__main__":
    main()
