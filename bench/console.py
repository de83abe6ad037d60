"""The web console's pages: their size over the wire and time to first paint (issue 21).

A real Kernel (SQLite in a temporary folder; the model is
:class:`bench.turn_overhead.InstantProvider`, no I/O) with the sidecar on a free
127.0.0.1 port and an API key, and Debian's chromium driven by Playwright (nothing is
downloaded). The browser signs in once; then each page is loaded ``--runs`` times in
the same tab (the console answers ``Cache-Control: no-store``, so every load fetches
everything again):

- bytes: from the browser's Resource Timing, per load: the HTML document, the scripts
  and the style sheet (``transferSize``: as served, headers included, compressed if the
  server compressed; ``decodedBodySize``: the bodies), and separately the API answers
  the page fetched (JSON);
- first paint: ``first-contentful-paint`` from a ``PerformanceObserver`` (``paint``),
  from the navigation's start; "ready": until the page's own element (its test hook)
  is shown, i.e. its module loaded and its API answers rendered.

Plus the whole console as shipped: every file under ``kernel/gateway/console/static``,
raw and gzip -9.

    uv run python bench/console.py [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import logging
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.turn_overhead import InstantKernel  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.core.logs import setup_logging  # noqa: E402
from kernel.gateway.console.pages import STATIC  # noqa: E402
from kernel.gateway.routes import ROUTERS  # noqa: E402
from kernel.gateway.server import Gateway  # noqa: E402
from tests.webconsole.chromium import ARGS, CHROMIUM  # noqa: E402

KEY = "bench-console-key-0123456789"
HOOKS = {
    "login": "#go",
    "chat": "#chat-input",
    "sessions": "table#sessions",
    "memories": "#memory-search",
    "jobs": "table#jobs",
    "usage": "#usage-chart, #usage-by-model",
    "asks": "#asks-empty, div.ask",
    "skills": "table#skills",
    "settings": "div#settings",
}
# The first contentful paint, whenever it happened (buffered: entries before the call).
FCP = """() => new Promise((resolve) => {
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.name === "first-contentful-paint") resolve(entry.startTime);
    }
  }).observe({ type: "paint", buffered: true });
})"""
RESOURCES = """() => {
  const [nav] = performance.getEntriesByType("navigation");
  const rows = [{ kind: "document", url: nav.name, wire: nav.transferSize,
                  body: nav.decodedBodySize }];
  for (const r of performance.getEntriesByType("resource")) {
    const kind = r.initiatorType === "fetch" || r.initiatorType === "xmlhttprequest"
      ? "api" : r.name.endsWith(".css") ? "css" : "js";
    rows.push({ kind, url: r.name, wire: r.transferSize, body: r.decodedBodySize });
  }
  return rows;
}"""


def write_config(folder: Path) -> Path:
    path = folder / "config.toml"
    path.write_text(
        "[general]\n"
        'default_provider = "main"\n'
        'data_dir = "data"\n'
        'language = "en"\n'
        "[providers.main]\n"
        'type = "openai_compat"\n'
        'api_key = "x"\n'
        'default_model = "m"\n'
        "max_retries = 0\n"
        "[gateway]\n"
        "port = 0\n"
        f'api_key = "{KEY}"\n',
        encoding="utf-8",
    )
    return path


async def load_once(page: Any, url: str, hook: str) -> dict[str, Any] | None:
    # One tab throughout: the CSRF token the sign-in gave lives in its sessionStorage.
    # about:blank first, so the page is a full load, not a change of #fragment.
    await page.goto("about:blank")
    await page.goto(url)
    try:
        await page.locator(hook).first.wait_for(state="visible", timeout=15_000)
    except Exception:
        return None  # the page (or its hook) is missing
    ready = await page.evaluate("() => performance.now()")
    fcp = await page.evaluate(FCP)
    await page.wait_for_load_state("networkidle")
    rows = await page.evaluate(RESOURCES)
    sums = {kind: [0, 0] for kind in ("document", "js", "css", "api")}
    for row in rows:
        sums[row["kind"]][0] += row["wire"]
        sums[row["kind"]][1] += row["body"]
    return {"fcp": fcp, "ready": ready, "sums": sums}


async def measure(url: str, runs: int) -> list[tuple[str, list[dict[str, Any]]]]:
    from playwright.async_api import async_playwright

    results = []
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1100, "height": 800})
            page = await context.new_page()
            await page.goto(url + "/console/login")
            await page.fill("#key", KEY)
            await page.click("#go")
            await page.locator("#nav a").first.wait_for(timeout=30_000)
            for name, hook in HOOKS.items():
                target = f"{url}/console/login" if name == "login" else f"{url}/console/#{name}"
                warm = await load_once(page, target, hook)  # warm-up (Python's caches)
                loads = []
                for _ in range(runs if warm is not None else 0):
                    one = await load_once(page, target, hook)
                    if one is not None:
                        loads.append(one)
                results.append((name, loads))
        finally:
            await browser.close()
    return results


def shipped() -> tuple[int, int, int]:
    files = [p for p in STATIC.iterdir() if p.is_file()]
    raw = sum(p.stat().st_size for p in files)
    packed = sum(len(gzip.compress(p.read_bytes(), 9)) for p in files)
    return len(files), raw, packed


def kb(n: float) -> str:
    return f"{n / 1024:.1f}"


def report(results: list[tuple[str, list[dict[str, Any]]]], runs: int) -> None:
    head = "| page | HTML+JS+CSS on the wire KB | bodies KB | API JSON KB |"
    print(head + f" FCP ms (median of {runs}) | FCP max | ready ms (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, loads in results:
        if not loads:
            print(f"| {name} | page or hook missing | | | | | |")
            continue
        first = loads[-1]["sums"]
        wire = sum(first[k][0] for k in ("document", "js", "css"))
        body = sum(first[k][1] for k in ("document", "js", "css"))
        fcps = [load["fcp"] for load in loads]
        ready = [load["ready"] for load in loads]
        print(
            f"| {name} | {kb(wire)} | {kb(body)} | {kb(first['api'][0])} |"
            f" {statistics.median(fcps):.0f} | {max(fcps):.0f} | {statistics.median(ready):.0f} |"
        )
    count, raw, packed = shipped()
    print(f"\nthe whole console as shipped: {count} files, {kb(raw)} KB ({kb(packed)} KB gzip -9)")


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kernel-console-bench-") as tmp:
        folder = Path(tmp)
        config = load_config(write_config(folder), env={}, require_telegram=False)
        setup_logging(folder / "data" / "logs", [KEY], level=logging.INFO, stream=io.StringIO())
        kernel = InstantKernel(config)
        await kernel.start()
        await kernel.store.add_memory("drinks jasmine tea", category="user")
        gateway = Gateway(kernel.gateway_deps(), ROUTERS)
        await gateway.start()
        try:
            results = await measure(gateway.url, args.runs)
        finally:
            await gateway.stop()
            await kernel.stop()
    report(results, args.runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="loads per page (after one warm-up)")
    args = parser.parse_args()
    if not Path(CHROMIUM).is_file():
        raise SystemExit(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
