"""The sidecar under load: ``/agent/process`` (non-stream), the model APIs
(``/v1/chat/completions``; ``/v1/responses`` streamed as Codex asks and stored as the
openai SDK's default asks) and ``/healthz``.

This process runs a real Kernel (SQLite file in a temporary directory, Kernel's own
logging at INFO to a file, as the service logs) with the Gateway on a free 127.0.0.1
port. The model is :class:`bench.turn_overhead.InstantProvider`, which answers at once
without I/O, so the figures are Kernel's and the sidecar's own cost, database writes
included (each turn stores two messages).

The load comes from a second process (this script with ``--load``): an aiohttp client
with ``c`` keep-alive connections, one chat (session) per connection, so requests of
different connections run in parallel and a connection's requests queue behind each
other as the same chat must. Each request's latency is measured in the client.

"Agent only" is the same turn started directly on the agent in this process (no HTTP),
one at a time: the sidecar's added latency is HTTP p50 at c=1 minus that p50.

    uv run python bench/gateway.py [--requests 400] [--concurrency 1,8,32]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.turn_overhead import InstantKernel  # noqa: E402
from kernel.agent.agent import SessionKey, UserInput  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.core.logs import setup_logging  # noqa: E402
from kernel.gateway.routes import ROUTERS  # noqa: E402
from kernel.gateway.server import Gateway  # noqa: E402

# The model APIs, one at a time: no session, no history; "#…" is the request's variant.
V1_PATHS = ("/v1/chat/completions", "/v1/responses#stream", "/v1/responses#store")
TEXT = "What did we decide about the quarterly report structure last week?"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------- load side


async def _load(url: str, path: str, concurrency: int, total: int, warmup: int) -> dict[str, Any]:
    import aiohttp

    per_worker = max(1, total // concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def one(session_id: str) -> float:
            started = time.perf_counter()
            if path == "/healthz":
                async with http.get(url + path) as response:
                    await response.read()
                    ok = response.status == 200
            elif path.startswith("/v1/"):
                route, _, variant = path.partition("#")
                async with http.post(url + route, json=v1_body(route, variant)) as response:
                    raw = await response.read()
                    ok = response.status == 200 and v1_answered(raw, variant)
            else:
                body = {
                    "input": [{"role": "user", "content": [{"type": "text", "text": TEXT}]}],
                    "session_id": session_id,
                    "user_id": "bench",
                }
                async with http.post(url + path, json=body) as response:
                    data = await response.json()
                    ok = response.status == 200 and bool(data.get("reply"))
            if not ok:
                raise RuntimeError(f"{path} answered {response.status}")
            return (time.perf_counter() - started) * 1000

        async def worker(index: int, count: int, out: list[float]) -> None:
            session_id = f"c{concurrency}-w{index}"
            for _ in range(count):
                out.append(await one(session_id))

        await asyncio.gather(*(worker(i, warmup, []) for i in range(concurrency)))
        samples: list[list[float]] = [[] for _ in range(concurrency)]
        started = time.perf_counter()
        await asyncio.gather(*(worker(i, per_worker, samples[i]) for i in range(concurrency)))
        wall = time.perf_counter() - started
    flat = [s for worker_samples in samples for s in worker_samples]
    return {
        "path": path,
        "concurrency": concurrency,
        "requests": len(flat),
        "per_s": len(flat) / wall,
        "p50": percentile(flat, 0.50),
        "p99": percentile(flat, 0.99),
        "mean": statistics.fmean(flat),
    }


def v1_body(route: str, variant: str) -> dict[str, Any]:
    """A stateless one-message request as the model APIs' clients send it: Codex streams
    with ``store: false``; the openai SDK's default keeps the response (``store``)."""
    if route == "/v1/chat/completions":
        return {"model": "m", "messages": [{"role": "user", "content": TEXT}]}
    body: dict[str, Any] = {"model": "m", "input": TEXT, "store": variant == "store"}
    if variant == "stream":
        body["stream"] = True
    return body


