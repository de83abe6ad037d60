"""The meter's rules on a real store: prices and worst cases, day/month/job limits, the
owner's raise (today only), reservations for calls in flight, the warning once per
period, and the ledger's sums and days in the owner's time zone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from kernel.config import Config, ModelPrice, load_config
from kernel.core.errors import BudgetExceededError, ProviderError
from kernel.core.messages import Message, TextBlock
from kernel.core.provider import (
    ChatRequest,
    Completion,
    Provider,
    RetryPolicy,
    StreamEvent,
    TextDelta,
)
from kernel.core.usage import Usage, estimate_request_tokens
from kernel.spend import CallTag, Meter, cost_of, money, money_under, share, worst_case
from kernel.store.db import Store
from kernel.store.usage import UsageEntry, UsageFilter, UsageStore
from tests.clock import ManualClock

TZ = ZoneInfo("Asia/Shanghai")
# 23:30 in Shanghai on 2026-11-26: half an hour before the owner's day ends.
LATE = datetime(2026, 11, 26, 15, 30, tzinfo=UTC)
PRICE = ModelPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


class FixedProvider(Provider):
    """A provider of the interface, answering with fixed usage (``gate``: hold the
    answer until it is set)."""

    def __init__(
        self,
        usage: Usage,
        gate: asyncio.Event | None = None,
        *,
        reported: bool = True,
        max_tokens: int | None = 1000,
        text_first: bool = False,
    ) -> None:
        super().__init__("main", ["model-a"], "model-a")
        self.usage = usage
        self.gate = gate
        self.reported = reported
        self.max_tokens = max_tokens
        self.text_first = text_first  # a delta before the gate: the answer has begun
        self.calls = 0
        self.called = asyncio.Event()
        self.asked: list[int | None] = []  # max_tokens of each request

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        self.asked.append(request.max_tokens)
        if self.text_first:
            yield TextDelta("o")
        self.called.set()
        if self.gate is not None:
            await self.gate.wait()
        u = self.usage
        yield Completion(
            "ok",
            [],
            "end_turn",
            u.input,
            u.output,
            None,
            [],
            u.cache_read,
            u.cache_write,
            usage_reported=self.reported,
        )


def config(tmp_path: Path, **budget: Any) -> Config:
    lines = [
        "[general]",
        'default_provider = "main"',
        'timezone = "Asia/Shanghai"',
        "[providers.main]",
        'type = "claude"',
        'api_key = "k"',
        "max_tokens = 1000",
        'models = ["model-a", "model-b"]',
        "[providers.main.prices.model-a]",
        "input = 3.0",
        "output = 15.0",
        "cache_read = 0.3",
        "cache_write = 3.75",
        "[budget]",
        *(f"{k} = {v}" for k, v in budget.items()),
    ]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_config(path, env={}, require_telegram=False)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        yield store
    finally:
        await store.close()


def request(text: str = "hi", max_tokens: int | None = None) -> ChatRequest:
    return ChatRequest("model-a", "sys", [Message("user", [TextBlock(text)])], [], max_tokens)


async def call(meter: Meter, provider: Provider, tag: CallTag | None = None, **kw: Any) -> None:
    stream = meter.stream(provider, request(), RetryPolicy(0), tag or CallTag("turn"), **kw)
    async for _ in stream:
        pass


def test_cost_uses_every_price_and_an_unknown_one_is_unknown() -> None:
    usage = Usage(input=1000, output=200, cache_read=10_000, cache_write=2000)
    assert cost_of(usage, PRICE) == pytest.approx((3000 + 3000 + 3000 + 7500) / 1e6)
    assert cost_of(usage, None) is None
    no_cache = ModelPrice(input=3.0, output=15.0)
    assert cost_of(usage, no_cache) is None  # read the cache, no price for that
    assert cost_of(Usage(1000, 200), no_cache) == pytest.approx(0.006)


def test_the_worst_case_is_all_input_at_the_dearest_price_and_all_output() -> None:
    req = request("hello there", max_tokens=500)
    tokens = estimate_request_tokens("sys\n", req.messages)
    assert worst_case(PRICE, req, 500) == pytest.approx((tokens * 3.75 + 500 * 15.0) / 1e6)
    assert worst_case(None, req, 500) is None


def test_money_reads_as_the_owner_expects() -> None:
    assert money(0.4213, "USD") == "$0.42"
    assert money(0.0042, "USD") == "$0.0042"
    assert money(12.5, "CNY") == "12.50 CNY"


async def test_a_call_that_could_pass_the_daily_limit_is_not_made(
    tmp_path: Path, store: Store
) -> None:
    clock = ManualClock(LATE)
    meter = Meter(config(tmp_path, daily=0.02, step=0.04), store, clock=clock.now, tz=TZ)
    provider = FixedProvider(Usage(1000, 1000))  # 0.018 a call
    await call(meter, provider)
    with pytest.raises(BudgetExceededError) as refused:
        await call(meter, provider)
    assert provider.calls == 1  # the second never reached the provider
    details = refused.value.details
    assert details["scope"] == "day" and details["limit"] == 0.02
    assert details["spent"] == pytest.approx(0.018)
    assert "$0.02" in str(refused.value) and "budget" in str(refused.value)

    # the owner's raise: today's limit grows by the step, and the same call goes through
    asked: list[float] = []

    async def raise_it(over: Any) -> bool:
        asked.append(over.limit)
        return True

    await call(meter, provider, admit=raise_it)
    assert asked == [0.02] and provider.calls == 2
    assert (await meter.limits()).daily == pytest.approx(0.06)

    # a "no" (or no one to ask) refuses, the provider untouched
    async def refuse(_over: Any) -> bool:
        return False

    await call(meter, provider)  # 0.036 spent + a worst case of ~0.015 ≤ 0.06: it fits
    with pytest.raises(BudgetExceededError):
        await call(meter, provider, admit=refuse)
    assert provider.calls == 3

    # the raise was for that day only: an hour later it is tomorrow, with the configured limit
    clock.advance(3600)
    assert (await meter.limits()).daily == 0.02
    await call(meter, provider)
    assert provider.calls == 4


async def test_the_month_counts_every_day_and_the_raises(tmp_path: Path, store: Store) -> None:
    clock = ManualClock(LATE)
    meter = Meter(config(tmp_path, monthly=0.03, step=0.02), store, clock=clock.now, tz=TZ)
    provider = FixedProvider(Usage(1000, 1000))
    await call(meter, provider)
    clock.advance(3600)  # the next day, same month
    with pytest.raises(BudgetExceededError) as refused:
        await call(meter, provider)
    assert refused.value.details["scope"] == "month"
    await meter.extend()
    await call(meter, provider)  # 0.018 + 0.018 ≤ 0.05
    assert (await meter.limits()).monthly == pytest.approx(0.05)


async def test_a_cron_job_has_its_own_daily_limit(tmp_path: Path, store: Store) -> None:
    clock = ManualClock(LATE)
    meter = Meter(config(tmp_path, cron_job_daily=0.02), store, clock=clock.now, tz=TZ)
    meter.job_budget = lambda job: 0.05 if job == "generous" else None
    provider = FixedProvider(Usage(1000, 1000))
    stingy = CallTag("cron", job_id="stingy")
    await call(meter, provider, stingy)
    asked: list[Any] = []

    async def ask(over: Any) -> bool:
        asked.append(over)
        return True

    with pytest.raises(BudgetExceededError) as refused:
        await call(meter, provider, stingy, admit=ask)
    assert refused.value.details["scope"] == "job" and asked == []  # a job's limit is not raised
    generous = CallTag("cron", job_id="generous")
    await call(meter, provider, generous)
    await call(meter, provider, generous)
    await call(meter, provider)  # the owner's own turns are not the job's
    assert provider.calls == 4


async def test_calls_in_flight_count_against_the_limit(tmp_path: Path, store: Store) -> None:
    meter = Meter(config(tmp_path, daily=0.025), store, clock=lambda: LATE, tz=TZ)
    gate = asyncio.Event()
    slow = FixedProvider(Usage(1000, 1000), gate)
    first = asyncio.create_task(call(meter, slow))
    await slow.called.wait()
    # the first may still cost its worst case (~0.015): a second would pass 0.025
    with pytest.raises(BudgetExceededError):
        await call(meter, FixedProvider(Usage(1000, 1000)))
    gate.set()
    await first
    assert meter._inflight == {}


async def test_a_call_without_a_price_cannot_be_stopped_but_is_recorded(
    tmp_path: Path, store: Store
) -> None:
    meter = Meter(config(tmp_path, daily=0.000001), store, clock=lambda: LATE, tz=TZ)
    provider = FixedProvider(Usage(10, 10))
    stream = meter.stream(
        provider, ChatRequest("model-b", "", request().messages), RetryPolicy(0), CallTag("api")
    )
    async for _ in stream:
        pass
    [row] = await meter.ledger.entries(UsageFilter())
    assert (row.model, row.cost, row.purpose) == ("model-b", None, "api")


async def test_the_owner_is_warned_once_a_day_past_the_share(tmp_path: Path, store: Store) -> None:
    clock = ManualClock(LATE)
    meter = Meter(config(tmp_path, daily=0.1, warn_at=0.3), store, clock=clock.now, tz=TZ)
    told: list[str] = []

    async def notify(text: str) -> None:
        told.append(text)

    meter.notify = notify
    provider = FixedProvider(Usage(1000, 1000))  # 0.018 a call
    await call(meter, provider)
    assert told == []
    await call(meter, provider)  # 0.036 ≥ 0.03
    await call(meter, provider)
    assert len(told) == 1 and "$0.04" in told[0] and "36%" in told[0]
    clock.advance(3600)  # tomorrow: a new day, a new warning when it is passed again
    await call(meter, provider)
    await call(meter, provider)
    assert len(told) == 2


async def test_the_ledger_sums_and_groups_by_the_owners_day(store: Store) -> None:
    ledger = UsageStore(store)
    shanghai_evening = datetime(2026, 11, 26, 15, 59, tzinfo=UTC)  # 23:59 local
    for at, model, cost in (
        (shanghai_evening, "a", 0.5),
        (shanghai_evening + timedelta(minutes=2), "a", None),  # 00:01 the next day
        (shanghai_evening + timedelta(minutes=3), "b", 0.25),
    ):
        usage = Usage(100, 10, 1000, 0)
        await ledger.record(UsageEntry(at, "p", model, "turn", usage, cost, channel="telegram"))
    days = await ledger.grouped(UsageFilter(), "day", TZ)
    assert [(d.key, d.calls, d.cost, d.unpriced) for d in days] == [
        ("2026-11-26", 1, 0.5, 0),
        ("2026-11-27", 2, 0.25, 1),
    ]
    total = await ledger.total(UsageFilter(since=shanghai_evening + timedelta(minutes=1)))
    assert (total.calls, total.usage, total.unpriced) == (2, Usage(200, 20, 2000, 0), 1)
    assert total.usage.cached_share == pytest.approx(2000 / 2200)
    models = await ledger.grouped(UsageFilter(), "model")
    assert [(m.key, m.calls) for m in models] == [("p:a", 2), ("p:b", 1)]
    assert await ledger.entries(UsageFilter(model="b")) != []
    assert await ledger.entries(UsageFilter(model="zzz")) == []


def priced_config(tmp_path: Path, price: str, **budget: Any) -> Config:
    """One provider whose model-a has ``price`` (TOML keys), and ``budget``."""
    lines = [
        "[general]",
        'default_provider = "main"',
        "[providers.main]",
        'type = "openai_compat"',
        'api_key = "k"',
        'models = ["model-a"]',
        "[providers.main.prices.model-a]",
        price,
        "[budget]",
        *(f"{k} = {v}" for k, v in budget.items()),
    ]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_config(path, env={}, require_telegram=False)


async def test_cache_use_without_cache_prices_counts_at_a_bound(
    tmp_path: Path, store: Store
) -> None:
    config = priced_config(tmp_path, "input = 10.0\noutput = 1000.0", daily=1.5)
    meter = Meter(config, store, clock=lambda: LATE, tz=TZ)
    provider = FixedProvider(Usage(0, 100, 10_000, 1000))  # a Claude call reads the cache
    made = 0
    with pytest.raises(BudgetExceededError):
        for _ in range(40):
            await call(meter, provider)
            made += 1
    [row, *_] = await meter.ledger.entries(UsageFilter())
    # shown as unknown, counted at reads × input + writes × 2 × input + output
    assert row.cost is None and row.bound == pytest.approx((10_000 * 10 + 1000 * 20 + 100e3) / 1e6)
    assert 0 < made < 10  # ~0.22 a call against 1.5: stopped well before 40


async def test_a_call_whose_provider_reports_no_usage_counts_at_its_worst_case(
    tmp_path: Path, store: Store
) -> None:
    config = priced_config(tmp_path, "input = 10.0\noutput = 1000.0", daily=20.0)
    meter = Meter(config, store, clock=lambda: LATE, tz=TZ)
    provider = FixedProvider(Usage(), reported=False, max_tokens=None)
    await call(meter, provider)
    [row] = await meter.ledger.entries(UsageFilter())
    assert (row.usage_known, row.cost) == (False, None)
    # no ceiling configured: none is sent (a reasoning model refuses max_tokens), the
    # worst case assumes the default one (`kernel check` warns of exactly this)
    assert provider.asked == [None]
    assert row.bound == pytest.approx(meter.worst(provider, request(max_tokens=4096)))
    assert await meter.spent(LATE - timedelta(days=1)) == pytest.approx(row.bound)


async def test_a_call_cancelled_after_its_answer_began_leaves_a_row(
    tmp_path: Path, store: Store
) -> None:
    meter = Meter(config(tmp_path, daily=10.0), store, clock=lambda: LATE, tz=TZ)
    provider = FixedProvider(Usage(1000, 1000), asyncio.Event(), text_first=True)
    running = asyncio.create_task(call(meter, provider))
    await provider.called.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    [row] = await meter.ledger.entries(UsageFilter())
    assert (row.usage_known, row.cost) == (False, None) and row.bound is not None
    assert row.bound > 0 and meter._inflight == {}


async def test_a_call_cancelled_before_the_provider_sent_anything_is_not_billed(
    tmp_path: Path, store: Store
) -> None:
    meter = Meter(config(tmp_path, daily=10.0), store, clock=lambda: LATE, tz=TZ)
    provider = FixedProvider(Usage(1000, 1000), asyncio.Event())
    provider.reports_usage_early = True  # as Anthropic's message_start does
    running = asyncio.create_task(call(meter, provider))
    await provider.called.wait()  # the request is out, nothing has come back yet
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    [row] = await meter.ledger.entries(UsageFilter())
    # nothing came back, not even the usage of the prompt's reading: not billed (issue 34)
    assert (row.usage_known, row.cost, row.bound) == (False, 0.0, None)
    assert await meter.spent(LATE - timedelta(days=1)) == 0


async def test_a_call_cancelled_unseen_counts_its_worst_case_without_early_usage(
    tmp_path: Path, store: Store
) -> None:
    meter = Meter(config(tmp_path, daily=10.0), store, clock=lambda: LATE, tz=TZ)
    provider = FixedProvider(Usage(1000, 1000), asyncio.Event())  # no usage until the end
    running = asyncio.create_task(call(meter, provider))
    await provider.called.wait()  # it may be reading and thinking, billed, unseen
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    [row] = await meter.ledger.entries(UsageFilter())
    assert (row.usage_known, row.cost) == (False, None)
    assert row.bound is not None and row.bound > 0  # what it read, at its worst
    assert await meter.spent(LATE - timedelta(days=1)) == pytest.approx(row.bound)


async def test_a_call_that_fails_before_answering_leaves_none(tmp_path: Path, store: Store) -> None:
    class Refusing(FixedProvider):
        async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
            raise ProviderError("no", status=400)
            yield  # pragma: no cover - an async generator

    meter = Meter(config(tmp_path, daily=10.0), store, clock=lambda: LATE, tz=TZ)
    with pytest.raises(ProviderError):
        await call(meter, Refusing(Usage()))
    assert await meter.ledger.entries(UsageFilter()) == []
    assert meter._inflight == {}


async def test_two_calls_crossing_the_share_at_once_warn_once(tmp_path: Path, store: Store) -> None:
    meter = Meter(config(tmp_path, daily=0.1, warn_at=0.3), store, clock=lambda: LATE, tz=TZ)
    told: list[str] = []

    async def notify(text: str) -> None:
        await asyncio.sleep(0)
        told.append(text)

    meter.notify = notify
    gate = asyncio.Event()
    first, second = FixedProvider(Usage(1000, 1000), gate), FixedProvider(Usage(1000, 1000), gate)
    both = asyncio.gather(call(meter, first), call(meter, second))
    await first.called.wait()
    await second.called.wait()
    gate.set()  # both answers land together, each past the share
    await both
    assert len(told) == 1


async def test_two_raises_at_once_are_two_steps(tmp_path: Path, store: Store) -> None:
    meter = Meter(config(tmp_path, daily=1.0, step=0.5), store, clock=lambda: LATE, tz=TZ)
    await asyncio.gather(meter.extend(), meter.extend())
    assert (await meter.limits()).daily == pytest.approx(2.0)


async def test_a_jobs_calls_in_flight_count_against_its_limit(tmp_path: Path, store: Store) -> None:
    meter = Meter(config(tmp_path, cron_job_daily=0.025), store, clock=lambda: LATE, tz=TZ)
    slow = FixedProvider(Usage(1000, 1000), asyncio.Event())
    tag = CallTag("cron", job_id="j")
    first = asyncio.create_task(call(meter, slow, tag))
    await slow.called.wait()
    with pytest.raises(BudgetExceededError) as refused:
        await call(meter, FixedProvider(Usage(1000, 1000)), tag)
    assert refused.value.details["scope"] == "job"
    assert slow.gate is not None
    slow.gate.set()
    await first


def test_a_sum_under_its_limit_never_reads_as_the_limit() -> None:
    assert (money_under(0.096999, 0.1, "USD"), share(0.096999, 0.1)) == ("$0.097", 97)
    assert (money_under(0.0996, 0.1, "USD"), share(0.0996, 0.1)) == ("$0.0996", 99)
    assert (money_under(0.0999, 0.1, "CNY"), share(0.0999, 0.1)) == ("0.0999 CNY", 99)
    assert (money_under(0.1, 0.1, "USD"), share(0.1, 0.1)) == ("$0.10", 100)
    assert (money_under(0.42, 0.0, "USD"), share(0.42, 0.0)) == ("$0.42", 0)
