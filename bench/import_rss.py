"""Start-up cost: import time and memory of Kernel, each case in a fresh interpreter.

Every case runs ``sys.executable -c <snippet>`` N times (after one untimed warm-up run
that also fills the bytecode caches and creates the database) and reports the median.
Times are measured inside the child with ``time.perf_counter`` from the first line of
the snippet, so interpreter start-up is excluded; the child's whole wall time, as seen
by the parent, is reported separately. Memory is read from ``/proc/self/status``:
``VmRSS`` (resident now) and ``VmHWM`` (peak resident), in MiB.

Cases:
  python -c pass        the bare interpreter, for reference
  import kernel.app     ``import kernel`` then ``import kernel.app`` (no SDK should load)
  start Kernel (claude) load_config + Kernel + start() + agent.selection.provider(): the real
                        start-up with one ``claude`` provider, so ``anthropic`` is imported;
                        ``openai`` must not be, nor ``jieba`` (it loads on the first
                        memory operation)
  anthropic/openai/aiohttp  eager SDK imports, alone and together, for scale

Then the 15 largest import costs of the real service at rest: ``python -m kernel`` (the
``--no-dev`` environment of ``bench/ready.py``, default configuration, sidecar on) runs
once with ``-X importtime`` until it polls Telegram; the top-level imports it made by then
are replayed in the same order in a fresh interpreter of that environment, each step's
``VmRSS`` growth and time measured (what a step's own dependencies cost is charged to the
first step that needs them, so the steps add up to the whole). Median of N replays.

    uv run python bench/import_rss.py [-n 5] [--top 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PRELUDE = textwrap.dedent(
    """
    import time
    _t0 = time.perf_counter()
    import json, sys

    def _mem():
        out = {}
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) / 1024
        return out

    def _report(**extra):
        heavy = ("anthropic", "openai", "aiohttp", "pydantic", "jieba")
        loaded = {m: m in sys.modules for m in heavy}
        print(json.dumps({**_mem(), "total": time.perf_counter() - _t0, "loaded": loaded,
                          "modules": len(sys.modules), **extra}))
    """
)

CASES: dict[str, str] = {
    "python -c pass": "_report()",
    "import kernel.app": textwrap.dedent(
        """
        t = time.perf_counter()
        import kernel
        t_kernel = time.perf_counter() - t
        import kernel.app
        _report(kernel=t_kernel, app=time.perf_counter() - t - t_kernel)
        """
    ),
    "start Kernel (claude)": textwrap.dedent(
        """
        import asyncio
        from pathlib import Path
        import kernel.app
        from kernel.config import load_config
        t_import = time.perf_counter() - _t0
        config = load_config(Path(sys.argv[1]), env={}, require_telegram=False)
        app = kernel.app.Kernel(config)

        async def main():
            await app.start()
            t_started = time.perf_counter() - _t0
            provider = await app.agent.selection.provider()
            assert type(provider).__name__ == "ClaudeProvider", provider
            t_provider = time.perf_counter() - _t0
            mem = _mem()
            openai_loaded = "openai" in sys.modules
            jieba_loaded = "jieba" in sys.modules
            await app.stop()
            return t_started, t_provider, mem, openai_loaded, jieba_loaded

        t_started, t_provider, mem, openai_loaded, jieba_loaded = asyncio.run(main())
        # Memory and time as they were with the provider built (before the stop).
        _report(imports=t_import, started=t_started, provider=t_provider,
                openai_at_start=openai_loaded, jieba_at_start=jieba_loaded, **mem)
        """
    ),
    "import anthropic": "import anthropic\n_report()",
    "import openai": "import openai\n_report()",
    "import aiohttp": "import aiohttp\n_report()",
    "import anthropic, openai, aiohttp": "import anthropic, openai, aiohttp\n_report()",
}

CONFIG = """\
[general]
default_provider = "main"
data_dir = "data"
soul = "SOUL.md"

[providers.main]
type = "claude"
api_key = "x"
default_model = "claude-sonnet-4-5"
max_tokens = 4096

[gateway]
enabled = false
"""


@dataclass(slots=True)
class Run:
    report: dict[str, Any]
    wall: float  # the child's whole life as seen by the parent, interpreter start-up included


def run_child(snippet: str, config: Path) -> Run:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + snippet, str(config)],
        capture_output=True,
        text=True,
        check=False,
        cwd=config.parent,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stderr}")
    return Run(json.loads(proc.stdout.strip().splitlines()[-1]), wall)


# Replays imports in order: one line per step, "name<TAB>MiB<TAB>seconds".
REPLAY = """
import importlib, sys, time
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS"))
sys.modules.setdefault("httpx._main", None)  # as kernel/__main__.py does first
for name in sys.argv[1:]:
    before, t = rss(), time.perf_counter()
    try:
        importlib.import_module(name)
    except Exception:
        continue
    print(f"{name}\t{rss() - before}\t{time.perf_counter() - t}")