def v1_answered(raw: bytes, variant: str) -> bool:
    if variant == "stream":
        return b"response.completed" in raw
    return b'"output"' in raw or b'"choices"' in raw


def load_main(args: argparse.Namespace) -> None:
    result = asyncio.run(_load(args.url, args.path, args.c, args.requests, args.warmup))
    print(json.dumps(result))


# ---------------------------------------------------------------------- server side


def write_config(folder: Path) -> Path:
    path = folder / "config.toml"
    path.write_text(
        "[general]\n"
        'default_provider = "main"\n'
        'data_dir = "data"\n'
        "context_rounds = 50\n"
        "[providers.main]\n"
        'type = "openai_compat"\n'
        'api_key = "x"\n'
        'default_model = "m"\n'
        "max_retries = 0\n"
        "[gateway]\n"
        "port = 0\n"
        'auth = "none"\n',  # measured as before: no key (loopback only)
        encoding="utf-8",
    )
    return path


async def agent_only(kernel: InstantKernel, turns: int) -> list[float]:
    opened = await kernel.agent.sessions.open_session(SessionKey("console", "bench", "direct"))
    assert opened is not None
    samples = []
    for _ in range(turns):
        started = time.perf_counter()
        await kernel.agent.start_turn(opened.conversation, UserInput(TEXT)).wait()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def run_load(url: str, path: str, c: int, requests: int, warmup: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--load", "--url", url, "--path", path]
    command += ["--c", str(c), "--requests", str(requests), "--warmup", str(warmup)]
    child = await asyncio.create_subprocess_exec(
        *command, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(err.decode())
    result: dict[str, Any] = json.loads(out)
    return result


async def serve_and_measure(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kernel-gw-bench-") as tmp:
        folder = Path(tmp)
        config = load_config(write_config(folder), env={}, require_telegram=False)
        # As the service: INFO to the rotating file, and to a stream (here a buffer).
        setup_logging(folder / "data" / "logs", [], level=logging.INFO, stream=io.StringIO())
        kernel = InstantKernel(config)
        await kernel.start()
        gateway = Gateway(kernel.gateway_deps(), ROUTERS)
        await gateway.start()
        try:
            await agent_only(kernel, 20)
            direct = await agent_only(kernel, args.requests)
            rows = [
                {
                    "path": "agent only",
                    "concurrency": 1,
                    "requests": len(direct),
                    "per_s": 1000 / statistics.fmean(direct),
                    "p50": percentile(direct, 0.5),
                    "p99": percentile(direct, 0.99),
                    "mean": statistics.fmean(direct),
                }
            ]
            for c in args.concurrency:
                total = max(args.requests, c * 25)
                rows.append(await run_load(gateway.url, "/agent/process", c, total, 5))
            for path in V1_PATHS:
                rows.append(await run_load(gateway.url, path, 1, args.requests, 5))
            rows.append(await run_load(gateway.url, "/healthz", 8, args.requests * 5, 20))
            rows.append(await run_load(gateway.url, "/healthz", 1, args.requests * 2, 20))
            rounds = await kernel.store.count_sessions()
        finally:
            await gateway.stop()
            await kernel.stop()
    print("| path | c | requests | req/s | p50 ms | p99 ms | mean ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['path']} | {r['concurrency']} | {r['requests']} | {r['per_s']:.0f} |"
            f" {r['p50']:.2f} | {r['p99']:.2f} | {r['mean']:.2f} |"
        )
    added = rows[1]["p50"] - rows[0]["p50"]
    print(f"\nadded by the sidecar at c=1 (p50 HTTP - p50 agent only): {added:.2f} ms")
    print(f"sessions in the database at the end: {rounds}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="turns per measurement")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--load", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--c", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        load_main(args)
        return
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    asyncio.run(serve_and_measure(args))


if __name__ == "__main__":
    main()
