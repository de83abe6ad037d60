"""/usage and the spend lines of /status, in the catalogue's words: short lines that
fit a phone screen, money through :func:`kernel.spend.money`."""

from __future__ import annotations

from collections.abc import Sequence

from kernel.core.i18n import t
from kernel.core.turns import Turn
from kernel.spend import money, places_under
from kernel.spend.report import PERIODS, BudgetState, Period, PeriodName, UsageReport
from kernel.store.usage import UsageTotal

GROUP_LINES = 5  # the largest this many groups of each kind; the rest are counted

# What /usage accepts as its argument (the period its groups are of).
PERIOD_WORDS: dict[str, PeriodName] = {
    "today": "today",
    "day": "today",
    "今日": "today",
    "今天": "today",
    "week": "week",
    "本周": "week",
    "month": "month",
    "本月": "month",
}


def tokens(count: int) -> str:
    """850, 12.3K, 4.5M."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}K"
    return f"{count / 1_000_000:.1f}M"


def cost_text(cost: float, calls: int, unpriced: int, currency: str) -> str:
    """The known cost; "unknown" when no call's price is known, and the calls of
    unknown price named beside a partial sum."""
    if calls and unpriced == calls:
        return t("usage.cost_unknown")
    if unpriced:
        return t("usage.cost_partial", cost=money(cost, currency), unpriced=unpriced)
    return money(cost, currency)


def _cost(total: UsageTotal, currency: str) -> str:
    """A total's one figure, :attr:`UsageTotal.charged` (what the budget counts), with
    the calls it leaves out (no price) or estimates, and those not billed, named."""
    priceless = total.unpriced - total.bounded
    if total.calls and priceless == total.calls:
        return t("usage.cost_unknown")
    text = money(total.charged, currency)
    if priceless:
        text = t("usage.cost_partial", cost=text, unpriced=priceless)
    if total.bounded:
        text += t("usage.cost_estimated", calls=total.bounded)
    if total.unbilled:
        text += t("usage.cost_unbilled", calls=total.unbilled)
    return text


def period_line(period: Period, currency: str) -> str:
    total = period.total
    if not total.calls:
        return t("usage.period_none", period=t(f"usage.period_{period.name}"))
    return t(
        "usage.period",
        period=t(f"usage.period_{period.name}"),
        cost=_cost(total, currency),
        calls=total.calls,
        input=tokens(total.usage.prompt),
        cached=round(total.usage.cached_share * 100),
        output=tokens(total.usage.output),
    )


def _groups(header: str, groups: Sequence[UsageTotal], label: dict[str, str], cur: str) -> str:
    parts = [
        t("usage.group", name=label.get(g.key, g.key), cost=_cost(g, cur), calls=g.calls)
        for g in groups[:GROUP_LINES]
    ]
    if len(groups) > GROUP_LINES:
        parts.append(t("usage.more", count=len(groups) - GROUP_LINES))
    return header + "\n" + "\n".join(parts)


def _places(state: BudgetState) -> int | None:
    """The decimals both sums need so that a sum under its limit never reads as the
    limit ($0.097 / $0.10), the same for today and the month."""
    needed = [
        places_under(state.spent_today, state.daily),
        places_under(state.spent_month, state.monthly),
    ]
    return max((p for p in needed if p is not None), default=None)


def budget_today(state: BudgetState, places: int | None = None) -> str:
    """Today's spend against the daily limit (and what the owner raised it by)."""
    cur = state.currency
    places = _places(state) if places is None else places
    today = t(
        "usage.budget_today",
        spent=money(state.spent_today, cur, places),
        limit=money(state.daily, cur) if state.daily else t("usage.no_limit"),
    )
    if state.raised_today:
        today += t("usage.budget_raised", raised=money(state.raised_today, cur))
    return today


def budget_line(state: BudgetState) -> str:
    """Today and this month against their limits, both sums to the same places."""
    cur = state.currency
    places = _places(state)
    month = t(
        "usage.budget_month",
        spent=money(state.spent_month, cur, places),
        limit=money(state.monthly, cur) if state.monthly else t("usage.no_limit"),
    )
    return t("usage.budget", today=budget_today(state, places), month=month)


def render_report(report: UsageReport, groups_of: PeriodName = "month") -> str:
    """The /usage text: the three periods, the 14-day line, the groups of ``groups_of``
    (by model, channel and cron job), the budget."""
    cur = report.currency
    lines = [t("usage.header")]
    lines += [period_line(report.period(name), cur) for name in PERIODS]
    period = report.period(groups_of)
    name = t(f"usage.period_{groups_of}")
    total = period.total
    if total.calls:
        u = total.usage
        lines.append(
            t(
                "usage.tokens",
                period=name,
                fresh=tokens(u.input),
                read=tokens(u.cache_read),
                written=tokens(u.cache_write),
                output=tokens(u.output),
            )
        )
    if priceless := total.unpriced - total.bounded:
        lines.append(t("usage.unpriced", period=name, calls=priceless))
    lines.append(t(f"usage.spark_{report.spark_of}", days=len(report.days), line=report.sparkline))
    if total.calls:
        lines.append(_groups(t("usage.by_model", period=name), period.by_model, {}, cur))
        channels = {"": t("usage.channel_other")}
        lines.append(_groups(t("usage.by_channel"), period.by_channel, channels, cur))
        if period.by_job:
            jobs = dict(period.jobs)
            lines.append(_groups(t("usage.by_job"), period.by_job, jobs, cur))
    lines.append(budget_line(report.budget))
    return "\n".join(lines)


def turn_line(turn: Turn, currency: str) -> str:
    """What the running turn's model calls used so far (/status)."""
    return t(
        "usage.turn",
        calls=turn.calls,
        input=tokens(turn.usage.prompt),
        cached=round(turn.usage.cached_share * 100),
        output=tokens(turn.usage.output),
        cost=cost_text(turn.cost, turn.calls, turn.unpriced, currency),
    )
