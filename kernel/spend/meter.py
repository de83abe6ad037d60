"""The meter every model call goes through: the budget checked before it, the ledger
written after it (issue 16).

:meth:`Meter.stream` is ``stream_with_retry`` with both ends added. Before the call it
sums what was spent today, this month and (for a cron job) by the job today, adds what
calls in flight may still cost and this call's worst case (:func:`worst_case`); a call
that could pass a limit is not made. ``admit`` (a turn the owner watches) may ask the
owner to raise today's limit by ``budget.step``: a yes raises it and the check runs
again; anything else raises :class:`BudgetExceededError`. After the call its usage is
recorded with its cost (None when the price is unknown), and the owner is warned once
per day and per month when ``budget.warn_at`` of a limit is passed.

A raise is stored as an extension of that day (setting ``budget.extensions``): it adds
to that day's limit and to its month's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from kernel.config import Config
from kernel.core.errors import BudgetExceededError, KernelError
from kernel.core.i18n import t
from kernel.core.provider import (
    DEFAULT_MAX_TOKENS,
    ChatRequest,
    Completion,
    Provider,
    RetryPolicy,
    Sleep,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    UsageSeen,
    output_ceiling,
    stream_with_retry,
)
from kernel.core.usage import Usage, estimate_tokens
from kernel.spend.prices import (
    bound_of,
    cost_of,
    money,
    money_under,
    price_of,
    share,
    worst_case,
    writes_cache,
)
from kernel.store.database import RowId
from kernel.store.db import Store
from kernel.store.usage import Purpose, UsageEntry, UsageFilter, UsageStore

log = logging.getLogger(__name__)

EXTENSIONS = "budget.extensions"  # setting: {"YYYY-MM-DD": amount raised that day}
WARNED = "budget.warned"  # setting: {"day": "YYYY-MM-DD", "month": "YYYY-MM"} last warned

# The owner's own channels: only a turn there may ask to raise a day or month limit
# (elsewhere it ends with budget_exceeded), and only a notice there says what was spent.
OWNER_CHANNELS = ("telegram", "console")

Scope = Literal["day", "month", "job"]
Notify = Callable[[str], Awaitable[None]]
JobBudget = Callable[[str], float | None]
# Told of every model call once it ended: its ledger row (``id`` 0 when none was
# written: the call failed before the provider answered) and how it ended ("ok",
# "cancelled" or the error's code). The audit trail listens (issue 23).
# (the entry, how the call ended, the id its ledger row gets when written: RowId)
CallHook = Callable[[UsageEntry, str, RowId], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CallTag:
    """What a call is for, as the ledger records it."""

    purpose: Purpose
    session_id: int | None = None
    channel: str = ""
    job_id: str = ""
    turn_id: str = ""


@dataclass(frozen=True, slots=True)
class Over:
    """A call the budget does not admit: the limit of ``scope``, what was spent against
    it (calls in flight included) and the call's worst case."""

    scope: Scope
    spent: float
    limit: float
    worst: float
    currency: str

    def describe(self) -> str:
        return t(
            "budget.over",
            scope=t(f"budget.scope_{self.scope}"),
            spent=money_under(self.spent, self.limit, self.currency),
            limit=money(self.limit, self.currency),
            worst=money(self.worst, self.currency),
        )

    def error(self) -> BudgetExceededError:
        details: dict[str, object] = {
            "scope": self.scope,
            "spent": round(self.spent, 6),
            "limit": round(self.limit, 6),
            "worst_case": round(self.worst, 6),
            "currency": self.currency,
        }
        return BudgetExceededError(t("budget.over_fix", over=self.describe()), details)


