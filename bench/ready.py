"""Start-up and memory at ready: the real service, as `uv run --no-dev kernel` runs it.

For each case (sidecar on, sidecar off) the script runs ``python -m kernel`` from a
``--no-dev`` environment (built once with ``uv sync --locked --no-dev --compile-bytecode``
into ``--venv``, the project installed as ``uv run`` installs it) in a fresh temporary
folder with the default configuration: Telegram against the in-process Bot API simulator,
one ``claude`` provider against the in-process Anthropic simulator (echo mode), the sidecar
on a free loopback port (or ``[gateway] enabled = false``).

Per start:
- ``ready``: spawn -> the first ``getUpdates`` reaching the simulator;
- ``sidecar``: spawn -> the first TCP connection the sidecar accepts (tried every 5 ms);
  it must not come after ``ready``;
- ``RSS ready`` / ``RSS settled``: ``VmRSS`` when the first ``getUpdates`` arrived, and 3 s
  after the simulator answered it (the issue's "settled");
- which heavy packages are imported at settled (``anthropic``, ``openai``, ``aiohttp``,
  ``edge_tts``, ``mcp``, ``textual``), and how many modules (the child dumps
  ``sys.modules`` on SIGUSR1 through a two-line wrapper around ``runpy``);
- ``after 1st``: RSS once the first exchange's reply was delivered (the provider's SDK is
  imported on first use, so this is the figure for a Kernel that has answered once), and
  how long that first reply took (it includes importing the SDK).

One untimed warm-up start per case, then ``--starts`` (10) starts; medians with min-max.

    uv run python bench/ready.py [--starts 10] [--venv .bench/nodev]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.telegram_bot import MESSAGE, Child  # noqa: E402
from tests.conftest import free_port, kernel_env, write_config  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim  # noqa: E402

SETTLE_S = 3.0
HEAVY = ("anthropic", "openai", "aiohttp", "edge_tts", "mcp", "textual", "cryptography")
# `python -m kernel`, plus: SIGUSR1 writes the names in sys.modules to KERNEL_BENCH_MODULES.
WRAPPER = """
import os, runpy, signal, sys
def dump(signum, frame):
    path = os.environ["KERNEL_BENCH_MODULES"]
    with open(path + ".part", "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
    os.replace(path + ".part", path)
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["kernel"]
runpy.run_module("kernel", run_name="__main__", alter_sys=True)
"""


# With -X importtime: the report goes to a file, not the pipe the benchmark drains.
IMPORTTIME = """
import os
os.dup2(os.open(os.environ["KERNEL_BENCH_IMPORTTIME"], os.O_WRONLY | os.O_CREAT), 2)
"""


def no_dev_python(venv: Path) -> Path:
    """The interpreter of a ``--no-dev`` environment of this checkout (made or updated)."""
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv.resolve())}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        ["uv", "sync", "--locked", "--no-dev", "--compile-bytecode", "--quiet"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return venv / "bin" / "python"


@dataclass(slots=True)
class Rig:
    """A fresh data folder whose ``config.toml`` is the default configuration against the
    simulators (Telegram, one Claude provider in echo mode), with the SOUL.md Kernel
    ships, and the service's environment; everything is torn down with ``stack``."""

    folder: Path
    tg: TelegramSim
    model: AnthropicSim
    env: dict[str, str]

    @classmethod
    async def up(
        cls,
        stack: contextlib.AsyncExitStack,
        gateway: Mapping[str, object],
        *,
        poll_timeout: int | None = None,
    ) -> Rig:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-bench-")))
        tg = await TelegramSim().start()
        stack.push_async_callback(tg.stop)
        model = await AnthropicSim(fallback="echo").start()
        stack.push_async_callback(model.stop)
        path = write_config(folder, model.base_url, "claude", language="en", gateway=dict(gateway))
        with contextlib.suppress(FileNotFoundError):  # the SOUL.md setup.sh installs
            shutil.copy(ROOT / "SOUL.md", folder / "SOUL.md")
        polling = "" if poll_timeout is None else f"poll_timeout = {poll_timeout}\n"
        with path.open("a", encoding="utf-8") as config:
            config.write(f'[telegram]\napi_base = "{tg.api_base}"\n{polling}')
        env = kernel_env(
            KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER)
        )
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # the bytecode the venv holds is used
        return cls(folder, tg, model, env)


@dataclass(slots=True)
class Start:
    importtime_at_rest: int  # bytes of the -X importtime log written by then (0: none)
    ready_s: float
    sidecar_s: float | None
    rss_ready: float
    rss_settled: float
    rss_answered: float
    first_reply_s: float  # the owner's first message -> its reply in the chat
    modules: int
    heavy: dict[str, bool]
    names: list[str]  # sys.modules at rest


async def first_accept(port: int, since: float, stop: asyncio.Event) -> float | None:
    """Seconds from ``since`` to the first connection the sidecar accepts."""
    while not stop.is_set():
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return time.monotonic() - since
        await asyncio.sleep(0.005)
    return None


