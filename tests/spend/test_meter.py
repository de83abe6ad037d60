"""The meter's reservations (issue 16): a call in flight counts with its worst case, so
two concurrent calls cannot both pass a limit that has room for one; the reservation
goes when the call ends, however it ends. A real Store (SQLite file) and a scripted
provider whose answer the test releases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from kernel.config import load_config
from kernel.core.errors import BudgetExceededError
from kernel.core.messages import Message, TextBlock
from kernel.core.provider import ChatRequest, Completion, Provider, RetryPolicy, StreamEvent
from kernel.spend import CallTag, Meter
from kernel.store.db import Store
from kernel.store.usage import UsageFilter
from tests.clock import ManualClock
from tests.conftest import write_config

TZ = ZoneInfo("Asia/Shanghai")
PRICES = """
[providers.main.prices.model-a]
input = 10.0
output = 1000.0
[budget]
daily = 1.5
"""


class Held(Provider):
    """Answers once ``release`` is set, with 100 output tokens (0.1 at these prices);
    like Anthropic, it would report its usage at once (cancelled before: not billed)."""

    reports_usage_early = True

    def __init__(self) -> None:
        super().__init__("main", ["model-a"], "model-a")
        self.max_tokens = 1000  # a worst case of about 1.0: one fits under 1.5, two do not
        self.release = asyncio.Event()
        self.started = 0
        self.sent = asyncio.Event()  # a request reached the provider

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self.started += 1
        self.sent.set()
        await self.release.wait()
        yield Completion("ok", [], "end_turn", input_tokens=0, output_tokens=100)


async def drain(meter: Meter, provider: Provider) -> None:
    request = ChatRequest("model-a", "", [Message("user", [TextBlock("hi")])])
    async for _ in meter.stream(provider, request, RetryPolicy(0), CallTag("api")):
        pass


@pytest.fixture
async def meter(tmp_path: Path) -> AsyncIterator[Meter]:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude")
    path.write_text(path.read_text() + PRICES)
    config = load_config(path, env={}, require_telegram=False)
    store = Store(tmp_path / "kernel.db")
    await store.start()
    clock = ManualClock(datetime(2025, 6, 1, 12, 0, tzinfo=TZ))
    yield Meter(config, store, clock=clock.now, tz=TZ)
    await store.close()


async def test_a_call_in_flight_keeps_room_for_its_worst_case(meter: Meter) -> None:
    provider = Held()
    first = asyncio.ensure_future(drain(meter, provider))
    await provider.sent.wait()

    with pytest.raises(BudgetExceededError) as refused:
        await drain(meter, provider)  # nothing spent yet, but the first may cost ~1.0
    assert refused.value.details["scope"] == "day"
    assert provider.started == 1  # the second was never sent

    provider.release.set()
    await first
    await drain(meter, provider)  # 0.1 spent, nothing in flight: room again
    total = await meter.ledger.total(UsageFilter())
    assert (total.calls, round(total.cost, 6)) == (2, 0.2)


async def test_a_cancelled_call_gives_its_reservation_back(meter: Meter) -> None:
    provider = Held()
    first = asyncio.ensure_future(drain(meter, provider))
    await provider.sent.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first

    provider.release.set()
    await drain(meter, provider)  # room again: the reservation was given back
    total = await meter.ledger.total(UsageFilter())
    # the cancelled call is a row too: nothing came back before it, so it was not billed
    assert (total.calls, total.unpriced, total.unbilled, round(total.cost, 6)) == (2, 0, 1, 0.1)
    assert total.charged == pytest.approx(0.1)
