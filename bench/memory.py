"""Long-term memory: search latency at 1K/10K/100K memories, add throughput, and what
jieba costs (RSS, first-search latency) once it loads.

Corpus: mixed Chinese and English "facts", generated deterministically (``--seed``).
Chinese words are drawn from jieba's own dictionary weighted by its word frequencies
(so common words are common); English words from the docstrings of a fixed set of
standard-library modules, weighted by how often they occur there. Each memory is 6–18
words: 55 % Chinese, 35 % English, 10 % Chinese with English words mixed in.

Queries: half are 2–4 words taken from a random stored memory (something to find), half
are fresh generated messages of 5–15 words like an owner's chat line (what recall
sees each turn). Each query is timed through ``Memories.search(query, 5)``: jieba in a
worker thread, then the FTS5 (or LIKE) query on the store's thread, as a tool call or
the per-turn recall does it. Also timed: ``Memories.recall`` (search + the most-recent
fallback) and the bare SQL of the FTS5 query on the db thread.

The database grows 1K → 10K → 100K in one file: rows are inserted without tokens, as
an upgraded pre-FTS5 database would hold them, and then indexed by the real backlog
path (its throughput is reported too). ``memory_add`` throughput is measured through
``Memories.add`` (the tool's path: dedupe lookup, jieba, insert, index) at each size.

RSS and first-search latency are measured in fresh interpreters (``sys.executable``,
with bytecode writing allowed so jieba imports from .pyc after the warm-up, as in a
normal install): RSS before, then the first ``search`` (which imports jieba and loads its
dictionary), then RSS after. Cold = no dictionary cache in data_dir yet (first ever
use); warm = the cache file exists (every later start).

    uv run python bench/memory.py [--sizes 1000,10000,100000] [--queries 400]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from kernel.memory.memories import Memories
from kernel.memory.tokens import fts_query
from kernel.store.db import Store
from kernel.store.migrations import memory_key

ENGLISH_SOURCES = (
    "asyncio",
    "collections",
    "email",
    "http.client",
    "json",
    "logging",
    "pathlib",
    "sqlite3",
    "subprocess",
    "tarfile",
    "textwrap",
    "threading",
    "unittest",
    "urllib.request",
    "zipfile",
)


class Vocabulary:
    """Words with weights; draws follow the weights (cumulative table + bisect)."""

    def __init__(self, weighted: list[tuple[str, int]]) -> None:
        self.words = [w for w, _ in weighted]
        self.cumulative = list(itertools.accumulate(c for _, c in weighted))

    def draw(self, rng: random.Random, n: int) -> list[str]:
        total = self.cumulative[-1]
        return [self.words[bisect.bisect(self.cumulative, rng.random() * total)] for _ in range(n)]


def chinese_vocabulary() -> Vocabulary:
    import jieba  # the dictionary file only; the tokenizer stays unloaded here

    path = Path(jieba.__file__).with_name("dict.txt")
    weighted = []
    for line in path.read_text(encoding="utf-8").splitlines():
        word, freq, *_ = line.split(" ")
        if all("\u4e00" <= c <= "\u9fff" for c in word) and int(freq) >= 50:
            weighted.append((word, int(freq)))
    return Vocabulary(weighted)


def english_vocabulary() -> Vocabulary:
    import importlib
    import inspect

    counts: Counter[str] = Counter()
    for name in ENGLISH_SOURCES:
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module):
            doc = inspect.getdoc(obj) if callable(obj) else None
            if doc:
                counts.update(w.lower() for w in re.findall(r"[A-Za-z]{2,}", doc))
    return Vocabulary(counts.most_common(5000))


class Corpus:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.zh = chinese_vocabulary()
        self.en = english_vocabulary()

    def sentence(self, low: int = 6, high: int = 18) -> str:
        return "".join(self.words(low, high))

    def words(self, low: int = 6, high: int = 18) -> list[str]:
        """A sentence as its words; joined, it is the memory text."""
        n = self.rng.randint(low, high)
        kind = self.rng.random()
        if kind < 0.55:
            return self.zh.draw(self.rng, n)
        if kind < 0.90:
            words = self.en.draw(self.rng, n)
            words[0] = words[0].capitalize()
            return [w + " " for w in words[:-1]] + [words[-1] + "."]
        words = self.zh.draw(self.rng, n)
        for _ in range(self.rng.randint(1, 3)):
            words.insert(self.rng.randrange(len(words) + 1), f" {self.en.draw(self.rng, 1)[0]} ")
        return words

    def query_from(self, words: list[str]) -> str:
        """2–4 consecutive words of a stored memory, as someone would ask about it."""
        k = min(len(words), self.rng.randint(2, 4))
        start = self.rng.randrange(len(words) - k + 1)
        return "".join(words[start : start + k]).strip(" .")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def fmt_ms(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values) * 1000:7.2f}  p90 {percentile(values, 90) * 1000:7.2f}"
        f"  p99 {percentile(values, 99) * 1000:7.2f}  max {max(values) * 1000:7.2f} ms"
    )


async def bulk_insert(store: Store, texts: list[str]) -> None:
    """Rows without tokens, as a database from before the FTS5 migration holds them."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    rows = [(t, None, now, memory_key(t)) for t in texts]

    def op(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO memories (text, category, created_at, key) VALUES (?, ?, ?, ?)", rows
        )
        conn.execute("COMMIT")

    await store._run("bench bulk insert", op)
    store.memory_index_pending = True


