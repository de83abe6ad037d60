"""Kernel's CPU per exchange, as issue 37 measured it: the real service, a person's pace.

``python -m kernel`` (this interpreter, or ``--python``) in a fresh folder with the default
configuration and the SOUL.md Kernel ships (``deploy/setup.sh`` installs it; each build
its own under ``--beside``): Telegram against the strict Bot API simulator, one Claude
provider against the Anthropic simulator in echo mode (an instant model), the sidecar on,
``poll_timeout`` at its default (30 s: the bot long-polls as it does in service). After
``--warmup`` exchanges (the SDK's import, caches), ``--exchanges`` more, each
``--pace`` seconds (2.5) after the previous reply arrived. Kernel's CPU is its user +
system time from ``/proc/<pid>/stat`` over those exchanges (idle polling between them
included, as in service). Also: the reply's latency (message in -> the answer in the
chat), and the Bot API calls per exchange by method.

The script needs only the simulators and ``tests.conftest.write_config``, so the same
file measures an older checkout too (copy it there and run it from that root).

``--beside PYTHON`` (another checkout's interpreter: its own ``uv sync``) measures a
change on a machine whose speed drifts: that build's service and this one's run side by
side, exchanges alternating between them (each still ``--pace`` apart), and each block
of ``--block`` exchanges prints both CPU figures and their ratio. Both feel the same
machine at the same moment, so the ratio holds where a figure alone moves by ±15 %
from one run to the next (both read higher than alone: they share two cores).

    uv run python bench/exchange_cpu.py [--exchanges 100] [--pace 2.5] [--runs 1]
    uv run python bench/exchange_cpu.py --beside ../before/.venv/bin/python [--block 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conftest import kernel_env, write_config  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim  # noqa: E402

MESSAGE = "Exchange {n}: what is on my calendar today, in one line?"


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_s(pid: int) -> float:
    """Seconds ``pid``'s threads ran (``schedstat``: nanoseconds, not clock ticks)."""
    ran = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            ran += int((task / "schedstat").read_text().split()[0])
    return ran / 1e9


async def exchange(tg: TelegramSim, n: int) -> float:
    """One owner message; seconds until its answer shows in the chat."""
    marker = MESSAGE.format(n=n)
    asked = time.monotonic()
    tg.inject_text(marker)
    await tg.wait_until(
        lambda: any(marker in str(m.text) for m in tg.chat(OWNER, from_bot=True)), timeout=60
    )
    return time.monotonic() - asked


