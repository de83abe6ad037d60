"""The audit trail (issue 23): what recording an event costs, and how long verifying a
chain takes as the record grows.

Each event is appended through ``AuditLog.record`` on a real SQLite file (WAL, the
Store's one writer thread), like the recorders do it: one write transaction that reads
the session's and the global chain's heads, hashes, inserts and moves both heads. Events
are spread over sessions of 50 events each (a busy day's chat), with one message
reference in every tenth (its content hash read in the same transaction).

The chain is sealed with the audit key (HMAC-SHA256, issue 33) as Kernel does it: the
key is made at the first ``AuditLog.start`` (its ``audit.keyed`` row is one more row).

Reported per size: the append latency (p50/p95/p99 in ms, one at a time, awaited), the
appends per second, bytes of database per event, and the time to verify the global chain
and one session's chain (read in one snapshot, then checked in Python).

    uv run python bench/audit.py [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernel.audit import AuditLog  # noqa: E402
from kernel.core.messages import Message, TextBlock  # noqa: E402
from kernel.store.db import Store  # noqa: E402

PER_SESSION = 50


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def grow(store: Store, audit: AuditLog, start: int, stop: int, times: list[float]) -> None:
    session = 0
    for n in range(start, stop):
        if n % PER_SESSION == 0 or session == 0:
            session = (await store.create_session("telegram")).id
        facts: dict[str, object] = {"tool": "memory_search", "ok": True, "ms": 12}
        if n % 10 == 0:
            [mid] = await store.append_messages(session, [Message("user", [TextBlock("hi")])])
            facts = {"messages": [mid], "channel": "telegram", "parts": ["text"]}
        began = time.perf_counter()
        await audit.record("tool.call", session_id=session, actor="model", **facts)
        times.append((time.perf_counter() - began) * 1000)


async def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.db"
        store = Store(path)
        await store.start()
        key_file = Path(tmp) / "audit.key"
        audit = AuditLog(store)
        await audit.start(key_file)
        done = 0
        print(
            f"{'events':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'per s':>7}"
            f" {'B/event':>8} {'verify all s':>12} {'verify 1 ms':>11}"
        )
        try:
            for size in sizes:
                times: list[float] = []
                began = time.perf_counter()
                await grow(store, audit, done, size, times)
                rate = len(times) / (time.perf_counter() - began) if times else 0.0
                done = size
                await store.close()  # checkpoints the WAL: the file's size is the record's
                store = Store(path)
                await store.start()
                audit = AuditLog(store)
                await audit.start(key_file)
                wal = path.with_name(path.name + "-wal")
                total = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
                t0 = time.perf_counter()
                whole = await audit.verify()
                verify_all = time.perf_counter() - t0
                last = (await audit.events(limit=1))[-1].session_id
                t0 = time.perf_counter()
                one = await audit.verify(last)
                verify_one = (time.perf_counter() - t0) * 1000
                assert whole.ok and one.ok and whole.checked == size + 1  # + audit.keyed
                print(
                    f"{size:>8} {statistics.median(times):>7.2f} {_pct(times, 0.95):>7.2f}"
                    f" {_pct(times, 0.99):>7.2f} {rate:>7.0f} {total / size:>8.0f}"
                    f" {verify_all:>12.2f} {verify_one:>11.1f}"
                )
        finally:
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")]))
