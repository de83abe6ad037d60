"""``/usage``: the usage ledger (one row per model call) filtered, summed and grouped,
and ``/usage/summary``: the report /usage shows in Telegram (today, this week, this
month, the last 14 days, the budget).

Dates are days of the owner's time zone (``general.timezone``): ``since=2026-11-01``
starts at that midnight, ``until=2026-11-30`` includes the whole 30th. A date-time
without an offset is read in that zone too.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Annotated, Literal, cast

from aiohttp import web
from pydantic import Field

from kernel.core.i18n import t
from kernel.gateway.api import (
    Router,
    bounded,
    deps_of,
    invalid,
    json_response,
    query_int,
    query_param,
)
from kernel.gateway.schema import Shape
from kernel.spend import build_report
from kernel.spend.report import total_json
from kernel.store.usage import GROUPS, PURPOSES, GroupBy, UsageFilter

router = Router("usage", "The usage ledger: what every model call used and cost")

MAX_ENTRIES = 1000
MAX_SESSION = 2**62
MAX_TEXT = 256  # a provider, model, channel or job id filter
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
Filter = Annotated[str, Field(max_length=MAX_TEXT)]


class UsageTotalInfo(Shape):
    """The sum of a group of calls. ``cost`` sums the known costs; ``unpriced_calls``
    counts the calls of unknown cost; ``charged`` adds the bounds of those that have one
    (what the budget counts); ``cached_share`` = cache read / all input."""

    key: str
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float
    unpriced_calls: int
    charged: float
    cached_share: float


class UsageEntryInfo(Shape):
    """One model call. ``cost`` null: its price is unknown (``cost_bound``: the most it
    can have been, when known). ``usage_known`` false: no usage was reported (the
    provider sent none, or the call was cancelled or cut off after its answer began).
    ``retries``: failed attempts before it succeeded."""

    id: int
    at: str
    provider: str
    model: str
    purpose: str
    session_id: int | None = None
    channel: str
    job_id: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    retries: int
    cost: float | None = None
    cost_bound: float | None = None
    usage_known: bool
    seconds: float | None = None


class UsageAnswer(Shape):
    since: str | None = None
    until: str | None = None
    currency: str
    total: UsageTotalInfo
    group_by: str | None = None
    groups: list[UsageTotalInfo]
    entries: list[UsageEntryInfo]


def parse_when(name: str, raw: str, tz: tzinfo, *, end: bool) -> datetime:
    """A date (the owner's day: its start, or with ``end`` the next day's start) or an
    ISO date-time (in the owner's zone without an offset), as UTC. 400 otherwise."""
    try:
        if _DATE.fullmatch(raw):
            day = date.fromisoformat(raw) + timedelta(days=1 if end else 0)
            when = datetime(day.year, day.month, day.day, tzinfo=tz)
        else:
            when = datetime.fromisoformat(raw)
            if when.tzinfo is None:
                when = when.replace(tzinfo=tz)
        return when.astimezone(UTC)
    except (ValueError, OverflowError):
        raise invalid(t("gw.bad_query_time", name=name, tz=str(tz)), field=name) from None


def _choice(request: web.Request, name: str, allowed: tuple[str, ...]) -> str:
    raw = request.query.get(name, "")
    if raw and raw not in allowed:
        raise invalid(
            t("gw.bad_query_choice", name=name, allowed=", ".join(allowed)),
            field=name,
            allowed=list(allowed),
        )
    return raw


def _text(request: web.Request, name: str) -> str:
    raw = request.query.get(name, "")
    if len(raw) > MAX_TEXT:
        raise invalid(t("gw.field_too_long", field=name, limit=MAX_TEXT), field=name)
    return raw


def read_filter(request: web.Request, tz: tzinfo) -> UsageFilter:
    since_raw, until_raw = request.query.get("since"), request.query.get("until")
    since = parse_when("since", since_raw, tz, end=False) if since_raw else None
    until = parse_when("until", until_raw, tz, end=True) if until_raw else None
    if since is not None and until is not None and since >= until:
        raise invalid(t("gw.bad_query_range"), field="until")
    session: int | None = None
    if "session_id" in request.query:
        session = query_int(request, "session_id", 0, maximum=MAX_SESSION)
    return UsageFilter(
        since=since,
        until=until,
        provider=_text(request, "provider"),
        model=_text(request, "model"),
        purpose=_choice(request, "purpose", PURPOSES),
        channel=_text(request, "channel"),
        job_id=_text(request, "job_id"),
        session_id=session,
    )


def _iso(when: datetime | None, tz: tzinfo) -> str | None:
    return when.astimezone(tz).isoformat(timespec="seconds") if when is not None else None


@router.get(
    "/usage",
    summary="Model calls from the usage ledger: their total, groups and newest rows",
    params=(
        query_param("since", str, "a date (YYYY-MM-DD, owner's zone) or ISO date-time"),
        query_param("until", str, "exclusive; a date includes that whole day"),
        query_param("provider", Filter),
        query_param("model", Filter),
        query_param("purpose", Literal[PURPOSES]),
        query_param("channel", Filter),
        query_param("job_id", Filter, "a cron job's id"),
        query_param("session_id", bounded(0, MAX_SESSION), "the N of chat-N"),
        query_param("group_by", Literal[GROUPS], "day: days of the owner's zone"),
        query_param("limit", bounded(0, MAX_ENTRIES), "how many rows, newest first (0)"),
    ),
    response=UsageAnswer,
)
async def usage(request: web.Request) -> web.Response:
    deps = deps_of(request)
    meter = deps.agent.meter
    tz = deps.agent.tz
    where = read_filter(request, tz)
    by = _choice(request, "group_by", GROUPS)
    limit = query_int(request, "limit", 0, maximum=MAX_ENTRIES)
    total = await meter.ledger.total(where)
    groups = await meter.ledger.grouped(where, cast(GroupBy, by), tz) if by else []
    entries = await meter.ledger.entries(where, limit) if limit else []
    return json_response(
        {
            "since": _iso(where.since, tz),
            "until": _iso(where.until, tz),
            "currency": deps.config.budget.currency,
            "total": total_json(total),
            "group_by": by or None,
            "groups": [total_json(g) for g in groups],
            "entries": [e.as_json() for e in entries],
        }
    )


class JobTotalInfo(UsageTotalInfo):
    """A cron job's calls: ``key`` is its id, ``name`` its name ("" once deleted)."""

    name: str


class PeriodInfo(UsageTotalInfo):
    """Today, this week (from Monday) or this month, in the owner's time zone."""

    period: Literal["today", "week", "month"]
    since: str
    key: str = ""
    by_model: list[UsageTotalInfo]
    by_channel: list[UsageTotalInfo]
    by_job: list[JobTotalInfo]


class DayInfo(Shape):
    date: str
    calls: int
    tokens: int
    cost: float
    unpriced_calls: int


class BudgetInfo(Shape):
    """The limits in force (0: none; ``raised_today`` is included in ``daily`` and
    ``monthly``) and what was spent against them."""

    currency: str
    daily: float
    monthly: float
    raised_today: float
    step: float
    spent_today: float
    spent_month: float


class UsageSummary(Shape):
    at: str
    currency: str
    periods: list[PeriodInfo]
    days: list[DayInfo]
    sparkline: str
    sparkline_of: Literal["cost", "tokens"]
    budget: BudgetInfo


@router.get(
    "/usage/summary",
    summary="What /usage shows: today, this week, this month, 14 days, the budget",
    response=UsageSummary,
)
async def summary(request: web.Request) -> web.Response:
    deps = deps_of(request)
    jobs = deps.cron.jobs

    def job_name(job_id: str) -> str | None:
        job = jobs.get(job_id)
        return job.spec.name if job is not None else None

    report = await build_report(deps.agent.meter, job_name)
    return json_response(report.as_json())
