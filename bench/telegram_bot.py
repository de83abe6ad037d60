"""The real Kernel service against the simulators: start-up, memory, Telegram latency.

Every measurement runs ``python -m kernel`` as a child process (``sys.executable -m
kernel``, cwd = a temporary folder holding ``config.toml``), exactly as systemd runs it:
real python-telegram-bot long-polling the in-process Bot API simulator
(``tests.sim.telegram_sim.TelegramSim``) and the real provider SDK talking to an
in-process model simulator in ``fallback="echo"`` mode (every request answered with
``echo: <last user text>``, nothing scripted). Simulators and the benchmark share one
process and one event loop, so their ``time.monotonic()`` stamps compare directly with the
benchmark's own.

1. Start to ready: spawn -> the first ``getUpdates`` reaching the simulator. One untimed
   warm-up start, then ``--starts`` fresh processes (fresh data folder each).
2. RSS (``/proc/<pid>/status`` VmRSS) at ready, after 1 s idle, and after 1, 25 %, 50 %,
   75 % and 100 % of ``--exchanges`` owner messages sent one after another (each waits
   for the final reply to be delivered: a message sent during a turn is dropped by design).
3. Update available -> first sign: ``inject_text`` -> the first thing the owner sees of
   the turn arriving at the simulator (the typing action or a draft; at commits before
   issue 37, the "Working on a reply…" placeholder); and inject -> final reply visible.
4. Kernel's CPU per 100 exchanges: the child's user + system time (``/proc/<pid>/stat``)
   over the exchanges, divided by their number.

    uv run python bench/telegram_bot.py [--exchanges 1000] [--starts 5] [--latency-samples 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pickle
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernel.core.i18n import set_language, t  # noqa: E402
from tests.conftest import kernel_env, spawn_kernel, write_config  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.openai_sim import OpenAISim  # noqa: E402
from tests.sim.script import SimServer  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, BotCall, TelegramSim  # noqa: E402

set_language("en")  # the child runs with language = "en"; these are its texts
PLACEHOLDER = t("tg.placeholder")  # "Working on a reply…" (commits before issue 37)
SIGNS = ("sendChatAction", "sendMessageDraft")  # what shows a turn under way, at no token
# The notice a message sent while a reply is still closing is held under (issue 34).
BUSY = t("tg.busy.held", count=1).split(";")[0].split("，")[0]
MESSAGE = "Benchmark message {n}: what is on my calendar today, in one line?"
SIMS: dict[str, Callable[[], SimServer]] = {
    "claude": lambda: AnthropicSim(fallback="echo"),
    "openai_compat": lambda: OpenAISim(fallback="echo"),
}
READY_TIMEOUT = 60.0
REPLY_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
BUSY_RETRIES = 5
BUSY_BACKOFF = 0.05
LOG_LINES_KEPT = 200

# Child wrapper for --tracemalloc: `python -m kernel`, plus a SIGUSR1 handler. The first
# signal starts tracing (start-up is not traced: it would take minutes and only growth
# matters); every signal writes a snapshot to KERNEL_BENCH_SNAPSHOT (whole, then renamed).
TRACE_WRAPPER = """
import os, runpy, signal, sys, tracemalloc
def dump(signum, frame):
    if not tracemalloc.is_tracing():
        tracemalloc.start(10)
    path = os.environ["KERNEL_BENCH_SNAPSHOT"]
    tracemalloc.take_snapshot().dump(path + ".tmp")
    os.replace(path + ".tmp", path)
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["kernel"]
runpy.run_module("kernel", run_name="__main__", alter_sys=True)
"""


# --------------------------------------------------------------------------------------
# The child process
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Memory:
    rss_mib: float
    hwm_mib: float
    threads: int


@dataclass
class Child:
    """A running ``python -m kernel`` whose output is drained (and stamped) continuously."""

    proc: asyncio.subprocess.Process
    spawned_at: float  # time.monotonic() just before spawning
    lines: list[tuple[float, str]] = field(default_factory=list)  # first stdout lines
    errors: list[str] = field(default_factory=list)  # last stderr lines
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    def start_draining(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            loop.create_task(self._drain(self.proc.stdout, keep_first=True)),
            loop.create_task(self._drain(self.proc.stderr, keep_first=False)),
        ]

    async def _drain(self, stream: asyncio.StreamReader, *, keep_first: bool) -> None:
        # The pipe must never fill up, or the child blocks on a log write.
        while line := await stream.readline():
            text = line.decode(errors="replace").rstrip()
            if keep_first:
                if len(self.lines) < LOG_LINES_KEPT:
                    self.lines.append((time.monotonic(), text))
            else:
                self.errors = [*self.errors[-(LOG_LINES_KEPT - 1) :], text]

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the child has used so far (``/proc/<pid>/stat``)."""
        with open(f"/proc/{self.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory(self) -> Memory:
        fields: dict[str, str] = {}
        with open(f"/proc/{self.pid}/status", encoding="ascii") as status:
            for line in status:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        kib = lambda name: int(fields[name].split()[0])  # noqa: E731
        return Memory(kib("VmRSS") / 1024, kib("VmHWM") / 1024, int(fields["Threads"]))

    def logged_at(self, fragment: str) -> float | None:
        return next((at for at, text in self.lines if fragment in text), None)

    def describe_exit(self) -> str:
        tail = "\n".join(self.errors[-15:]) or "(no stderr)"
        return f"kernel exited with {self.proc.returncode}:\n{tail}"

    async def stop(self) -> float:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT; returns seconds until it exited."""
        started = time.monotonic()
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout=STOP_TIMEOUT)
            except TimeoutError:
                print(f"  (kernel {self.pid} ignored SIGTERM for {STOP_TIMEOUT:.0f} s; killed)")
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        elapsed = time.monotonic() - started
        for reader in self._readers:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(reader, timeout=2)
        return elapsed


@dataclass
class Service:
    child: Child
    tg: TelegramSim
    model: SimServer
    folder: Path
    ready_at: float = 0.0  # monotonic time of the first getUpdates


async def spawn(folder: Path, env: dict[str, str], trace: bool) -> Child:
    spawned_at = time.monotonic()
    if not trace:
        proc = await spawn_kernel(cwd=folder, env=env)
    else:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            TRACE_WRAPPER,
            cwd=folder,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    child = Child(proc, spawned_at)
    child.start_draining()
    return child


@contextlib.asynccontextmanager
async def service(
    provider: str, *, trace: bool = False, poll_timeout: int = 1
) -> AsyncIterator[Service]:
    """Simulators up, ``python -m kernel`` spawned; everything torn down on the way out,
    whatever happened (the child gets SIGTERM, then SIGKILL)."""
    async with contextlib.AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-tg-")))
        tg = await TelegramSim().start()
        stack.push_async_callback(tg.stop)
        model = await SIMS[provider]().start()
        stack.push_async_callback(model.stop)
        path = write_config(folder, model.base_url, provider, language="en")
        path.write_text(
            path.read_text(encoding="utf-8")
            + f'[telegram]\napi_base = "{tg.api_base}"\npoll_timeout = {poll_timeout}\n',
            encoding="utf-8",
        )
        env = kernel_env(
            KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER)
        )
        if trace:
            env["KERNEL_BENCH_SNAPSHOT"] = str(folder / "snapshot.bin")
        child = await spawn(folder, env, trace)
        stack.push_async_callback(child.stop)
        svc = Service(child, tg, model, folder)
        await tg.wait_until(lambda: bool(tg.polls) or not child.alive, timeout=READY_TIMEOUT)
        if not tg.polls:
            raise RuntimeError(child.describe_exit())
        svc.ready_at = tg.polls[0].at
        yield svc


# --------------------------------------------------------------------------------------
# 1. Start to ready
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Start:
    provider: str
    ready_s: float
    kernel_started_s: float | None  # the "kernel started" log line (Kernel.start done)
    get_me_s: float | None  # PTB's initialize() reached the Bot API
    ready: Memory
    idle: Memory
    stop_s: float
    exit_code: int | None


async def one_start(provider: str) -> Start:
    async with service(provider) as svc:
        child, tg = svc.child, svc.tg
        ready = child.memory()
        await asyncio.sleep(1.0)
        idle = child.memory()
        t0 = child.spawned_at
        started = child.logged_at("kernel started")
        get_me = next((c.at for c in tg.calls_to("getMe")), None)
        stop_s = await child.stop()
        return Start(
            provider,
            ready_s=svc.ready_at - t0,
            kernel_started_s=None if started is None else started - t0,
            get_me_s=None if get_me is None else get_me - t0,
            ready=ready,
            idle=idle,
            stop_s=stop_s,
            exit_code=child.proc.returncode,
        )


async def measure_starts(provider: str, count: int) -> list[Start]:
    await one_start(provider)  # warm-up: bytecode caches, page cache
    starts = []
    for n in range(count):
        start = await one_start(provider)
        print(
            f"  {provider} start {n + 1}/{count}: ready {start.ready_s:.3f} s, "
            f"RSS {start.ready.rss_mib:.1f} MiB at ready, {start.idle.rss_mib:.1f} MiB idle, "
            f"exit {start.exit_code} after {start.stop_s:.2f} s"
        )
        starts.append(start)
    return starts


# --------------------------------------------------------------------------------------
# 2 + 3. Exchanges: memory over time, first-sign latency, per-exchange wall time
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Exchange:
    sign_s: float  # inject -> the first sign of the turn (typing, draft, placeholder)
    reply_s: float  # inject -> final reply visible in the chat
    calls: Counter[str]  # Bot API calls the bot made for it, by method (no getUpdates)
    busy_retries: int  # times the message was refused as busy and sent again


def describe_calls(calls: list[BotCall]) -> str:
    shown = [f"{c.method}({str(c.params.get('text', ''))[:40]!r}, {c.status})" for c in calls]
    return ", ".join(shown) or "none"


async def exchange(tg: TelegramSim, n: int) -> Exchange:
    """One owner message and its reply. If the bot answers "busy" (the previous reply's
    delivery had not quite finished), the message was dropped: send it again, counted."""
    marker = MESSAGE.format(n=n)
    made: Counter[str] = Counter()
    for attempt in range(BUSY_RETRIES + 1):
        first = len(tg.calls)
        found: dict[str, BotCall] = {}

        def delivered(first: int = first, found: dict[str, BotCall] = found) -> bool:
            for call in tg.calls[first:]:
                if not call.ok:
                    raise RuntimeError(f"exchange {n}: {call.method} failed: {call.error}")
                result = call.result if isinstance(call.result, dict) else {}
                text = str(result.get("text", ""))
                if call.method in SIGNS or (call.method == "sendMessage" and text == PLACEHOLDER):
                    found.setdefault("sign", call)
                elif call.method in ("sendMessage", "editMessageText") and marker in text:
                    found.setdefault("reply", call)
                elif call.method == "sendMessage" and text.startswith(BUSY):
                    found["busy"] = call
                    return True
                elif call.method == "sendMessage":
                    raise RuntimeError(f"exchange {n}: unexpected bot message {text!r}")
            # No sign when the budget thinned the typing action: the reply alone is it.
            return "reply" in found

        injected_at = time.monotonic()
        tg.inject_text(marker)
        try:
            await tg.wait_until(delivered, timeout=REPLY_TIMEOUT)
        except TimeoutError:
            calls = describe_calls(tg.calls[first:])
            raise RuntimeError(f"exchange {n}: no reply in {REPLY_TIMEOUT} s: {calls}") from None
        visible_at = time.monotonic()
        made.update(call.method for call in tg.calls[first:])
        if "busy" not in found:
            shown = found.get("sign", found["reply"])
            return Exchange(shown.at - injected_at, visible_at - injected_at, made, attempt)
        # Held under the busy notice: dropped with 🗑 (as the owner could), sent again.
        notice = found["busy"].result
        tg.inject_callback("busy:drop", message_id=int(notice["message_id"]))
        await asyncio.sleep(BUSY_BACKOFF)
    raise RuntimeError(f"exchange {n}: still busy after {BUSY_RETRIES} retries")


@dataclass
class Run:
    provider: str
    ready_s: float
    ready: Memory
    idle: Memory
    exchanges: list[Exchange] = field(default_factory=list)
    memory_at: dict[int, Memory] = field(default_factory=dict)
    paced: int = 0
    pace: float = 0.0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0  # the child's CPU over the exchanges
    exit_code: int | None = None
    trace: list[str] = field(default_factory=list)


def checkpoints(total: int) -> list[int]:
    return sorted({1, total // 4, total // 2, 3 * total // 4, total} - {0})


async def snapshot(svc: Service) -> tracemalloc.Snapshot:
    path = svc.folder / "snapshot.bin"
    path.unlink(missing_ok=True)
    svc.child.proc.send_signal(signal.SIGUSR1)
    for _ in range(1200):  # up to 60 s: a snapshot of a big heap takes a while
        if path.exists():
            break
        await asyncio.sleep(0.05)
    else:
        raise RuntimeError("the child wrote no tracemalloc snapshot within 60 s")
    try:
        return tracemalloc.Snapshot.load(str(path))
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        raise RuntimeError(f"cannot read the child's tracemalloc snapshot: {exc}") from None


async def measure_exchanges(
    provider: str, total: int, *, paced: int, pace: float, settle: float, trace: bool
) -> Run:
    """``total`` exchanges; numbers 2 .. paced + 1 wait ``pace`` seconds before the
    message (a person typing), the others follow each other at once (a burst)."""
    async with service(provider, trace=trace) as svc:
        child, tg = svc.child, svc.tg
        run = Run(provider, svc.ready_at - child.spawned_at, child.memory(), child.memory())
        run.paced, run.pace = paced, pace
        await asyncio.sleep(1.0)
        run.idle = child.memory()
        marks = checkpoints(total)
        snapshots: dict[int, tracemalloc.Snapshot] = {}
        if trace:
            await snapshot(svc)  # starts tracing in the child
        began, cpu_began = time.monotonic(), child.cpu_s()
        for n in range(1, total + 1):
            if 2 <= n <= paced + 1:
                await asyncio.sleep(pace)
            elif n > 1 and settle:
                await asyncio.sleep(settle)
            run.exchanges.append(await exchange(tg, n))
            if n in marks:
                run.memory_at[n] = child.memory()
                if trace:
                    snapshots[n] = await snapshot(svc)
                print(
                    f"  {n:>5} exchanges: RSS {run.memory_at[n].rss_mib:.1f} MiB, "
                    f"{time.monotonic() - began:.1f} s"
                )
        run.elapsed_s = time.monotonic() - began
        run.cpu_s = child.cpu_s() - cpu_began
        if trace and len(snapshots) >= 2:
            run.trace = trace_growth(snapshots)
        await child.stop()
        run.exit_code = child.proc.returncode
        return run


def trace_growth(snapshots: dict[int, tracemalloc.Snapshot]) -> list[str]:
    """The allocation sites whose live memory grew most between the first and the last
    checkpoint (by traceback's innermost frame), plus the total."""
    (first, old), (last, new) = min(snapshots.items()), max(snapshots.items())
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    old, new = old.filter_traces(ignore), new.filter_traces(ignore)
    total = sum(s.size for s in new.statistics("filename")) - sum(
        s.size for s in old.statistics("filename")
    )
    lines = [f"traced Python memory, exchange {first} -> {last}: {total / 1024:+.1f} KiB"]
    for stat in new.compare_to(old, "lineno")[:15]:
        frame = stat.traceback[0]
        where = shorten(frame.filename)
        lines.append(
            f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  "
            f"{where}:{frame.lineno}"
        )
    return lines


def shorten(filename: str) -> str:
    for marker in ("site-packages/", "/lib/python3.11/", str(ROOT) + "/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# --------------------------------------------------------------------------------------
# --imports: where start-up time goes
# --------------------------------------------------------------------------------------

PROVIDER_MODULES = {
    "claude": "kernel.providers.claude",
    "openai_compat": "kernel.providers.openai_compat",
}
SERVICE_IMPORTS = "kernel.__main__, kernel.app, kernel.telegram.channel"
RSS_LINE = "print(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')))"


def import_costs(provider: str | None) -> tuple[Counter[str], float]:
    """Self time (ms) of every module imported by the service, summed by top-level
    package (``python -X importtime``), and the RSS (MiB) once everything is imported."""
    modules = SERVICE_IMPORTS + (f", {PROVIDER_MODULES[provider]}" if provider else "")
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {modules}\n{RSS_LINE}"],
        capture_output=True,
        text=True,
        check=True,
    )
    by_package: Counter[str] = Counter()
    for line in result.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        by_package[parts[2].strip().split(".")[0]] += int(parts[0]) / 1000
    return by_package, int(result.stdout.split()[1]) / 1024


def report_imports(providers: list[str], runs: int = 3) -> None:
    print(f"\nImports of the service (python -X importtime, median of {runs} after a warm-up)")
    for provider in [None, *providers]:
        import_costs(provider)  # warm-up
        samples = [import_costs(provider) for _ in range(runs)]
        packages = {name for by_package, _ in samples for name in by_package}
        median = {p: statistics.median(s[0][p] for s in samples) for p in packages}
        total = statistics.median(sum(s[0].values()) for s in samples)
        rss = statistics.median(s[1] for s in samples)
        top = sorted(median.items(), key=lambda item: -item[1])[:8]
        label = f"+ {PROVIDER_MODULES[provider]}" if provider else "kernel + telegram channel"
        print(f"  {label}: {total:.0f} ms, RSS {rss:.1f} MiB after import")
        print("    " + ", ".join(f"{name} {ms:.0f}" for name, ms in top) + " (ms, self time)")


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report_starts(all_starts: dict[str, list[Start]]) -> None:
    print("\nStart to ready (spawn -> first getUpdates at the simulator), fresh process each")
    header = (
        f"{'provider':<14} {'n':>2} {'ready med':>9} {'min':>6} {'max':>6} {'Kernel.start':>12} "
        f"{'getMe':>6} {'RSS ready':>9} {'RSS idle':>8} {'peak':>6} {'thr':>3} {'stop s':>6}"
    )
    print(header)
    print("-" * len(header))
    for provider, starts in all_starts.items():
        ready = sorted(s.ready_s for s in starts)
        med = lambda values: statistics.median(v for v in values if v is not None)  # noqa: E731
        print(
            f"{provider:<14} {len(starts):>2} {statistics.median(ready):>9.3f} {ready[0]:>6.3f} "
            f"{ready[-1]:>6.3f} {med(s.kernel_started_s for s in starts):>12.3f} "
            f"{med(s.get_me_s for s in starts):>6.3f} "
            f"{med(s.ready.rss_mib for s in starts):>9.1f} "
            f"{med(s.idle.rss_mib for s in starts):>8.1f} "
            f"{med(s.idle.hwm_mib for s in starts):>6.1f} {starts[0].idle.threads:>3} "
            f"{med(s.stop_s for s in starts):>6.2f}"
        )
        codes = {s.exit_code for s in starts}
        if codes != {0}:
            print(f"  (exit codes after SIGTERM: {sorted(codes, key=str)})")
    print("(seconds from spawn; RSS/peak in MiB, medians; thr = threads at idle)")


def report_run(run: Run) -> None:
    ex = run.exchanges
    methods: Counter[str] = Counter()
    for e in ex:
        methods.update(e.calls)
    per = ", ".join(f"{name} {count / len(ex):.2f}" for name, count in methods.most_common())
    print(
        f"\n{run.provider}: {len(ex)} exchanges in {run.elapsed_s:.1f} s "
        f"({len(ex) / run.elapsed_s:.1f}/s); exit {run.exit_code} on SIGTERM"
    )
    print(f"Bot API calls per exchange: {sum(methods.values()) / len(ex):.2f} ({per})")
    print(f"Kernel's CPU: {run.cpu_s * 100 / len(ex):.2f} s per 100 exchanges")
    retried = [i + 1 for i, e in enumerate(ex) if e.busy_retries]
    if retried:
        print(
            f"refused as busy and sent again: {len(retried)} exchanges "
            f"({sum(e.busy_retries for e in ex)} retries), e.g. numbers {retried[:10]}"
        )
    print(f"RSS at ready {run.ready.rss_mib:.1f} MiB, after 1 s idle {run.idle.rss_mib:.1f} MiB")
    print(f"{'after':>7} {'RSS MiB':>8} {'peak MiB':>8} {'threads':>7}")
    for n, mem in run.memory_at.items():
        print(f"{n:>7} {mem.rss_mib:>8.1f} {mem.hwm_mib:>8.1f} {mem.threads:>7}")
    first, last = min(run.memory_at), max(run.memory_at)
    if last > first:
        growth = (run.memory_at[last].rss_mib - run.memory_at[first].rss_mib) / (last - first)
        print(f"growth {first}->{last}: {growth * 1000:+.1f} MiB per 1,000 exchanges")
        quarter = sorted(run.memory_at)[1] if len(run.memory_at) > 2 else first
        if last > quarter > first:
            steady = run.memory_at[last].rss_mib - run.memory_at[quarter].rss_mib
            print(
                f"growth {quarter}->{last}: {steady / (last - quarter) * 1000:+.1f} MiB "
                "per 1,000 exchanges"
            )
    paced = ex[1 : run.paced + 1]
    burst = ex[run.paced + 1 :]
    windows = [
        ("exchange 1 (cold)", ex[:1]),
        (f"2-{run.paced + 1}, paced {run.pace:g} s", paced),
        (f"{run.paced + 2}-{len(ex)}, back to back", burst),
        (f"all {len(ex)}", ex),
    ]
    print(
        f"\n{'exchanges':<26} {'inject ->':<12} "
        f"{'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    )
    for title, sample in windows:
        if not sample:
            continue
        for what, values in (
            ("first sign", [e.sign_s for e in sample]),
            ("reply", [e.reply_s for e in sample]),
        ):
            ms = sorted(v * 1000 for v in values)
            print(
                f"{title:<26} {what:<12} {percentile(ms, 50):>8.1f} {percentile(ms, 90):>8.1f} "
                f"{percentile(ms, 99):>8.1f} {ms[-1]:>8.1f}"
            )
    for line in run.trace:
        print(line)


def report_targets(starts: list[Start], run: Run | None) -> None:
    if not starts and run is None:
        return
    print("\nTargets")
    if starts:
        ready = statistics.median(s.ready_s for s in starts)
        rss = statistics.median(s.ready.rss_mib for s in starts)
        print(f"  start to ready <= 1.5 s: {ready:.2f} s median -> {verdict(ready <= 1.5)}")
        print(f"  RSS at ready <= 100 MB: {rss:.1f} MiB median -> {verdict(rss * 1.048576 <= 100)}")
    if run is not None and len(run.memory_at) >= 2:
        first, last = min(run.memory_at), max(run.memory_at)
        growth = (run.memory_at[last].rss_mib - run.memory_at[first].rss_mib) / (last - first)
        per_k = growth * 1000
        print(
            f"  RSS growth <= 10 MB / 1,000 exchanges: {per_k:+.1f} MiB -> "
            f"{verdict(per_k * 1.048576 <= 10)}"
        )
    if run is not None and run.paced:
        sample = sorted(e.sign_s * 1000 for e in run.exchanges[1 : run.paced + 1])
        p50, p99 = percentile(sample, 50), percentile(sample, 99)
        print(
            f"  first sign <= 50 ms (paced window): p50 {p50:.1f} ms, p99 {p99:.1f} ms -> "
            f"{verdict(p99 <= 50)}"
        )


# --------------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> None:
    providers = [p.strip() for p in args.providers.split(",") if p.strip()]
    unknown = set(providers) - set(SIMS)
    if unknown:
        raise SystemExit(f"unknown provider type(s): {', '.join(sorted(unknown))}")
    all_starts: dict[str, list[Start]] = {}
    if args.starts > 0:
        for provider in providers:
            print(f"start-up, provider type {provider} (1 warm-up + {args.starts})")
            all_starts[provider] = await measure_starts(provider, args.starts)
        report_starts(all_starts)
    run = None
    total = max(args.exchanges, args.latency_samples + 1 if args.latency_samples else 0)
    if total > 0:
        mode = " under tracemalloc (RSS inflated)" if args.tracemalloc else ""
        print(f"\n{total} exchanges, provider type {providers[0]}{mode}")
        run = await measure_exchanges(
            providers[0],
            total,
            paced=min(args.latency_samples, total - 1),
            pace=args.pace,
            settle=args.settle or (0.2 if args.tracemalloc else 0.0),  # traced: slower
            trace=args.tracemalloc,
        )
        report_run(run)
    if not args.tracemalloc:
        report_targets(all_starts.get(providers[0], []), run)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=1000, help="owner messages in a row")
    parser.add_argument("--starts", type=int, default=5, help="timed starts per provider")
    parser.add_argument(
        "--latency-samples",
        type=int,
        default=200,
        help="paced exchanges (after the first) in the latency window",
    )
    parser.add_argument(
        "--pace",
        type=float,
        default=0.25,
        help="seconds between the paced exchanges (the latency window)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds between a delivered reply and the next message outside the paced window",
    )
    parser.add_argument(
        "--providers",
        default="claude,openai_compat",
        help="provider types to start (comma list); the first also does the exchanges",
    )
    parser.add_argument(
        "--imports",
        action="store_true",
        help="first break the service's import time down by package",
    )
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="run the child under tracemalloc and print where memory grew",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    print(f"Python {sys.version.split()[0]}, {sys.platform}, {os.cpu_count()} CPUs")
    if args.imports:
        report_imports([p.strip() for p in args.providers.split(",") if p.strip()])
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