async def timed(fn: Callable[[str], Awaitable[object]], items: list[str]) -> list[float]:
    """Seconds per call of ``fn(item)``."""
    samples = []
    for item in items:
        start = time.perf_counter()
        await fn(item)
        samples.append(time.perf_counter() - start)
    return samples


async def measure_sizes(args: argparse.Namespace, corpus: Corpus, folder: Path) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    store = Store(folder / "kernel.db", fts5=not args.like)
    await store.start()
    memories = Memories(store, folder / "cache")
    await memories.tokenizer.load()
    print(f"search mode: {memories.search_mode}")
    print()
    have = 0
    texts: list[list[str]] = []
    for size in sizes:
        fresh = [corpus.words() for _ in range(size - have)]
        texts += fresh
        await bulk_insert(store, ["".join(w) for w in fresh])
        start = time.perf_counter()
        await memories._ready()  # indexes the backlog, as after an upgrade
        took = time.perf_counter() - start
        have = size
        count = await store.count_memories()
        db_mb = (folder / "kernel.db").stat().st_size / 2**20
        wal = folder / "kernel.db-wal"
        db_mb += wal.stat().st_size / 2**20 if wal.exists() else 0.0
        indexed = (
            f"; backlog indexed at {len(fresh) / took:,.0f} rows/s" if store.fts5_available else ""
        )
        print(f"== {count} memories (db + wal {db_mb:.1f} MiB{indexed})")

        rng = random.Random(size)
        sources = [rng.choice(texts) for _ in range(args.queries // 2)]
        found_queries = [corpus.query_from(words) for words in sources]
        chat_queries = [corpus.sentence(5, 15) for _ in range(args.queries - len(found_queries))]
        queries = found_queries + chat_queries
        rng.shuffle(queries)
        for q in queries[: args.warmup]:
            await memories.search(q, 5)

        search = await timed(lambda q: memories.search(q, 5), queries)
        hits = 0
        for query, words in zip(found_queries, sources, strict=True):
            hits += "".join(words) in {m.text for m in await memories.search(query, 5)}
        found_only = await timed(lambda q: memories.search(q, 5), found_queries)
        chat_only = await timed(lambda q: memories.search(q, 5), chat_queries)
        recall = await timed(lambda q: memories.recall(q, 5), queries)
        print(f"  search (all queries)      {fmt_ms(search)}")
        print(f"  search (2–4 stored words) {fmt_ms(found_only)}")
        print(f"  search (chat lines)       {fmt_ms(chat_only)}")
        print(f"  recall k=5                {fmt_ms(recall)}")
        if store.fts5_available:
            matches = [fts_query(memories.tokenizer.query_terms(q)) for q in queries]
            sql = await timed(lambda m: store.search_memories_fts(m, limit=5), matches)
            print(f"  FTS5 SQL only             {fmt_ms(sql)}")
            empty = 0
            for match in matches:
                empty += not await store.search_memories_fts(match, limit=1)
            print(f"  FTS5 found nothing (LIKE fallback ran) for {empty}/{len(matches)} queries")
        print(f"  source memory in the top 5 for stored-word queries: {hits}/{len(sources)}")

        adds = [corpus.sentence() for _ in range(args.adds)]
        start = time.perf_counter()
        for text in adds:
            await memories.add(text)
        took = time.perf_counter() - start
        print(f"  memory_add: {args.adds / took:,.0f}/s ({took / args.adds * 1000:.2f} ms each)")
        await memories.delete([m.id for m in await memories.recent(args.adds)])
        print()
    await store.close()


CHILD = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from pathlib import Path

    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024

    async def main():
        from kernel.memory.memories import Memories
        from kernel.store.db import Store
        folder = Path(sys.argv[1])
        store = Store(folder / "kernel.db")
        await store.start()
        memories = Memories(store, folder / "cache")
        await memories.recent(5)
        before = rss()
        loaded_before = "jieba" in sys.modules
        start = time.perf_counter()
        found = await memories.search(sys.argv[2], 5)
        first = time.perf_counter() - start
        after = rss()
        start = time.perf_counter()
        await memories.search(sys.argv[2], 5)
        second = time.perf_counter() - start
        await store.close()
        print(json.dumps({"before": before, "after": after, "first": first, "second": second,
                          "loaded_before": loaded_before, "hits": len(found)}))

    asyncio.run(main())
    """
)


def run_child(folder: Path, query: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), query],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    if proc.stderr:
        print(f"  (stderr from the child: {proc.stderr.strip()[:200]!r})")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


async def build_indexed(folder: Path, corpus: Corpus, n: int) -> str:
    store = Store(folder / "kernel.db")
    await store.start()
    memories = Memories(store, folder / "seed-cache")
    texts = [corpus.words() for _ in range(n)]
    await bulk_insert(store, ["".join(w) for w in texts])
    await memories._ready()
    await store.close()
    shutil.rmtree(folder / "seed-cache", ignore_errors=True)  # jieba may be loaded already
    return corpus.query_from(texts[n // 2])


def measure_first_use(args: argparse.Namespace, corpus: Corpus, folder: Path) -> None:
    query = asyncio.run(build_indexed(folder, corpus, 1000))
    run_child(folder, query)  # warm-up: .pyc files, page cache
    shutil.rmtree(folder / "cache", ignore_errors=True)
    rows: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    for _ in range(args.runs):
        shutil.rmtree(folder / "cache", ignore_errors=True)
        rows["cold"].append(run_child(folder, query))
        rows["warm"].append(run_child(folder, query))
    print(f"== first search in a fresh process (1,000 memories; median of {args.runs})")
    for kind, runs in rows.items():
        med = {k: statistics.median(float(r[k]) for r in runs) for k in runs[0]}
        loaded = any(r["loaded_before"] for r in runs)
        print(
            f"  {kind:<5} first search {med['first'] * 1000:7.1f} ms, second"
            f" {med['second'] * 1000:5.2f} ms; RSS {med['before']:.1f} → {med['after']:.1f} MiB"
            f" (+{med['after'] - med['before']:.1f}); jieba loaded before: "
            f"{'YES' if loaded else 'no'}"
        )
    cache = folder / "cache" / "jieba.cache"
    print(f"  dictionary cache: {cache.stat().st_size / 2**20:.1f} MiB in data_dir/cache")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=400, help="timed queries per size")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--adds", type=int, default=500, help="memory_add calls per size")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per first-use case")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--like", action="store_true", help="measure the LIKE fallback")
    parser.add_argument("--skip-first-use", action="store_true")
    args = parser.parse_args()

    print(f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}")
    corpus = Corpus(args.seed)
    with tempfile.TemporaryDirectory(prefix="kernel-bench-memory-") as tmp:
        asyncio.run(measure_sizes(args, corpus, Path(tmp) / "sizes"))
        if not args.skip_first_use:
            first = Path(tmp) / "first"
            first.mkdir()
            measure_first_use(args, corpus, first)


if __name__ == "__main__":
    main()