@dataclass(frozen=True, slots=True)
class Periods:
    """The owner's day and month that contain ``now``."""

    now: datetime
    day_start: datetime
    month_start: datetime

    @property
    def day(self) -> str:
        return self.day_start.date().isoformat()

    @property
    def month(self) -> str:
        return self.day[:7]


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits in force now (0: none), extensions included."""

    daily: float
    monthly: float
    raised_today: float


class Meter:
    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        clock: Callable[[], datetime],
        tz: ZoneInfo,
    ) -> None:
        self.config = config
        self.store = store
        self.ledger = UsageStore(store)
        self._clock = clock
        self._tz = tz
        # reservation id → (the call's worst case, its cron job id or "")
        self._inflight: dict[str, tuple[float, str]] = {}
        self._lock = asyncio.Lock()  # one check-and-reserve at a time
        self._settings = asyncio.Lock()  # one read-modify-write of a budget setting at a time
        # Set by the composition root: how the owner is told (the 80% warning), and a
        # cron job's own daily limit (its runtime.budget_daily; None: the default).
        self.notify: Notify | None = None
        self.job_budget: JobBudget | None = None
        self.on_call: CallHook | None = None

    # ----- periods and limits ----------------------------------------------------------

    def periods(self) -> Periods:
        now = self._clock().astimezone(self._tz)
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return Periods(now, day, day.replace(day=1))

    async def limits(self, periods: Periods | None = None) -> Limits:
        periods = periods or self.periods()
        budget = self.config.budget
        raised = await self._extensions()
        today = raised.get(periods.day, 0.0)
        month = sum(v for k, v in raised.items() if k.startswith(periods.month))
        return Limits(
            daily=budget.daily + today if budget.daily else 0.0,
            monthly=budget.monthly + month if budget.monthly else 0.0,
            raised_today=today,
        )

    def job_limit(self, job_id: str) -> float:
        """A cron job's daily limit (0: none): its own, else ``budget.cron_job_daily``."""
        own = self.job_budget(job_id) if self.job_budget is not None and job_id else None
        return self.config.budget.cron_job_daily if own is None else own

    async def spent(self, since: datetime, job_id: str = "") -> float:
        """What calls since ``since`` count against a limit: their known costs, and the
        bounds of those whose cost is unknown but bounded (``UsageTotal.charged``)."""
        return (await self.ledger.total(UsageFilter(since=since, job_id=job_id))).charged

    async def extend(self) -> float:
        """Raise today's limit by ``budget.step``; returns today's limit now."""
        async with self._settings:  # two presses at once are two steps
            periods = self.periods()
            raised = await self._extensions()
            raised = {k: v for k, v in raised.items() if k.startswith(periods.month)}
            raised[periods.day] = raised.get(periods.day, 0.0) + self.config.budget.step
            await self.store.set_setting(EXTENSIONS, json.dumps(raised))
        log.info("budget: today's limit raised by the owner")
        return (await self.limits(periods)).daily

    async def _extensions(self) -> dict[str, float]:
        raw = await self.store.get_setting(EXTENSIONS)
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}

    # ----- before a call ---------------------------------------------------------------

    def worst(self, provider: Provider, request: ChatRequest) -> float | None:
        """The most ``request`` to ``provider`` can cost; None when its price is unknown."""
        price = price_of(self.config, provider.name, request.model)
        writes = writes_cache(self.config, provider.name)
        return worst_case(price, request, _ceiling(provider, request), writes_cache=writes)

    async def check(self, provider: Provider, request: ChatRequest, tag: CallTag) -> Over | None:
        """The limit this call could pass, if any (a call with no known price passes:
        nothing can be said of it, and ``kernel check`` names such models)."""
        worst = self.worst(provider, request)
        return None if worst is None else await self._over(worst, tag)

    async def _over(self, worst: float, tag: CallTag) -> Over | None:
        budget = self.config.budget
        job_limit = self.job_limit(tag.job_id) if tag.job_id else 0.0
        if not (budget.daily or budget.monthly or job_limit):
            return None
        periods = self.periods()
        inflight = sum(worst for worst, _ in self._inflight.values())
        currency = budget.currency
        if job_limit:
            running = sum(w for w, job in self._inflight.values() if job == tag.job_id)
            spent = await self.spent(periods.day_start, tag.job_id) + running
            if spent + worst > job_limit:
                return Over("job", spent, job_limit, worst, currency)
        limits = await self.limits(periods)
        for scope, limit, since in (
            ("day", limits.daily, periods.day_start),
            ("month", limits.monthly, periods.month_start),
        ):
            if not limit:
                continue
            spent = await self.spent(since) + inflight
            if spent + worst > limit:
                return Over(scope, spent, limit, worst, currency)  # type: ignore[arg-type]
        return None

    # ----- the call ----------------------------------------------------------------------

    async def stream(
        self,
        provider: Provider,
        request: ChatRequest,
        policy: RetryPolicy,
        tag: CallTag,
        *,
        sleep: Sleep = asyncio.sleep,
        admit: Callable[[Over], Awaitable[bool]] | None = None,
        counted: Callable[[UsageEntry], None] | None = None,
        retrying: Callable[[int, Exception], None] | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """``stream_with_retry`` behind the budget, its usage recorded (and handed to
        ``counted``; ``retrying`` is told of each retry: its number and its cause).
        Raises :class:`BudgetExceededError` before anything is sent when the call is not
        admitted (``admit`` is asked first, for a day or month limit)."""
        reservation, worst = await self._admit(provider, request, tag, admit)
        retries = 0
        answering = False  # the provider began to answer: the call is billed
        interrupted = False  # cancelled or closed by the caller mid-call
        recorded = False
        failure: BaseException | None = None  # why the call ended without an answer
        produced: list[str] = []  # what the model wrote so far (text and thinking)
        seen: Usage | None = None  # the usage the provider reported before the end

        def on_retry(attempt: int, _delay: float, exc: Exception) -> None:
            nonlocal retries
            retries = attempt
            if retrying is not None:
                retrying(attempt, exc)

        async def note(
            usage: Usage, known: bool, bound: float | None, outcome: str, billed: bool = True
        ) -> None:
            nonlocal recorded
            recorded = True
            entry = await self.record(
                provider.name,
                request.model,
                usage,
                tag,
                retries,
                known=known,
                worst=bound,
                outcome=outcome,
                billed=billed,
            )
            if counted is not None:
                counted(entry)

        try:
            async for event in stream_with_retry(
                provider, request, policy, sleep=sleep, on_retry=on_retry
            ):
                if isinstance(event, UsageSeen):
                    seen = event.usage  # the meter's own: callers never see it
                    continue
                answering = True
                if isinstance(event, TextDelta | ThinkingDelta):
                    produced.append(event.text)
                if isinstance(event, Completion):
                    # Shielded: a cancel now still leaves the call's row whole.
                    await asyncio.shield(note(event.usage, event.usage_reported, worst, "ok"))
                yield event
        except (asyncio.CancelledError, GeneratorExit):
            interrupted = True
            raise
        except Exception as exc:
            failure = exc
            raise
        finally:
            self._inflight.pop(reservation, None)
            if not recorded and (answering or interrupted):
                # Cancelled, or cut off after the answer began: priced from the usage
                # the provider reported; cancelled before a provider that reports its
                # usage at once sent anything: not billed (any other may have billed
                # what it read and thought unseen: counted at its worst case).
                outcome = "cancelled" if interrupted else _code(failure)
                early = provider.reports_usage_early
                unbilled = interrupted and not answering and seen is None and early
                with contextlib.suppress(Exception):
                    usage, known, bound = self._unfinished(provider, request, seen, produced)
                    await asyncio.shield(note(usage, known, bound, outcome, not unbilled))
            elif not recorded and failure is not None:
                # Failed before the provider answered: nothing billed, no ledger row;
                # the call is still told (the audit keeps every call).
                entry = UsageEntry(
                    at=self._clock(),
                    provider=provider.name,
                    model=request.model,
                    purpose=tag.purpose,
                    usage=Usage(),
                    cost=None,
                    usage_known=False,
                    session_id=tag.session_id,
                    channel=tag.channel,
                    job_id=tag.job_id,
                    turn_id=tag.turn_id,
                    retries=retries,
                )
                await asyncio.shield(self._tell(entry, _code(failure), RowId()))

    def _unfinished(
        self, provider: Provider, request: ChatRequest, seen: Usage | None, produced: list[str]
    ) -> tuple[Usage, bool, float | None]:
        """The usage of a call that ended without its answer (cancelled, or cut off after
        it began), as :meth:`record` takes it: the provider bills what it read and wrote.
        The usage it reported, its output at least what was streamed; with none reported
        the usage is unknown, and the budget counts the input's worst case and what was
        written."""
        written = estimate_tokens("".join(produced))
        if seen is not None:
            return replace(seen, output=max(seen.output, written)), True, None
        price = price_of(self.config, provider.name, request.model)
        writes = writes_cache(self.config, provider.name)
        return Usage(), False, worst_case(price, request, written, writes_cache=writes)

    async def _admit(
        self,
        provider: Provider,
        request: ChatRequest,
        tag: CallTag,
        admit: Callable[[Over], Awaitable[bool]] | None,
    ) -> tuple[str, float | None]:
        worst = self.worst(provider, request)
        while True:
            async with self._lock:
                over = None if worst is None else await self._over(worst, tag)
                if over is None:
                    reservation = uuid.uuid4().hex
                    self._inflight[reservation] = (worst or 0.0, tag.job_id)
                    return reservation, worst
            if over.scope == "job" or admit is None or not await admit(over):
                raise over.error()
            await self.extend()

    # ----- after a call ------------------------------------------------------------------

    async def record(
        self,
        provider: str,
        model: str,
        usage: Usage,
        tag: CallTag,
        retries: int = 0,
        *,
        seconds: float | None = None,
        known: bool = True,
        worst: float | None = None,
        outcome: str = "ok",
        billed: bool = True,
    ) -> UsageEntry:
        """Write one ledger row (the cost from the configured price) and warn the owner
        when a limit's warning share is passed. ``known`` False: no usage was reported,
        so the cost is unknown and the budget counts ``worst``. A ledger that cannot be
        written is logged, never the caller's failure: the answer matters more than its
        record. ``on_call`` is told of the row (``outcome``: how the call ended).
        ``billed`` False: a call cancelled before the provider sent anything (its cost 0)."""
        price = price_of(self.config, provider, model)
        cost = cost_of(usage, price) if known else (None if billed else 0.0)
        bound = (bound_of(usage, price) if known else worst) if cost is None else None
        entry = UsageEntry(
            at=self._clock(),
            provider=provider,
            model=model,
            purpose=tag.purpose,
            usage=usage,
            cost=cost,
            bound=bound,
            usage_known=known,
            session_id=tag.session_id,
            channel=tag.channel,
            job_id=tag.job_id,
            turn_id=tag.turn_id,
            retries=retries,
            seconds=seconds,
        )
        # The row is queued, not waited for: the audit row naming it (``on_call``) and
        # the turn's next records go with it, in one hop (issue 37). Only a warning
        # to give waits for it: the spend it sums must hold this call.
        row = RowId()
        try:
            written = self.ledger.record_soon(entry, row)
            if entry.charged and self._warns():
                entry = replace(entry, id=await written)
                async with self._settings:  # two calls at once warn once
                    await self._warn()
            else:
                written.add_done_callback(_unrecorded)
        except KernelError:
            log.warning("could not record a model call's usage", exc_info=True)
        await self._tell(entry, outcome, row)
        return entry

    def _warns(self) -> bool:
        """Whether a call may bring a warning of spend (a limit set, someone to tell)."""
        budget = self.config.budget
        return bool(budget.daily or budget.monthly) and self.notify is not None

    async def _tell(self, entry: UsageEntry, outcome: str, row: RowId) -> None:
        if self.on_call is None:
            return
        try:
            await self.on_call(entry, outcome, row)
        except Exception as exc:  # a listener's failure is never the call's
            log.warning("a model call's listener failed: %s", type(exc).__name__)

    async def _warn(self) -> None:
        budget = self.config.budget
        if not self._warns() or self.notify is None:
            return
        periods = self.periods()
        limits = await self.limits(periods)
        raw = await self.store.get_setting(WARNED)
        try:
            warned = json.loads(raw) if raw else {}
        except ValueError:
            warned = {}
        warned = warned if isinstance(warned, dict) else {}
        for scope, key, limit, since in (
            ("day", periods.day, limits.daily, periods.day_start),
            ("month", periods.month, limits.monthly, periods.month_start),
        ):
            if not limit or warned.get(scope) == key:
                continue
            spent = await self.spent(since)
            if spent < budget.warn_at * limit:
                continue
            warned[scope] = key
            await self.store.set_setting(WARNED, json.dumps(warned))
            text = t(
                "budget.warn",
                scope=t(f"budget.scope_{scope}"),
                spent=money_under(spent, limit, budget.currency),
                limit=money(limit, budget.currency),
                percent=share(spent, limit),
            )
            try:
                await self.notify(text)
            except Exception as exc:  # the owner's channel is down: the log keeps it
                log.warning("could not send the budget warning: %s", type(exc).__name__)


def _code(exc: BaseException | None) -> str:
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code:
        return code
    return type(exc).__name__ if exc is not None else "failed"


def _ceiling(provider: Provider, request: ChatRequest) -> int:
    """What the call may write: the request's ceiling, the provider's, else the default,
    raised as a thinking budget raises it (:func:`output_ceiling`)."""
    configured = getattr(provider, "max_tokens", None)
    ceiling = (
        request.max_tokens
        or (configured if isinstance(configured, int) else 0)
        or (DEFAULT_MAX_TOKENS)
    )
    return output_ceiling(ceiling, request.thinking)


def _unrecorded(written: asyncio.Future[int]) -> None:
    """A usage row written without a caller waiting: its failure is logged, as an
    awaited one's is."""
    if not written.cancelled() and written.exception() is not None:
        log.warning(
            "could not record a model call's usage (%s)", type(written.exception()).__name__
        )
