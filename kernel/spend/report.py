"""What was spent, as every surface shows it (/usage, /status, ``GET /usage/summary``,
``kernel usage``): one :class:`UsageReport` built from the meter's ledger and limits.

A report holds plain values: today, this week (from Monday) and this month in the
owner's time zone, each with its totals and its groups by model, channel and cron
job; the last :data:`SPARK_DAYS` days (for a sparkline of the daily cost, or of the
tokens when no cost is known); and the budget's state. Costs sum the known costs
only; ``unpriced`` counts the calls whose cost is unknown, so no figure hides them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from kernel.spend.meter import Meter, Periods
from kernel.store.usage import UsageFilter, UsageTotal

SPARK = "▁▂▃▄▅▆▇█"
SPARK_DAYS = 14
PeriodName = Literal["today", "week", "month"]
PERIODS: tuple[PeriodName, ...] = ("today", "week", "month")
JobNames = Callable[[str], str | None]


def _no_names(_job_id: str) -> str | None:
    return None


def total_json(total: UsageTotal) -> dict[str, Any]:
    """A total as JSON, with its cached share (cache read / all input, 0..1)."""
    return {**total.as_json(), "cached_share": round(total.usage.cached_share, 4)}


@dataclass(frozen=True, slots=True)
class Period:
    """One period's totals and groups (each group's ``key``: ``provider:model``, the
    channel, the cron job's id). ``jobs`` maps a job id to its name when known."""

    name: PeriodName
    since: datetime
    total: UsageTotal
    by_model: tuple[UsageTotal, ...]
    by_channel: tuple[UsageTotal, ...]
    by_job: tuple[UsageTotal, ...]
    jobs: tuple[tuple[str, str], ...] = ()

    def as_json(self) -> dict[str, Any]:
        names = dict(self.jobs)
        return {
            "period": self.name,
            "since": self.since.isoformat(timespec="seconds"),
            **total_json(self.total),
            "by_model": [total_json(g) for g in self.by_model],
            "by_channel": [total_json(g) for g in self.by_channel],
            "by_job": [{**total_json(g), "name": names.get(g.key, "")} for g in self.by_job],
        }


@dataclass(frozen=True, slots=True)
class Day:
    """One day of the owner's time zone (``YYYY-MM-DD``); all zero without calls."""

    date: str
    calls: int = 0
    tokens: int = 0  # all input and output
    cost: float = 0.0
    unpriced: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "date": self.date,
            "calls": self.calls,
            "tokens": self.tokens,
            "cost": round(self.cost, 6),
            "unpriced_calls": self.unpriced,
        }


@dataclass(frozen=True, slots=True)
class BudgetState:
    """The limits in force now (0: none; ``raised_today`` included in ``daily``) and
    what was spent against them (known costs and bounds: what the check counts)."""

    currency: str
    daily: float
    monthly: float
    raised_today: float
    step: float
    spent_today: float
    spent_month: float

    def as_json(self) -> dict[str, Any]:
        return {
            "currency": self.currency,
            "daily": self.daily,
            "monthly": self.monthly,
            "raised_today": self.raised_today,
            "step": self.step,
            "spent_today": round(self.spent_today, 6),
            "spent_month": round(self.spent_month, 6),
        }


def sparkline(values: Sequence[float]) -> str:
    """One block per value, ``▁`` for nothing, ``█`` for the largest."""
    top = max(values, default=0)
    if top <= 0:
        return SPARK[0] * len(values)
    last = len(SPARK) - 1
    return "".join(SPARK[max(0, min(last, round(v / top * last)))] for v in values)


@dataclass(frozen=True, slots=True)
class UsageReport:
    at: datetime  # when it was made, in the owner's time zone
    currency: str
    periods: tuple[Period, ...]  # today, week, month
    days: tuple[Day, ...]  # the last SPARK_DAYS days, oldest first, today last
    budget: BudgetState

    def period(self, name: PeriodName) -> Period:
        return next(p for p in self.periods if p.name == name)

    @property
    def spark_of(self) -> Literal["cost", "tokens"]:
        """What the sparkline draws: the daily cost, or the tokens when calls were made
        and none of them has a known cost."""
        if any(d.cost > 0 for d in self.days) or not any(d.tokens for d in self.days):
            return "cost"
        return "tokens"

    @property
    def sparkline(self) -> str:
        if self.spark_of == "cost":
            return sparkline([d.cost for d in self.days])
        return sparkline([float(d.tokens) for d in self.days])

    def as_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(timespec="seconds"),
            "currency": self.currency,
            "periods": [p.as_json() for p in self.periods],
            "days": [d.as_json() for d in self.days],
            "sparkline": self.sparkline,
            "sparkline_of": self.spark_of,
            "budget": self.budget.as_json(),
        }


async def build_report(meter: Meter, job_names: JobNames = _no_names) -> UsageReport:
    """The report as of now (the meter's clock); ``job_names`` names a cron job by id
    (None: unknown, e.g. deleted since; its id is shown)."""
    periods = meter.periods()
    tz = periods.now.tzinfo
    week_start = periods.day_start - timedelta(days=periods.now.weekday())
    spans: tuple[tuple[PeriodName, datetime], ...] = (
        ("today", periods.day_start),
        ("week", week_start),
        ("month", periods.month_start),
    )
    built = [await _period(meter, name, since, job_names) for name, since in spans]
    first = periods.day_start - timedelta(days=SPARK_DAYS - 1)
    grouped = await meter.ledger.grouped(UsageFilter(since=first), "day", tz)
    by_day = {g.key: g for g in grouped}
    days: list[Day] = []
    for back in range(SPARK_DAYS - 1, -1, -1):
        date = (periods.day_start - timedelta(days=back)).date().isoformat()
        g = by_day.get(date)
        if g is None:
            days.append(Day(date))
        else:
            tokens = g.usage.prompt + g.usage.output
            days.append(Day(date, g.calls, tokens, g.cost, g.unpriced))
    state = await budget_state(meter, built[0].total.charged, built[2].total.charged, periods)
    return UsageReport(periods.now, state.currency, tuple(built), tuple(days), state)


async def budget_state(
    meter: Meter,
    spent_today: float | None = None,
    spent_month: float | None = None,
    periods: Periods | None = None,
) -> BudgetState:
    """The budget now; what was spent is read from the ledger unless given."""
    periods = periods or meter.periods()
    limits = await meter.limits(periods)
    budget = meter.config.budget
    if spent_today is None:
        spent_today = await meter.spent(periods.day_start)
    if spent_month is None:
        spent_month = await meter.spent(periods.month_start)
    return BudgetState(
        currency=budget.currency,
        daily=limits.daily,
        monthly=limits.monthly,
        raised_today=limits.raised_today,
        step=budget.step,
        spent_today=spent_today,
        spent_month=spent_month,
    )


async def _period(meter: Meter, name: PeriodName, since: datetime, names: JobNames) -> Period:
    ledger = meter.ledger
    where = UsageFilter(since=since)
    jobs = tuple(g for g in await ledger.grouped(where, "job") if g.key)
    known = tuple((g.key, n) for g in jobs if (n := names(g.key)))
    return Period(
        name,
        since,
        await ledger.total(where),
        tuple(await ledger.grouped(where, "model")),
        tuple(await ledger.grouped(where, "channel")),
        jobs,
        known,
    )