"""


def service_imports(python: Path) -> list[str]:
    """The top-level imports ``python -m kernel`` made until it rested, in order."""
    import asyncio

    from bench.ready import one_start

    with tempfile.TemporaryDirectory(prefix="kernel-imports-") as tmp:
        log = Path(tmp) / "importtime.txt"
        start = asyncio.run(one_start(python, True, importtime=log))
        text = log.read_bytes()[: start.importtime_at_rest].decode(errors="replace")
    names = []
    for line in text.splitlines():
        _, _, tail = line.partition("|")
        _, _, name = tail.partition("|")
        if name.startswith(" ") and not name.startswith("  "):  # depth 0: one space
            names.append(name.strip())
    return [n for n in names if n not in ("encodings", "site")]


def largest_imports(python: Path, runs: int, top: int) -> None:
    names = service_imports(python)
    steps: dict[str, list[tuple[float, float]]] = {}
    for _ in range(runs):
        out = subprocess.run(
            [str(python), "-c", REPLAY, *names], capture_output=True, text=True, check=True
        ).stdout
        for line in out.splitlines():
            name, mib, seconds = line.split("\t")
            steps.setdefault(name, []).append((float(mib), float(seconds)))
    cost = {
        name: (statistics.median(m for m, _ in v), statistics.median(s for _, s in v))
        for name, v in steps.items()
    }
    total = sum(m for m, _ in cost.values())
    print(
        f"\nThe service's imports at rest ({python}): {len(names)} top-level steps, "
        f"{total:.1f} MiB in all; the {top} largest by memory (median of {runs}):"
    )
    print(f"{'import':<40} {'RSS MiB':>8} {'ms':>7}")
    for name, (mib, seconds) in sorted(cost.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{name:<40} {mib:>8.1f} {seconds * 1000:>7.1f}")


def median(runs: list[Run], key: str) -> float:
    return statistics.median(float(r.report[key]) for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5, help="runs per case (median reported)")
    parser.add_argument("--top", type=int, default=15, help="largest service imports listed")
    parser.add_argument("--only-top", action="store_true", help="only the largest imports")
    args = parser.parse_args()
    if args.only_top:
        from bench.ready import no_dev_python

        largest_imports(no_dev_python(ROOT / ".bench" / "nodev"), args.n, args.top)
        return

    print(f"Python {sys.version.split()[0]} ({sys.executable}), {args.n} runs per case, median")
    results: dict[str, list[Run]] = {}
    with tempfile.TemporaryDirectory(prefix="kernel-bench-") as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(CONFIG, encoding="utf-8")
        for name, snippet in CASES.items():
            run_child(snippet, config)  # warm-up: bytecode caches, database file
            results[name] = [run_child(snippet, config) for _ in range(args.n)]

    header = (
        f"{'case':<34} {'in-proc s':>9} {'wall s':>7} {'RSS MiB':>8} {'peak MiB':>8} "
        f"{'modules':>7}  SDKs loaded"
    )
    print()
    print(header)
    print("-" * (len(header) + 20))
    for name, runs in results.items():
        loaded = [m for m, yes in runs[-1].report["loaded"].items() if yes]
        print(
            f"{name:<34} {median(runs, 'total'):>9.3f} "
            f"{statistics.median(r.wall for r in runs):>7.3f} "
            f"{median(runs, 'VmRSS'):>8.1f} {median(runs, 'VmHWM'):>8.1f} "
            f"{median(runs, 'modules'):>7.0f}  {', '.join(loaded) or '-'}"
        )

    app = results["import kernel.app"]
    start = results["start Kernel (claude)"]
    print()
    print(f"import kernel              {median(app, 'kernel') * 1000:8.1f} ms")
    print(f"import kernel.app (after)  {median(app, 'app') * 1000:8.1f} ms")
    print(f"start: imports             {median(start, 'imports') * 1000:8.1f} ms")
    print(f"start: + config, start()   {median(start, 'started') * 1000:8.1f} ms")
    print(f"start: + claude provider   {median(start, 'provider') * 1000:8.1f} ms")
    leaked = [r.report["openai_at_start"] for r in start]
    verdict = "NO (good)" if not any(leaked) else f"YES in {sum(leaked)}/{len(leaked)} runs"
    print(f"'openai' in sys.modules after a claude-only start: {verdict}")
    jieba = [r.report["jieba_at_start"] for r in start]
    verdict = "NO (good)" if not any(jieba) else f"YES in {sum(jieba)}/{len(jieba)} runs"
    print(f"'jieba' in sys.modules after start (no memory operation yet): {verdict}")
    from bench.ready import no_dev_python

    largest_imports(no_dev_python(ROOT / ".bench" / "nodev"), args.n, args.top)


if __name__ == "__main__":
    main()
