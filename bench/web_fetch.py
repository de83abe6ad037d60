"""web_fetch of a 2 MB HTML page on loopback: time and peak memory of extraction (issue 18).

The page is ``tests/web/site.py``'s ``/html?size=N`` (default 2,000,000 bytes): the
article page's menus, sidebar, scripts and footer around N bytes of paragraphs, with a
one-row table every tenth block; served by the test site (aiohttp) on 127.0.0.1.

Printed, each over ``--runs`` runs after one warm-up (median and max):

- ``download``: :func:`kernel.web.fetch.download` alone: a fresh guarded client, the
  address check, the GET, the streamed body (no extraction);
- ``extract``: :func:`kernel.web.extract.readable` on the page's bytes, in this thread
  (trafilatura: parse, metadata, main content as Markdown);
- ``plain``: ``trafilatura.html2txt`` (the fallback when no main content is found);
- ``web_fetch``: the whole :func:`kernel.web.fetch.fetch` (download, extraction in a
  worker thread, truncation, the untrusted-content block), and the event loop's worst
  lateness meanwhile (a 5 ms ticker; also measured during ``download`` alone, for
  comparison): extraction runs in a worker thread, but trafilatura's Python code and
  lxml share the GIL with the loop.

Memory, for one extraction of the page: the process's peak RSS growth (``ru_maxrss``
after minus before the first large extraction in the process, with the page already
downloaded), then, on a second extraction, the ``tracemalloc`` peak (Python objects only:
lxml's tree lives in libxml2's own allocations, which it does not see).

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
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import trafilatura  # noqa: E402

from kernel.config.web import WebConfig  # noqa: E402
from kernel.web.extract import readable  # noqa: E402
from kernel.web.fetch import download, fetch  # noqa: E402
from tests.web.site import Site  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _summary(samples: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(samples) * 1000, "max_ms": max(samples) * 1000}


async def _timed(runs: int, step: Any) -> list[float]:
    await step()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await step()
        samples.append(time.perf_counter() - start)
    return samples


async def _lateness(stop: asyncio.Event, worst: list[float]) -> None:
    tick = 0.005
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(tick)
        worst[0] = max(worst[0], time.perf_counter() - start - tick)


async def measure(size: int, runs: int) -> dict[str, Any]:
    web = WebConfig(allow_private=True, max_bytes=max(5_000_000, size * 2))
    async with Site() as site:
        url = site.url(f"/html?size={size}")
        page = await download(httpx.URL(url), web)
        out: dict[str, Any] = {"page_bytes": len(page.body), "runs": runs}

        # Memory first, in a process that has not extracted a large page yet.
        readable(b"<html><head><title>w</title></head><body><p>warm</p></body></html>")
        before = _rss_mb()
        first = readable(page.body)
        out["rss_growth_mb"] = _rss_mb() - before
        out["rss_peak_mb"] = _rss_mb()
        out["text_chars"] = len(first.text)
        tracemalloc.start()
        readable(page.body)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["tracemalloc_peak_mb"] = peak / 2**20

        async def get() -> None:
            await download(httpx.URL(url), web)

        async def extract() -> None:
            readable(page.body)

        async def plain() -> None:
            trafilatura.html2txt(page.body)

        worst = [0.0]
        stop = asyncio.Event()
        ticker = asyncio.create_task(_lateness(stop, worst))
        out["download"] = _summary(await _timed(runs, get))
        stop.set()
        await ticker
        out["loop_lateness_download_ms"] = worst[0] * 1000
        out["extract"] = _summary(await _timed(runs, extract))
        out["plain"] = _summary(await _timed(runs, plain))

        worst = [0.0]
        stop = asyncio.Event()
        ticker = asyncio.create_task(_lateness(stop, worst))

        async def whole() -> None:
            await fetch(url, web)

        out["web_fetch"] = _summary(await _timed(runs, whole))
        stop.set()
        await ticker
        out["loop_lateness_max_ms"] = worst[0] * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", type=int, default=2_000_000, help="page bytes")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.size, args.runs))
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"page: {result['page_bytes']:,} bytes of HTML -> {result['text_chars']:,} chars of text")
    print(
        f"{'step':<10} {'median ms':>10} {'max ms':>10}   ({result['runs']} runs after 1 warm-up)"
    )
    for step in ("download", "extract", "plain", "web_fetch"):
        row = result[step]
        print(f"{step:<10} {row['median_ms']:>10.1f} {row['max_ms']:>10.1f}")
    print(
        f"event loop lateness (5 ms ticker), max: {result['loop_lateness_max_ms']:.1f} ms during "
        f"web_fetch, {result['loop_lateness_download_ms']:.1f} ms during download alone"
    )
    print(
        f"one extraction: tracemalloc peak {result['tracemalloc_peak_mb']:.1f} MB, "
        f"peak RSS growth {result['rss_growth_mb']:.1f} MB (process peak "
        f"{result['rss_peak_mb']:.0f} MB)"
    )


if __name__ == "__main__":
    main()
