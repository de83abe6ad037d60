"""Flat memory: the real service's RSS over 1,000 exchanges across chats and sessions.

``python -m kernel`` from the ``--no-dev`` environment (``bench/ready.py``) with the
default configuration (Telegram, one Claude provider against the Anthropic simulator in
echo mode, the sidecar on). The exchanges go round in rounds of ten, one after another:

- 2 in the owner's Telegram chat (through the durable outbox, rate budget and all); every
  ``--new-every`` Telegram exchanges the owner starts a new session with ``/new``; every
  other round one of them first calls ``memory_search`` (a tool round trip);
- 8 over the sidecar (``POST /agent/process``) in ``--chats`` chats taken in turn, one
  of which saves a memory with ``memory_add`` (a new fact each round, so recall searches
  a memory that grows: 100 memories by the end, as an owner's would).

After ``--warmup`` exchanges RSS (``VmRSS`` of the child) is read, then after every
``--every`` exchanges up to ``--exchanges``; the growth from the warm-up's end to the end
is the figure (issue 37: at most +1 MB over 1,000 exchanges). The warm-up is 600 because
bounded caches fill over the first ~600 exchanges: SQLite's page cache (2,000 KiB) and the
ids of the last 256 turns (bench/README.md).

    uv run python bench/memory_soak.py [--exchanges 1000] [--warmup 600] [--chats 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
import tracemalloc
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ready import Rig, no_dev_python  # noqa: E402
from bench.telegram_bot import MESSAGE, TRACE_WRAPPER, Child, exchange, trace_growth  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.script import text_reply, tool_reply  # noqa: E402
from tests.sim.telegram_sim import OWNER, TelegramSim  # noqa: E402

KEY = "bench-soak-key-0123456789abcdef"
FACTS = "The owner's fact number {n}: the {n}th blue notebook is on shelf {shelf}."


async def snapshot(child: Child, path: Path) -> tracemalloc.Snapshot:
    """SIGUSR1 to the child (bench/telegram_bot.py's wrapper): the first starts tracing,
    each one writes a snapshot to ``path``."""
    with contextlib.suppress(FileNotFoundError):
        await asyncio.to_thread(path.unlink)
    child.proc.send_signal(signal.SIGUSR1)
    for _ in range(1200):
        if await asyncio.to_thread(path.exists):
            return await asyncio.to_thread(tracemalloc.Snapshot.load, str(path))
        await asyncio.sleep(0.05)
    raise RuntimeError("the child wrote no tracemalloc snapshot within 60 s")


class Soak:
    def __init__(self, tg: TelegramSim, model: AnthropicSim, http: aiohttp.ClientSession,
                 url: str, chats: int, new_every: int) -> None:  # fmt: skip
        self.tg, self.model, self.http, self.url = tg, model, http, url
        self.chats, self.new_every = chats, new_every
        self.done = 0
        self.telegram = 0
        self.sidecar = 0

    async def telegram_exchange(self, tool: bool) -> None:
        self.telegram += 1
        if self.telegram % self.new_every == 0:
            before = len(self.tg.chat(OWNER, from_bot=True))
            self.tg.inject_text("/new")
            await self.tg.wait_until(lambda: len(self.tg.chat(OWNER, from_bot=True)) > before)
        n = 100_000 + self.telegram
        if tool:  # the reply after the tool's result must still carry the message's marker
            self.model.enqueue(
                tool_reply("memory_search", {"query": "notebook"}),
                text_reply(f"echo: {MESSAGE.format(n=n)}"),
            )
        await exchange(self.tg, n)
        self.done += 1

    async def sidecar_exchange(self, remember: bool) -> None:
        self.sidecar += 1
        n = self.sidecar
        text = f"Sidecar message {n}: which shelf holds notebook {n % 97}?"
        if remember:
            fact = FACTS.format(n=n, shelf=n % 13)
            self.model.enqueue(tool_reply("memory_add", {"text": fact}), text_reply("Noted."))
        body = {
            "input": [{"role": "user", "content": [{"type": "text", "text": text}]}],
            "session_id": f"soak-{n % self.chats}",
        }
        async with self.http.post(
            self.url + "/agent/process", json=body, headers={"X-API-Key": KEY}
        ) as response:
            answer = await response.json()
        if response.status != 200 or not answer.get("reply"):
            raise RuntimeError(f"sidecar exchange {n}: {response.status} {answer}")
        self.done += 1

    async def round(self, number: int) -> None:
        await self.telegram_exchange(tool=number % 2 == 0)
        for k in range(8):
            await self.sidecar_exchange(remember=k == 0)
        await self.telegram_exchange(tool=False)


async def soak(python: Path, args: argparse.Namespace) -> None:
    async with contextlib.AsyncExitStack() as stack:
        port = free_port()
        rig = await Rig.up(stack, {"port": port, "api_key": KEY})
        folder, tg, model, env = rig.folder, rig.tg, rig.model, rig.env
        snapshot_path = folder / "snapshot.bin"
        env["KERNEL_BENCH_SNAPSHOT"] = str(snapshot_path)
        command = ["-c", TRACE_WRAPPER] if args.tracemalloc else ["-m", "kernel"]
        spawned = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            str(python), *command, cwd=folder, env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        child = Child(proc, spawned)
        child.start_draining()
        stack.push_async_callback(child.stop)
        await tg.wait_until(lambda: bool(tg.polls) or not child.alive, timeout=60)
        if not tg.polls:
            raise RuntimeError(child.describe_exit())
        http = await stack.enter_async_context(aiohttp.ClientSession())
        run = Soak(tg, model, http, f"http://127.0.0.1:{port}", args.chats, args.new_every)
        began, number = time.monotonic(), 0
        while run.done < args.warmup:
            await run.round(number)
            number += 1
        snapshots: dict[int, tracemalloc.Snapshot] = {}
        if args.tracemalloc:  # starts tracing now, then a snapshot at each mark
            await snapshot(child, snapshot_path)
            snapshots[0] = await snapshot(child, snapshot_path)
        base = child.memory().rss_mib
        cpu = child.cpu_s()
        print(f"after the warm-up ({run.done} exchanges): RSS {base:.1f} MiB", flush=True)
        marks: list[tuple[int, float]] = []
        start_at = run.done
        while run.done - start_at < args.exchanges:
            await run.round(number)
            number += 1
            if (run.done - start_at) // args.every > len(marks):
                rss = child.memory().rss_mib
                marks.append((run.done - start_at, rss))
                if args.tracemalloc:
                    snapshots[run.done - start_at] = await snapshot(child, snapshot_path)
                took = time.monotonic() - began
                print(
                    f"  +{run.done - start_at:>5} exchanges: RSS {rss:.1f} MiB "
                    f"({rss - base:+.1f}), {took:.0f} s",
                    flush=True,
                )
        end = child.memory().rss_mib
        used = child.cpu_s() - cpu
        if len(snapshots) >= 2:
            print("\n".join(trace_growth(snapshots)))
        total = run.done - start_at
        print(
            f"\n{total} exchanges after a warm-up of {start_at} ({run.telegram} in Telegram, "
            f"{run.sidecar} over the sidecar in {args.chats} chats, {run.sidecar // 8} memories "
            f"saved): RSS {base:.1f} -> {end:.1f} MiB ({end - base:+.2f} MiB); "
            f"Kernel's CPU {used / total * 100:.2f} s per 100 exchanges"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exchanges", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=600, help="SQLite cache, recent turns")
    parser.add_argument("--every", type=int, default=100, help="RSS read every N exchanges")
    parser.add_argument("--chats", type=int, default=8, help="sidecar chats taken in turn")
    parser.add_argument("--new-every", type=int, default=40, help="/new every N Telegram ones")
    parser.add_argument("--venv", type=Path, default=ROOT / ".bench" / "nodev")
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="trace the child's allocations after the warm-up and print where memory grew",
    )
    args = parser.parse_args()
    asyncio.run(soak(no_dev_python(args.venv), args))


if __name__ == "__main__":
    main()
