"""Round-trip cost of an MCP tool call through Kernel's registry over stdio.

A real Kernel (SQLite in a temporary folder, the real ToolRegistry and MCPManager) is
started with one stdio MCP server: ``tests/mcp/stdio_server.py``, written with the SDK's
MCPServer and run by this interpreter. Each sample is the wall time of
``kernel.tools.call("mcp_bench__echo", {"text": ...})``: argument repair and validation,
the manager's handler, ``ClientSession.call_tool`` over the child's stdin/stdout, the
server's work, result conversion to text, and the registry's outcome.

For comparison the same server script is run a second time and called with the raw SDK
(``stdio_client`` + ``ClientSession.call_tool``, no Kernel), alternating call by call with
the Kernel path so both see the same machine load. Also timed, once each: start of the
MCP manager (spawn, initialize, tools/list, registration) and mcp-server-time's
``get_current_time`` through the registry.

    uv run python bench/mcp_call.py [--calls 500] [--warmup 50] [--sizes 100,10000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from kernel.app import Kernel
from kernel.config import load_config

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "mcp" / "stdio_server.py"
BLOCK = 50  # calls per block; Kernel and raw blocks alternate so both see the same load

CONFIG = f"""
[general]
default_provider = "main"
language = "en"
[providers.main]
type = "openai_compat"
api_base = "http://127.0.0.1:9/v1"
api_key = "x"
default_model = "m"
[mcp]
ping_interval = 0
[[mcp.servers]]
name = "bench"
type = "stdio"
command = "{sys.executable}"
args = ["{SERVER}"]
[[mcp.servers]]
name = "time"
type = "stdio"
command = "{sys.executable}"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def row(name: str, size: int, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return (
        f"| {name} | {size} | {len(ms)} | {percentile(ms, 50):.3f} | {percentile(ms, 90):.3f} "
        f"| {percentile(ms, 99):.3f} | {max(ms):.3f} | {statistics.fmean(ms):.3f} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--sizes", default="100,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    folder = Path(tempfile.mkdtemp(prefix="kernel-bench-mcp-"))
    try:
        (folder / "config.toml").write_text(CONFIG, encoding="utf-8")
        kernel = Kernel(load_config(folder / "config.toml", env={}, require_telegram=False))
        started = time.perf_counter()
        await kernel.start()
        start_s = time.perf_counter() - started
        states = {s.name: s.state for s in kernel.mcp.status()}
        assert states == {"bench": "connected", "time": "connected"}, states

        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        lines = []
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            for size in sizes:
                # Not base64-like: a run of one letter would reach models as a placeholder.
                text = ("hello, world. " * (size // 14 + 1))[:size]
                kernel_samples: list[float] = []
                raw_samples: list[float] = []
                for block in range((args.warmup + args.calls) // BLOCK):
                    warm = block * BLOCK < args.warmup
                    for _ in range(BLOCK):
                        t0 = time.perf_counter()
                        outcome = await kernel.tools.call("mcp_bench__echo", {"text": text})
                        elapsed = time.perf_counter() - t0
                        assert outcome.ok and outcome.content == text
                        if not warm:
                            kernel_samples.append(elapsed)
                    for _ in range(BLOCK):
                        t0 = time.perf_counter()
                        result = await session.call_tool("echo", {"text": text})
                        elapsed = time.perf_counter() - t0
                        assert not result.is_error
                        if not warm:
                            raw_samples.append(elapsed)
                lines.append(row("Kernel registry", size, kernel_samples))
                lines.append(row("raw SDK session", size, raw_samples))

        time_samples = []
        for i in range(args.warmup + min(args.calls, 200)):
            t0 = time.perf_counter()
            outcome = await kernel.tools.call("mcp_time__get_current_time", {"timezone": "UTC"})
            if i >= args.warmup:
                time_samples.append(time.perf_counter() - t0)
            assert outcome.ok, outcome.content
        await kernel.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    print(f"Kernel.start() with 2 stdio MCP servers: {start_s:.3f} s")
    print()
    print("| path | text bytes | calls | p50 ms | p90 ms | p99 ms | max ms | mean ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for line in lines:
        print(line)
    print(row("mcp-server-time via registry", 0, time_samples))


if __name__ == "__main__":
    asyncio.run(main())
