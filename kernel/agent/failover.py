"""A turn's model calls over its route (issue 17): failover from one model to the next,
the circuit breaker told of each outcome, and one decisions-log row per call.

:meth:`ModelCalls.stream` sends one call to the candidate answering now. When that call
fails after its own retries with a cause another model may answer through
(:func:`~kernel.core.errors.failover_cause`: 429, 5xx, overloaded, timeout, connection,
a used-up quota) and nothing of it was shown to the owner, the breaker counts the
failure, a :class:`~kernel.core.events.ModelSwitched` line is emitted and the next
candidate gets the same call: the history is Kernel's own (Anthropic-shaped) and each
provider converts it, so a tool loop goes on with its pairs whole. A refused key marks
the provider unusable and is reported, never failed over; a bad request, a refused
input or a budget refusal is reported as before. Once a candidate answered, the turn's
later calls start there, and a session that failed over sticks to it
(:meth:`Health.stick`) so its prompt cache stays warm.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from kernel.agent.models import ModelSelection
from kernel.core.errors import (
    BudgetExceededError,
    CapabilityError,
    InputRefusedError,
    ProviderAuthError,
    ProviderError,
    TransientProviderError,
    failover_cause,
)
from kernel.core.events import ModelRetrying, ModelSwitched, TurnEvent
from kernel.core.i18n import t
from kernel.core.provider import ChatRequest, Provider, Sleep, StreamEvent, TextDelta
from kernel.core.usage import Usage
from kernel.routing import Candidate, Health, Route
from kernel.spend import CallTag, Meter, Over
from kernel.store.decisions import Attempt, Decision, DecisionStore
from kernel.store.usage import UsageEntry

log = logging.getLogger(__name__)

Build = Callable[[Candidate, Provider], ChatRequest]
Admit = Callable[[Over], Awaitable[bool]]


@dataclass(slots=True)
class _Call:
    """What one call did, for its decisions-log row."""

    step: int
    started: float
    attempts: list[Attempt] = field(default_factory=list)
    chosen: Candidate | None = None
    entry: UsageEntry | None = None


class ModelCalls:
    """One turn's calls; ``position`` is the candidate answering now."""

    def __init__(
        self,
        route: Route,
        *,
        models: ModelSelection,
        meter: Meter,
        health: Health,
        decisions: DecisionStore,
        tag: CallTag,
        emit: Callable[[TurnEvent], None],
        clock: Callable[[], datetime],
        sleep: Sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.route = route
        self.models = models
        self.meter = meter
        self.health = health
        self.decisions = decisions
        self.tag = tag
        self._emit = emit
        self._clock = clock
        self._sleep = sleep
        self._monotonic = monotonic
        self.position = 0
        self.provider: Provider | None = None  # the provider that answered last
        self._told = False  # the route's detour was shown

    @property
    def current(self) -> Candidate:
        return self.route.candidates[self.position]

    async def stream(
        self,
        step: int,
        build: Build,
        *,
        admit: Admit | None = None,
        counted: Callable[[UsageEntry], None] | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The events of one call, from whichever candidate answers it. ``build`` makes
        the request for a candidate (its model, reasoning, what its provider takes)."""
        call = _Call(step, self._monotonic())
        try:
            if not self.route.candidates:
                raise self._no_candidate()
            # Closed with this one, so a consumer that stops early ends the attempt (its
            # "cancelled" outcome, the probe released) before the row is written.
            attempts = self._attempts(call, build, admit, counted)
            async with contextlib.aclosing(attempts):
                async for event in attempts:
                    yield event
        finally:
            self._record(call)

    def _no_candidate(self) -> ProviderError:
        """Every model of the route was left out: why, in the owner's words."""
        refused = [model for model, why in self.route.skipped if why == "key_refused"]
        if refused:
            return ProviderAuthError(t("routing.none_usable", models=", ".join(refused)))
        models = ", ".join(model for model, _ in self.route.skipped) or "-"
        return ProviderError(t("routing.none_enabled", models=models), code="provider_disabled")

    async def _attempts(
        self,
        call: _Call,
        build: Build,
        admit: Admit | None,
        counted: Callable[[UsageEntry], None] | None,
    ) -> AsyncGenerator[StreamEvent, None]:
        candidates = self.route.candidates
        # A switch to tell the owner (the model left, why), said just before the next
        # candidate is called, so that it always names the model that answers next.
        switched: tuple[Candidate | str, str] | None = None
        if self.route.detour is not None and not self._told:
            # The turn's usual model is skipped for its health: said once, at its start.
            switched, self._told = self.route.detour, True
        last: ProviderError | None = None  # the failure that made the call move on

        def keep(entry: UsageEntry) -> None:
            call.entry = entry
            if counted is not None:
                counted(entry)

        index = self.position - 1
        while (index := index + 1) < len(candidates):
            candidate = candidates[index]
            own = index == self.position  # the model the turn is on (its errors are its own)
            provider = await self.models.provider(candidate.provider)
            policy = self.models.policy(candidate.provider)
            request = build(candidate, provider)
            try:
                provider.check(request)
            except CapabilityError as exc:
                # This model cannot take the request (an image, a thinking budget): the
                # next may, unless it is the one the turn is on, which reports it.
                call.attempts.append(Attempt(str(candidate), exc.code or "not_supported"))
                if own and last is None:
                    raise
                last = last or exc
                continue
            # Whether this call holds the half-open circuit's one probe (forced: every
            # circuit is open and every candidate is tried; no probe is held then).
            admitted = "closed" if self.route.forced else self.health.take(candidate.provider)
            if admitted is None:
                # Its circuit opened meanwhile, or another call is probing it.
                call.attempts.append(Attempt(str(candidate), "circuit_open"))
                switched = switched or (candidate, "circuit_open")
                continue
            probe = admitted == "probe"
            began = self._monotonic()
            verdict = False  # the breaker was told how this attempt went
            shown = False
            try:
                if switched is not None:
                    left, reason = switched
                    self._emit(ModelSwitched(call.step, str(left), str(candidate), reason))
                    switched = None
                stream = self.meter.stream(
                    provider,
                    request,
                    policy,
                    self.tag,
                    sleep=self._sleep,
                    admit=admit,
                    counted=keep,
                    retrying=self._retrying(call.step, candidate, policy.max_retries),
                )
                async with contextlib.aclosing(stream):
                    async for event in stream:
                        shown = shown or isinstance(event, TextDelta)
                        yield event
                self.health.success(candidate.provider)
                verdict = True
                call.attempts.append(Attempt(str(candidate), "ok", self._monotonic() - began))
                call.chosen = candidate
                self.provider = provider
                if index != self.position:
                    self.position = index
                    self.health.stick(self.tag.session_id, candidate.provider, candidate.model)
                return
            except (asyncio.CancelledError, GeneratorExit):
                call.attempts.append(
                    Attempt(str(candidate), "cancelled", self._monotonic() - began)
                )
                raise
            except BudgetExceededError as exc:
                call.attempts.append(Attempt(str(candidate), exc.code))
                raise
            except ProviderAuthError as exc:
                # Every key of it refused (stream_with_retry tried the others first).
                self.health.refused(candidate.provider)
                verdict = True
                call.attempts.append(self._failed(candidate, exc, began))
                log.warning("provider %s refused its key: marked unusable", candidate.provider)
                if own or shown or self._next(index) is None:
                    raise (exc if own or last is None else last) from None
                switched = (candidate, "key_refused")  # a fallback's key: on to the next
                continue
            except InputRefusedError as exc:
                call.attempts.append(self._failed(candidate, exc, began))
                if own or shown:
                    raise  # the turn's own model refused the owner's input: set aside
                # A fallback refused what the turn's model took (a shorter context, another
                # policy): the next may take it; else the failure that led here stands.
                if self._next(index) is None:
                    raise last or exc from None
                switched = (candidate, exc.code)
                continue
            except ProviderError as exc:
                call.attempts.append(self._failed(candidate, exc, began))
                cause = failover_cause(exc)
                if cause is None:
                    if own or shown or last is None:
                        raise
                    # A fallback's own fault (a bad request, a model it lacks): the next
                    # may answer; else the failure that led here is the one to report.
                    if self._next(index) is None:
                        raise last from None
                    switched = (candidate, exc.code or "provider_error")
                    continue
                self.health.failure(candidate.provider, cause, probe=probe)
                verdict = True
                if shown:
                    raise  # the owner saw part of this answer: not replayed elsewhere
                last = exc
                if self._next(index) is None:
                    raise
                log.warning("provider %s failed (%s); failing over", candidate.provider, cause)
                switched = (candidate, cause)
                continue
            finally:
                if not verdict and probe:
                    self.health.release(candidate.provider)
        if last is not None:
            raise last
        waiting = ", ".join(str(c) for c in candidates[self.position :])
        raise TransientProviderError(t("routing.all_open", models=waiting), code="circuit_open")

    def _retrying(
        self, step: int, candidate: Candidate, of: int
    ) -> Callable[[int, Exception], None]:
        """Tells the turn's progress of each retry of ``candidate``'s call."""

        def told(attempt: int, exc: Exception) -> None:
            reason = exc.code if isinstance(exc, ProviderError) and exc.code else "transient"
            self._emit(ModelRetrying(step, str(candidate), attempt, of, reason))

        return told

    def _next(self, index: int) -> int | None:
        """The next candidate a call may go to, if any (open circuits skipped)."""
        for later in range(index + 1, len(self.route.candidates)):
            state = self.health.state(self.route.candidates[later].provider)
            if self.route.forced or state in ("closed", "half_open"):
                return later
        return None

    def _failed(self, candidate: Candidate, exc: ProviderError, began: float) -> Attempt:
        outcome = exc.code or type(exc).__name__
        return Attempt(str(candidate), outcome, self._monotonic() - began, exc.status)

    def _record(self, call: _Call) -> None:
        if not call.attempts and self.route.candidates:
            return  # cancelled before any model was called
        entry = call.entry
        chosen = call.chosen
        if chosen is not None:
            reasoning = chosen.reasoning
        else:
            reasoning = self.current.reasoning if self.route.candidates else None
        decision = Decision(
            at=self._clock(),
            why=self.route.why,
            candidates=[str(c) for c in self.route.candidates],
            chosen=str(chosen) if chosen is not None else "",
            attempts=call.attempts,
            session_id=self.tag.session_id,
            turn_id=self.tag.turn_id,
            step=call.step,
            channel=self.tag.channel,
            job_id=self.tag.job_id,
            rule=self.route.rule,
            sticky=self.route.sticky,
            skipped=list(self.route.skipped),
            reasoning="" if reasoning is None else str(reasoning),
            latency_ms=round((self._monotonic() - call.started) * 1000),
            usage=entry.usage if entry is not None else Usage(),
            cost=entry.cost if entry is not None else None,
        )
        try:  # queued, written with the turn's next store call
            written = self.decisions.record_soon(decision)
        except Exception as exc:  # the answer matters more than its record
            log.warning("could not record a routing decision: %s", type(exc).__name__)
        else:
            written.add_done_callback(_unrecorded)


def _unrecorded(written: asyncio.Future[int]) -> None:
    exc = None if written.cancelled() else written.exception()
    if exc is not None:  # the answer matters more than its record
        log.warning("could not record a routing decision: %s", type(exc).__name__)
