"""Scheduled jobs and channels: what Kernel's own parts cost.

1. **Scheduler with many jobs.** A real Kernel (SQLite file in a temporary directory,
   the anthropic provider configured but never called) with the clock of the tests
   (``tests/clock.py``), so nothing waits on wall time. ``--jobs`` jobs are created
   through ``CronScheduler.create`` (parse, next run, insert: one SQLite write each);
   then the time of one loop pass that finds nothing due (the scan and the next-sleep
   computation over every job) and of a Kernel start that loads them all back (read,
   re-check every spec, plan).
2. **Webhook delivery.** ``WebhookChannel.send_text`` to the receiver simulator on
   loopback (signed with a secret, one JSON POST each): deliveries per second, sequential.
3. **QQ callbacks.** Ed25519 verification of a signed event as ``QQInbound`` does it
   (key derived from the secret each time), per second; and a full signed
   ``POST /channels/qq/inbound`` through the sidecar answered with the ACK (the turn it
   starts is not part of the timing: the model is a simulator that echoes).

    uv run python bench/cron_channels.py [--jobs 1000] [--deliveries 300] [--callbacks 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel.app import Kernel  # noqa: E402
from kernel.channels.qq_inbound import sign, verify  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.core.delivery import Target  # noqa: E402
from tests.clock import ManualClock  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.qq_sim import APP_ID, SECRET, QQSim, event, signed_headers  # noqa: E402
from tests.sim.webhook_sim import WebhookSim  # noqa: E402

START = datetime(2025, 6, 1, 8, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


def config_text(model_url: str, extra: str = "") -> str:
    return f"""
[general]
default_provider = "main"
timezone = "Asia/Shanghai"
[gateway]
port = 0
[providers.main]
type = "claude"
api_base = "{model_url}"
api_key = "bench-key-0123456789"
max_tokens = 64
default_model = "m"
{extra}
"""


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(len(values) * 0.95) - 1] if len(values) >= 20 else values[-1]
    return f"median {statistics.median(values) * 1000:.3f} ms, p95 {p95 * 1000:.3f} ms"


async def scheduler(folder: Path, jobs: int) -> None:
    path = folder / "config.toml"
    path.write_text(config_text("http://127.0.0.1:9"))
    kernel = Kernel(load_config(path, env={}, require_telegram=False), clock=ManualClock(START))
    await kernel.start()
    created = time.perf_counter()
    for i in range(jobs):
        schedule = ["every 1h", "0 9 * * 1", "2025-06-03T09:00"][i % 3]
        await kernel.cron.create({"name": f"job {i}", "schedule": schedule, "text": "x"})
    created = time.perf_counter() - created
    cron = kernel.cron
    passes = []
    for _ in range(50):
        begun = time.perf_counter()
        now = cron.clock.now()
        for job in list(cron.jobs.values()):
            due = job.row.next_run_at
            assert not (job.schedulable and due is not None and due <= now)
        cron._seconds_to_next(now)
        passes.append(time.perf_counter() - begun)
    await kernel.stop()
    print(
        f"scheduler: {jobs} jobs created in {created:.2f} s ({created / jobs * 1000:.2f} ms each)"
    )
    print(f"scheduler: idle loop pass over {jobs} jobs: {ms(passes)}")
    loads = []
    for _ in range(3):
        kernel = Kernel(load_config(path, env={}, require_telegram=False), clock=ManualClock(START))
        await kernel.store.start()
        begun = time.perf_counter()
        await kernel.cron.start()
        loads.append(time.perf_counter() - begun)
        await kernel.cron.stop()
        await kernel.store.close()
    print(f"scheduler: start with {jobs + 1} stored jobs: {ms(loads)}")


async def webhook(folder: Path, deliveries: int) -> None:
    async with WebhookSim() as hook:
        path = folder / "webhook.toml"
        extra = (
            f'[channels.webhook]\nenabled = true\nurl = "{hook.url}"\n'
            'secret = "whsec-bench-01234"\n'
        )
        path.write_text(config_text("http://127.0.0.1:9", extra))
        kernel = Kernel(load_config(path, env={}, require_telegram=False))
        channel = kernel.webhook
        target = Target("u", "s", origin="bench")
        for _ in range(20):
            await channel.send_text(target, "warm-up")
        times = []
        begun = time.perf_counter()
        for i in range(deliveries):
            one = time.perf_counter()
            await channel.send_text(target, f"delivery {i} " + "x" * 200)
            times.append(time.perf_counter() - one)
        total = time.perf_counter() - begun
        await channel.aclose()
    print(f"webhook: {deliveries / total:.0f} signed deliveries/s sequential; each {ms(times)}")


async def qq(folder: Path, callbacks: int) -> None:
    body = json.dumps(event("c2c", "hello", where="u1", who="u1")).encode()
    headers = signed_headers(body)
    message = headers["X-Signature-Timestamp"].encode() + body
    checks = []
    for _ in range(200):
        begun = time.perf_counter()
        assert verify(SECRET, message, headers["X-Signature-Ed25519"])
        checks.append(time.perf_counter() - begun)
    print(f"qq: signature check {ms(checks)} ({1 / statistics.median(checks):.0f}/s)")
    assert sign(SECRET, b"x")

    import aiohttp

    from kernel.gateway.routes import ROUTERS
    from kernel.gateway.server import Gateway

    async with QQSim() as platform, AnthropicSim(fallback="echo") as model:
        path = folder / "qq.toml"
        extra = (
            f'[channels.qq]\nenabled = true\napp_id = "{APP_ID}"\nclient_secret = "{SECRET}"\n'
            f'api_base = "{platform.base_url}"\ntoken_url = "{platform.token_url}"\n'
            # An empty list answers nobody; a c2c sender is its openid (user0…user19 here).
            f"allowed_users = {json.dumps([f'user{n}' for n in range(20)])}\n"
        )
        path.write_text(config_text(model.base_url, extra))
        kernel = Kernel(load_config(path, env={}, require_telegram=False))
        await kernel.start()
        gateway = Gateway(kernel.gateway_deps(), ROUTERS)
        await gateway.start()
        times = []
        async with aiohttp.ClientSession() as http:
            for i in range(callbacks):
                raw = json.dumps(event("c2c", f"hi {i}", where=f"user{i % 20}", who="u")).encode()
                sent = signed_headers(raw)
                begun = time.perf_counter()
                async with http.post(
                    f"{gateway.url}/channels/qq/inbound", data=raw, headers=sent
                ) as r:
                    assert r.status == 200, await r.text()
                    await r.read()
                times.append(time.perf_counter() - begun)
        await platform.wait_until(lambda: len(platform.messages) == callbacks, timeout=120)
        await gateway.stop()
        await kernel.stop()
    print(f"qq: signed callback to ACK through the sidecar: {ms(times)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--deliveries", type=int, default=300)
    parser.add_argument("--callbacks", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "a").mkdir()
        (folder / "b").mkdir()
        (folder / "c").mkdir()
        await scheduler(folder / "a", args.jobs)
        await webhook(folder / "b", args.deliveries)
        await qq(folder / "c", args.callbacks)


if __name__ == "__main__":
    asyncio.run(main())