async def one_start(python: Path, sidecar: bool, importtime: Path | None = None) -> Start:
    """One start; with ``importtime``, the child runs with ``-X importtime`` into that file
    (and :attr:`Start.importtime_at_rest` says how much of it was written at rest)."""
    async with contextlib.AsyncExitStack() as stack:
        port = free_port()
        gateway = {"port": port} if sidecar else {"enabled": False}
        rig = await Rig.up(stack, gateway, poll_timeout=1)
        folder, tg, env = rig.folder, rig.tg, rig.env
        env["KERNEL_BENCH_MODULES"] = str(folder / "modules.txt")
        wrapper = WRAPPER
        if importtime is not None:
            env["PYTHONPROFILEIMPORTTIME"] = "1"
            env["KERNEL_BENCH_IMPORTTIME"] = str(importtime)
            wrapper = IMPORTTIME + WRAPPER
        spawned = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            str(python),
            "-c",
            wrapper,
            cwd=folder,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        child = Child(proc, spawned)
        child.start_draining()
        stack.push_async_callback(child.stop)
        done = asyncio.Event()
        accept = asyncio.ensure_future(first_accept(port, spawned, done)) if sidecar else None
        await tg.wait_until(lambda: bool(tg.polls) or not child.alive, timeout=60)
        if not tg.polls:
            raise RuntimeError(child.describe_exit())
        ready = child.memory()
        # "Settled": 3 s after the simulator answered that first getUpdates (poll_timeout
        # = 1 s with nothing to deliver), i.e. once the second poll has arrived.
        await tg.wait_until(lambda: len(tg.polls) >= 2, timeout=60)
        await asyncio.sleep(SETTLE_S)
        settled = child.memory()
        os.kill(child.pid, signal.SIGUSR1)
        listing = folder / "modules.txt"
        await tg.wait_until(listing.exists, timeout=30)
        modules = listing.read_text(encoding="utf-8").split()
        at_rest = await asyncio.to_thread(os.path.getsize, importtime) if importtime else 0
        asked = time.monotonic()
        tg.inject_text(MESSAGE.format(n=1))
        await tg.wait_until(
            lambda: any("echo:" in str(m.text) for m in tg.chat(OWNER) if m.from_bot), timeout=60
        )
        first_reply_s = time.monotonic() - asked
        answered = child.memory()
        done.set()
        sidecar_s = await accept if accept is not None else None
        return Start(
            importtime_at_rest=at_rest,
            ready_s=tg.polls[0].at - spawned,
            sidecar_s=sidecar_s,
            rss_ready=ready.rss_mib,
            rss_settled=settled.rss_mib,
            rss_answered=answered.rss_mib,
            first_reply_s=first_reply_s,
            modules=len(modules),
            heavy={name: name in modules for name in HEAVY},
            names=modules,
        )


def spread(values: list[float], unit: str, digits: int = 1) -> str:
    return (
        f"{statistics.median(values):.{digits}f} {unit} "
        f"({min(values):.{digits}f}–{max(values):.{digits}f})"
    )


async def run_case(python: Path, sidecar: bool, starts: int) -> None:
    name = "sidecar on" if sidecar else "sidecar off"
    await one_start(python, sidecar)  # warm-up: page cache
    runs = []
    for n in range(starts):
        run = await one_start(python, sidecar)
        runs.append(run)
        print(
            f"  {name} {n + 1}/{starts}: ready {run.ready_s:.3f} s"
            + (f", sidecar {run.sidecar_s:.3f} s" if run.sidecar_s is not None else "")
            + f", RSS {run.rss_ready:.1f} / settled {run.rss_settled:.1f} / "
            f"after 1st reply {run.rss_answered:.1f} MiB, {run.modules} modules",
            flush=True,
        )
    print(f"\n{name}: median (min–max) of {starts}")
    print(f"  start -> first getUpdates   {spread([r.ready_s for r in runs], 's', 3)}")
    if sidecar:
        accepted = [r.sidecar_s for r in runs if r.sidecar_s is not None]
        late = sum(1 for r in runs if r.sidecar_s is None or r.sidecar_s > r.ready_s)
        print(f"  start -> sidecar accepts    {spread(accepted, 's', 3)}; after polling: {late}")
    print(f"  RSS at first getUpdates     {spread([r.rss_ready for r in runs], 'MiB')}")
    settled = spread([r.rss_settled for r in runs], "MiB")
    print(f"  RSS settled (+{SETTLE_S:.0f} s)        {settled}")
    print(f"  RSS after the first reply   {spread([r.rss_answered for r in runs], 'MiB')}")
    print(f"  first message -> its reply  {spread([r.first_reply_s for r in runs], 's', 3)}")
    print(f"  modules at settled          {statistics.median(r.modules for r in runs):.0f}")
    loaded = [name for name in HEAVY if any(r.heavy[name] for r in runs)]
    print(f"  heavy packages at settled   {', '.join(loaded) or 'none'}\n", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=10, help="timed starts per case")
    parser.add_argument("--venv", type=Path, default=ROOT / ".bench" / "nodev")
    parser.add_argument("--case", choices=("both", "on", "off"), default="both")
    args = parser.parse_args()
    python = no_dev_python(args.venv)
    print(f"python: {python} (uv sync --no-dev)\n", flush=True)
    for sidecar in {"both": (True, False), "on": (True,), "off": (False,)}[args.case]:
        asyncio.run(run_case(python, sidecar, args.starts))


if __name__ == "__main__":
    main()
