"""Polling recovery: how long after a Bot API outage ends until an update is consumed.

Each run is a real in-process Kernel with its Telegram channel (the real PTB Application
long-polling the Bot API simulator, ``tests.sim.telegram_sim.TelegramSim``) and the
shipped defaults ``poll_timeout = 30``, ``watchdog_seconds = 120``. After a short
settle and a random stagger (seeded, so the outage starts at a different point of a long
poll each run), the simulator is out for ``--outage`` seconds plus up to twice the
backoff cap (so it ends at different points of the backoff) in one of three ways:

- ``refuse``: the simulator's listening socket is closed (connections refused), then
  opened again on the same port;
- ``502``: every Bot API call is answered 502 Bad Gateway;
- ``hang``: every call gets no answer at all, ever (a request made during the outage
  stays unanswered after it: only the client's timeout ends it).

At the end of the outage an owner message is injected; the figure is the time from the
end of the outage to the ``getUpdates`` answer that carries it. The documented bound is
``max(BACKOFF_CAP, poll_timeout + POLL_GRACE)`` plus one request (``polling.py``).
All runs go concurrently in one event loop.

    uv run python bench/poll_recovery.py [--runs 5] [--outage 60] [--kinds refuse,502,hang]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from kernel.app import Kernel  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.telegram.channel import TelegramChannel  # noqa: E402
from kernel.telegram.polling import BACKOFF_CAP, recovery_bound  # noqa: E402
from tests.conftest import write_config  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.script import abort  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, ApiError, BotCall, TelegramSim  # noqa: E402

POLL_TIMEOUT = 30  # the shipped defaults
WATCHDOG_SECONDS = 120.0


class OutageSim(TelegramSim):
    """The Bot API simulator with an outage switch (502 or hang for every method)."""

    def __init__(self) -> None:
        super().__init__()
        self.mode: str | None = None
        self.probe: int | None = None
        self.consumed_at: float | None = None
        self._outage = asyncio.Event()

    def begin(self, mode: str) -> None:
        self.mode = mode
        self._outage.set()

    def end(self) -> None:
        self.mode = None
        self._outage = asyncio.Event()

    async def _answer(self, request: web.Request, call: BotCall) -> web.StreamResponse:
        if self.mode is None:
            return await super()._answer(request, call)
        return await self._fail(request)

    async def _fail(self, request: web.Request) -> web.Response:
        if self.mode == "hang":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(3600):
                    await self._stopping.wait()
            abort(request)
            return web.Response(status=503)
        body = {"ok": False, "error_code": 502, "description": "Bad Gateway"}
        return web.json_response(body, status=502)

    async def _get_updates(self, request: web.Request, params: Any) -> list[Any]:
        # A long poll in flight when the outage begins fails with it.
        poll = asyncio.ensure_future(super()._get_updates(request, params))
        outage = asyncio.ensure_future(self._outage.wait())
        await asyncio.wait({poll, outage}, return_when=asyncio.FIRST_COMPLETED)
        outage.cancel()
        if not poll.done():
            poll.cancel()
            await self._fail(request)
            raise ApiError(502, "Bad Gateway")
        result = poll.result()
        if self.probe is not None and any(u["update_id"] == self.probe for u in result):
            self.consumed_at = self.consumed_at or time.monotonic()
        return result


async def one_run(kind: str, outage: float, stagger: float, folder: Path) -> float:
    tg = await OutageSim().start()
    model = await AnthropicSim(fallback="echo").start()
    path = write_config(folder, model.base_url, "claude", language="en")
    path.write_text(
        path.read_text() + f'\n[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
        f'api_base = "{tg.api_base}"\npoll_timeout = {POLL_TIMEOUT}\n'
    )
    kernel = Kernel(load_config(path, env={}))
    await kernel.start()
    channel = TelegramChannel(kernel.telegram_services())
    await channel.start()
    try:
        await asyncio.sleep(2 + stagger)
        if kind == "refuse":
            await tg.stop()
        else:
            tg.begin(kind)
        await asyncio.sleep(outage)
        if kind == "refuse":
            await tg.start()
        tg.end()
        restored = time.monotonic()
        tg.probe = tg.inject_text("are you back?")["update_id"]
        await tg.wait_until(lambda: tg.consumed_at is not None, timeout=600)
        assert tg.consumed_at is not None
        return tg.consumed_at - restored
    finally:
        await channel.stop()
        await kernel.stop()
        await tg.stop()
        await model.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--outage", type=float, default=60.0)
    parser.add_argument("--kinds", default="refuse,502,hang")
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    kinds = args.kinds.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for kind in kinds:
            for n in range(args.runs):
                folder = Path(tmp) / f"{kind}-{n}"
                folder.mkdir()
                stagger = rng.uniform(0, POLL_TIMEOUT)
                # Outages of different lengths end at different points of the backoff.
                outage = args.outage + rng.uniform(0, 2 * BACKOFF_CAP)
                jobs.append(one_run(kind, outage, stagger, folder))
        results = await asyncio.gather(*jobs)
    bound = recovery_bound(POLL_TIMEOUT, WATCHDOG_SECONDS)
    print(
        f"outages of {args.outage:.0f}-{args.outage + 2 * BACKOFF_CAP:.0f} s, {args.runs} runs "
        f"each; documented bound {bound:.0f} s plus one request"
    )
    for i, kind in enumerate(kinds):
        times = results[i * args.runs : (i + 1) * args.runs]
        print(
            f"{kind:>6}: p50 {statistics.median(times):5.1f} s  max {max(times):5.1f} s  "
            f"({', '.join(f'{t:.1f}' for t in times)})"
        )


if __name__ == "__main__":
    asyncio.run(main())
