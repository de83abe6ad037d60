"""web_fetch of a 2 MB HTML page on loopback: time, event-loop lateness and memory of
extraction in the worker process and, for comparison, in a thread (issue 18).

The page is ``tests/web/site.py``'s ``/html?size=N`` (default 2,000,000 bytes): the
article page's menus, sidebar, scripts and footer around N bytes of paragraphs, with a
one-row table every tenth block; served by the test site (aiohttp) on 127.0.0.1.

Printed, each over ``--runs`` runs after one warm-up (median and max):

- ``download``: :func:`kernel.web.fetch.download` alone (guarded client, GET, body);
- ``extract``: :func:`kernel.web.extract.readable` on the page's bytes in this thread;
- ``plain``: ``trafilatura.html2txt`` (the fallback when no main content is found);
- ``fetch/worker``: the whole :func:`kernel.web.fetch.fetch`, extraction in the worker
  process (:mod:`kernel.web.worker`, as shipped);
- ``fetch/thread``: the same with every page extracted in ``asyncio.to_thread`` (the
  worker's ``THREAD_LIMIT`` raised past the page: what web_fetch did before);
- ``hop``: :meth:`Extractor.readable` of a page just over ``THREAD_LIMIT``, minus the
  same page's extraction in this thread: the cost of the process hop.

For each of download, fetch/worker and fetch/thread, the event loop's worst lateness
meanwhile (a 1 ms ticker). Then, for pages of 16 KB to 256 KB, the worst lateness while
``readable`` runs in a thread (``--stall-runs`` each): what ``THREAD_LIMIT`` is chosen from.

Memory: the worker's RSS when idle after a first small page, its peak (``VmHWM``) after
the large pages, and this process's peak RSS growth across the worker runs (the page's
bytes and text only: the tree lives in the worker); then the same growth for the first
large extraction in this process (what the thread path costs the parent).

    uv run python bench/web_fetch.py [--size 2000000] [--runs 10] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import trafilatura  # noqa: E402

from kernel.config.web import WebConfig  # noqa: E402
from kernel.web import worker  # noqa: E402
from kernel.web.extract import readable  # noqa: E402
from kernel.web.fetch import download, fetch  # noqa: E402
from tests.web.site import Site, big_html  # noqa: E402

STALL_SIZES = (16_000, 32_000, 64_000, 128_000, 256_000)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _summary(samples: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(samples) * 1000, "max_ms": max(samples) * 1000}


class Lateness:
    """The event loop's worst lateness while in use: a 1 ms ticker."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Lateness:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0.005)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._task is not None
        await self._task

    async def _tick(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            self.worst = max(self.worst, time.perf_counter() - start - 0.001)


async def _timed(runs: int, step: Callable[[], Awaitable[Any]]) -> tuple[list[float], float]:
    """``runs`` timings of ``step`` after a warm-up, and the loop's worst lateness."""
    await step()
    samples = []
    async with Lateness() as late:
        for _ in range(runs):
            start = time.perf_counter()
            await step()
            samples.append(time.perf_counter() - start)
    return samples, late.worst


async def measure(size: int, runs: int, stall_runs: int) -> dict[str, Any]:
    web = WebConfig(allow_private=True, max_bytes=max(5_000_000, size * 2), fetch_timeout=120)
    out: dict[str, Any] = {"page_bytes": 0, "runs": runs, "thread_limit": worker.THREAD_LIMIT}
    async with Site() as site:
        url = site.url(f"/html?size={size}")
        page = await download(httpx.URL(url), web)
        out["page_bytes"] = len(page.body)

        # The worker first, while this process has not extracted a large page itself.
        start = time.perf_counter()
        await worker.EXTRACTOR.readable(b"<html><body><p>warm</p></body></html>", within=120)
        out["worker_start_ms"] = (time.perf_counter() - start) * 1000
        pid = worker.EXTRACTOR.pid
        assert pid is not None
        out["worker_idle_rss_mb"] = _status_mb(pid, "VmRSS")
        before = _rss_mb()
        samples, worst = await _timed(runs, lambda: fetch(url, web))
        out["fetch_worker"], out["lateness_worker_ms"] = _summary(samples), worst * 1000
        out["worker_peak_rss_mb"] = _status_mb(pid, "VmHWM")
        out["worker_rss_after_mb"] = _status_mb(pid, "VmRSS")
        out["parent_rss_growth_worker_mb"] = _rss_mb() - before

        just_over = big_html(worker.THREAD_LIMIT + 4096).encode()
        hop, _ = await _timed(runs, lambda: worker.EXTRACTOR.readable(just_over, within=120))
        here, _ = await _timed(runs, lambda: asyncio.to_thread(readable, just_over))
        out["hop_ms"] = (statistics.median(hop) - statistics.median(here)) * 1000
        worker.EXTRACTOR.close()

        before = _rss_mb()
        readable(page.body)
        out["parent_rss_growth_thread_mb"] = _rss_mb() - before

        samples, worst = await _timed(runs, lambda: download(httpx.URL(url), web))
        out["download"], out["lateness_download_ms"] = _summary(samples), worst * 1000

        async def extract() -> None:
            readable(page.body)

        async def plain() -> None:
            trafilatura.html2txt(page.body)

        out["extract"] = _summary((await _timed(runs, extract))[0])
        out["plain"] = _summary((await _timed(runs, plain))[0])

        limit, worker.THREAD_LIMIT = worker.THREAD_LIMIT, 10**12  # every page in a thread
        try:
            samples, worst = await _timed(runs, lambda: fetch(url, web))
            out["fetch_thread"], out["lateness_thread_ms"] = _summary(samples), worst * 1000
        finally:
            worker.THREAD_LIMIT = limit

    stalls: dict[str, dict[str, float]] = {}
    for bytes_ in STALL_SIZES:
        html = big_html(bytes_).encode()
        worsts = []
        for _ in range(stall_runs):
            async with Lateness() as late:
                await asyncio.to_thread(readable, html)
            worsts.append(late.worst * 1000)
        worsts.sort()
        stalls[str(bytes_)] = {
            "median_ms": statistics.median(worsts),
            "p90_ms": worsts[int(len(worsts) * 0.9) - 1],
            "max_ms": worsts[-1],
        }
    out["thread_stall"] = stalls
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", type=int, default=2_000_000, help="page bytes")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--stall-runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.size, args.runs, args.stall_runs))
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"page: {result['page_bytes']:,} bytes of HTML")
    print(f"{'step':<13} {'median ms':>10} {'max ms':>10} {'loop late ms':>13}")
    for step, late in (
        ("download", "lateness_download_ms"),
        ("extract", ""),
        ("plain", ""),
        ("fetch_worker", "lateness_worker_ms"),
        ("fetch_thread", "lateness_thread_ms"),
    ):
        row = result[step]
        shown = f"{result[late]:>13.1f}" if late else ""
        print(f"{step:<13} {row['median_ms']:>10.1f} {row['max_ms']:>10.1f} {shown}")
    print(
        f"worker: first page (start) {result['worker_start_ms']:.0f} ms, hop "
        f"{result['hop_ms']:.1f} ms; RSS idle {result['worker_idle_rss_mb']:.0f} MB, peak "
        f"{result['worker_peak_rss_mb']:.0f} MB, after {result['worker_rss_after_mb']:.0f} MB"
    )
    print(
        f"this process's peak RSS growth: {result['parent_rss_growth_worker_mb']:.1f} MB with "
        f"the worker, {result['parent_rss_growth_thread_mb']:.1f} MB for one extraction here"
    )
    print(f"loop lateness while readable runs in a thread (THREAD_LIMIT {result['thread_limit']}):")
    for size, row in result["thread_stall"].items():
        print(
            f"  {int(size):>8,} B: median {row['median_ms']:.1f}  p90 {row['p90_ms']:.1f}  "
            f"max {row['max_ms']:.1f} ms"
        )


if __name__ == "__main__":
    main()
