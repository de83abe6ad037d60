"""Spend control (issue 16): what every model call costs, and the limits it may not pass.

Public API: :class:`~kernel.spend.meter.Meter` (the budget before a call, the ledger
after it; ``Meter.stream`` is how a model is called), :class:`~kernel.spend.meter.CallTag`
(what a call is for), :class:`~kernel.spend.meter.Over` (a call not admitted), and in
``prices``: :func:`price_of`, :func:`cost_of`, :func:`worst_case`, :func:`money`,
:func:`money_under`, :func:`places_under` and :func:`share` (a sum beside its limit);
in ``report``: :func:`build_report` → :class:`UsageReport` (what every surface shows
of the ledger) and :func:`budget_state`. The ledger's table is :mod:`kernel.store.usage`.
"""

from __future__ import annotations

from kernel.spend.meter import CallTag, Meter, Over
from kernel.spend.prices import (
    cost_of,
    money,
    money_under,
    places_under,
    price_of,
    share,
    worst_case,
)
from kernel.spend.report import UsageReport, budget_state, build_report

__all__ = [
    "CallTag",
    "Meter",
    "Over",
    "UsageReport",
    "budget_state",
    "build_report",
    "cost_of",
    "money",
    "money_under",
    "places_under",
    "price_of",
    "share",
    "worst_case",
]