async def start_service(
    stack: contextlib.AsyncExitStack, folder: Path, python: str, soul: Path = ROOT / "SOUL.md"
) -> tuple[TelegramSim, asyncio.subprocess.Process, dict[str, str]]:
    """The simulators and ``python -m kernel`` in ``folder`` (stopped when ``stack``
    closes), once it polls Telegram; the simulator, the process and its environment.
    ``soul``: the SOUL.md to start with (a deployed Kernel has the one it ships)."""
    with contextlib.suppress(FileNotFoundError):  # a checkout older than SOUL.md
        shutil.copy(soul, folder / "SOUL.md")
    tg = await TelegramSim().start()
    stack.push_async_callback(tg.stop)
    model = await AnthropicSim(fallback="echo").start()
    stack.push_async_callback(model.stop)
    path = write_config(folder, model.base_url, "claude", language="en")
    with path.open("a", encoding="utf-8") as config:
        config.write(f'[telegram]\napi_base = "{tg.api_base}"\n')
    env = kernel_env(KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = await asyncio.create_subprocess_exec(
        python, "-m", "kernel", cwd=folder, env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip

    async def stop() -> None:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()

    stack.push_async_callback(stop)
    await tg.wait_until(lambda: bool(tg.polls) or proc.returncode is not None, timeout=120)
    if proc.returncode is not None:
        raise RuntimeError(f"kernel exited with {proc.returncode}")
    return tg, proc, env


def shipped_soul(python: str) -> Path:
    """The SOUL.md of the checkout whose ``.venv/bin/python`` is ``python``."""
    return Path(python).parent.parent.parent / "SOUL.md"


async def one_run(python: str, args: argparse.Namespace) -> tuple[float, float, Counter[str]]:
    async with contextlib.AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-cpu-")))
        tg, proc, _ = await start_service(stack, folder, python, shipped_soul(python))
        for n in range(1, args.warmup + 1):
            await exchange(tg, n)
            await asyncio.sleep(args.pace)
        first_call, began = len(tg.calls), cpu_s(proc.pid)
        latencies = []
        for n in range(args.warmup + 1, args.warmup + args.exchanges + 1):
            latencies.append(await exchange(tg, n))
            await asyncio.sleep(args.pace)
        used = cpu_s(proc.pid) - began
        calls = Counter(c.method for c in tg.calls[first_call:] if c.method != "getUpdates")
        return used / args.exchanges * 100, statistics.median(latencies), calls


async def side_by_side(args: argparse.Namespace) -> None:
    """``args.beside``'s service (A) and this one's (B), exchanges alternating."""
    python = args.python or sys.executable
    print(
        f"A {args.beside} beside B {python}: {args.exchanges} exchanges each, {args.pace} s apart"
    )
    async with contextlib.AsyncExitStack() as stack:
        services = []
        for interpreter in (args.beside, python):
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-cpu-")))
            tg, proc, _ = await start_service(stack, folder, interpreter, shipped_soul(interpreter))
            services.append((tg, proc.pid))
        n, ratios, totals = 0, [], [0.0, 0.0]
        while n < args.warmup + args.exchanges:
            began = [run_s(pid) for _, pid in services]
            block = args.warmup if n == 0 < args.warmup else args.block
            block = min(block, args.warmup + args.exchanges - n)
            for _ in range(block):
                n += 1
                for tg, _ in services:
                    await exchange(tg, n)
                    await asyncio.sleep(args.pace / 2)
            if n <= args.warmup:
                continue
            a, b = (
                (run_s(pid) - s) / block * 100 for (_, pid), s in zip(services, began, strict=True)
            )
            totals = [totals[0] + a * block, totals[1] + b * block]
            ratios.append(b / a)
            print(
                f"  exchanges {n - block + 1}-{n}: A {a:.2f}, B {b:.2f} s per 100, B/A {b / a:.3f}"
            )
    a, b = (t / args.exchanges for t in totals)
    print(
        f"A {a:.2f}, B {b:.2f} s per 100 exchanges; B/A by block: median "
        f"{statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f})"
    )


async def main_async(args: argparse.Namespace) -> None:
    python = args.python or sys.executable
    print(f"{python}: {args.exchanges} exchanges {args.pace} s apart after {args.warmup}")
    cpus, p50s = [], []
    for run in range(1, args.runs + 1):
        cpu, p50, calls = await one_run(python, args)
        cpus.append(cpu)
        p50s.append(p50)
        per = ", ".join(f"{m} {c / args.exchanges:.2f}" for m, c in sorted(calls.items()))
        print(f"  run {run}: CPU {cpu:.2f} s per 100 exchanges, reply p50 {p50 * 1000:.0f} ms")
        print(f"    Bot API calls per exchange: {per}", flush=True)
    print(
        f"median of {args.runs}: CPU {statistics.median(cpus):.2f} s per 100 exchanges "
        f"({min(cpus):.2f}–{max(cpus):.2f}), reply p50 {statistics.median(p50s) * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exchanges", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--pace", type=float, default=2.5, help="seconds between exchanges")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--python", help="the interpreter that runs kernel (default: this one)")
    parser.add_argument("--beside", help="another build's interpreter, run side by side (A)")
    parser.add_argument("--block", type=int, default=20, help="exchanges per --beside block")
    args = parser.parse_args()
    asyncio.run(side_by_side(args) if args.beside else main_async(args))


if __name__ == "__main__":
    main()
