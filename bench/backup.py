"""``kernel backup`` and ``kernel restore`` at size (issue 40): their time and peak memory
for a large database, and the owner's turn latency while a backup runs.

A fresh folder gets a database of ``--size-mb`` (1024) with ``--messages`` (100,000)
messages in 1,000 sessions and ``--memories`` (10,000) indexed memories, written
directly with SQL on Kernel's schema. Then the real service (``python -m kernel``)
runs on it against the Telegram and Anthropic simulators (an instant echo model), and:

1. idle: ``--exchanges`` owner messages, each ``--pace`` seconds after the previous
   answer: the reply latency (message in -> answer in the chat);
2. the same exchanges go on while ``python -m kernel backup`` runs as its own process:
   the backup's wall time and peak RSS (``wait4``'s ``ru_maxrss``), and the latency of
   the exchanges that overlapped it;
3. Kernel stopped, ``python -m kernel restore`` of that archive: its time and peak RSS.

    uv run python bench/backup.py [--size-mb 1024] [--messages 100000] [--memories 10000]
                                  [--encrypt]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.exchange_cpu import exchange, start_service  # noqa: E402
from kernel.store.migrations import MIGRATIONS, memory_key, migrate  # noqa: E402
from tests.sim.telegram_sim import TelegramSim  # noqa: E402

SESSIONS = 1000


def generate(db: Path, size_mb: int, messages: int, memories: int) -> None:
    """Kernel's schema, then the rows, in one transaction per 5,000."""
    db.parent.mkdir(parents=True, exist_ok=True)
    per = max(64, size_mb * (1 << 20) // max(messages, 1) - 200)  # text bytes per message
    now = "2026-01-01T00:00:00+00:00"
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = OFF")
        migrate(conn, MIGRATIONS)
        conn.execute("BEGIN")
        for s in range(1, SESSIONS + 1):
            conn.execute(
                "INSERT INTO sessions (id, channel, title, created_at, updated_at, external_id)"
                " VALUES (?, 'bench', ?, ?, ?, ?)",
                (s, f"session {s}", now, now, f"bench-{s}"),
            )
        conn.execute("COMMIT")
        for start in range(0, messages, 5000):
            conn.execute("BEGIN")
            for i in range(start, min(start + 5000, messages)):
                text = os.urandom(per // 2).hex()
                content = json.dumps([{"type": "text", "text": text}])
                conn.execute(
                    "INSERT INTO messages (session_id, role, content, starts_round, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (i % SESSIONS + 1, "user" if i % 2 == 0 else "assistant", content, 0, now),
                )
            conn.execute("COMMIT")
        conn.execute("BEGIN")
        for i in range(memories):
            text = f"fact number {i}: the owner likes item {i * 7919 % 100003}"
            cur = conn.execute(
                "INSERT INTO memories (text, category, created_at, key, tokens, scope)"
                " VALUES (?, 'user', ?, ?, ?, 'global')",
                (text, now, memory_key(text), text.replace(":", "")),
            )
            conn.execute(
                "INSERT INTO memories_fts (rowid, tokens) VALUES (?, ?)",
                (cur.lastrowid, text.replace(":", "")),
            )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def timed_child(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``argv``; its wall seconds, peak RSS (MiB) and output (blocking)."""
    began = time.monotonic()
    child = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert child.stdout is not None
    output = child.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{argv[3:]} exited {child.returncode}: {output}")
    return time.monotonic() - began, usage.ru_maxrss / 1024, output.strip()


async def exchanges(tg: TelegramSim, first: int, count: int, pace: float) -> list[float]:
    out = []
    for n in range(first, first + count):
        out.append(await exchange(tg, n))
        await asyncio.sleep(pace)
    return out


async def while_running(
    tg: TelegramSim, first: int, pace: float, job: asyncio.Future[tuple[float, float, str]]
) -> list[float]:
    """Exchanges, one after another, until ``job`` is done."""
    out = []
    n = first
    while not job.done():
        out.append(await exchange(tg, n))
        n += 1
        await asyncio.sleep(pace)
    return out


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def run(args: argparse.Namespace) -> None:
    python = args.python or sys.executable
    async with contextlib.AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-backup-")))
        db = folder / "data" / "kernel.db"
        began = time.monotonic()
        await asyncio.to_thread(generate, db, args.size_mb, args.messages, args.memories)
        size = db.stat().st_size
        made = time.monotonic() - began
        print(f"database: {size / (1 << 20):.0f} MiB, {args.messages} messages, "
              f"{args.memories} memories, made in {made:.0f} s", flush=True)  # fmt: skip
        tg, proc, env = await start_service(stack, folder, python)
        await exchanges(tg, 1, 5, args.pace)  # warm-up
        idle = await exchanges(tg, 10, args.exchanges, args.pace)
        sealed: list[str] = []
        if args.encrypt:
            (folder / "passphrase").write_text("correct horse battery staple\n")
            sealed = ["--passphrase-file", str(folder / "passphrase")]
        backup = [python, "-m", "kernel", "backup", "--out", str(folder / "b.kbackup"), *sealed]
        job = asyncio.ensure_future(asyncio.to_thread(timed_child, backup, folder, env))
        during = await while_running(tg, 1000, args.pace, job)
        seconds, rss, said = await job
        print(f"backup: {seconds:.1f} s, peak RSS {rss:.0f} MiB: {said}")
        print(f"turns idle: p50 {p(idle, 0.5):.0f} ms, p95 {p(idle, 0.95):.0f} ms ({len(idle)})")
        print(f"turns during the backup: p50 {p(during, 0.5):.0f} ms, "
              f"p95 {p(during, 0.95):.0f} ms ({len(during)})")  # fmt: skip
        ratio = statistics.median(during) / statistics.median(idle) - 1
        print(f"  median latency during / idle: {ratio * 100:+.0f} %", flush=True)
        proc.terminate()
        await proc.wait()
        restore = [python, "-m", "kernel", "restore", str(folder / "b.kbackup"), *sealed]
        seconds, rss, said = await asyncio.to_thread(timed_child, restore, folder, env)
        print(f"restore: {seconds:.1f} s, peak RSS {rss:.0f} MiB: {said}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="the database's size")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--exchanges", type=int, default=20, help="idle exchanges measured")
    parser.add_argument("--pace", type=float, default=0.5, help="seconds between exchanges")
    parser.add_argument("--encrypt", action="store_true", help="with a passphrase")
    parser.add_argument("--python", help="the interpreter that runs kernel (default: this one)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
