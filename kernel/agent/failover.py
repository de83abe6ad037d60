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
    CapabilityError,
    KernelError,
    ProviderAuthError,
    ProviderError,
    TransientProviderError,
    failover_cause,
)
from kernel.core.events import ModelSwitched, TurnEvent
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
        if not self.route.candidates:
            refused = ", ".join(model for model, _ in self.route.skipped) or "-"
            raise ProviderAuthError(t("routing.none_usable", models=refused))
        call = _Call(step, self._monotonic())
        try:
            async for event in self._attempts(call, build, admit, counted):
                yield event
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._record(call))

    async def _attempts(
        self,
        call: _Call,
        build: Build,
        admit: Admit | None,
        counted: Callable[[UsageEntry], None] | None,
    ) -> AsyncGenerator[StreamEvent, None]:
        candidates = self.route.candidates
        switched: tuple[Candidate | str, str] | None = None  # (the model left, why)
        if self.route.detour is not None and not self._told:
            # The turn's usual model is skipped for its health: said once, at its start.
            switched, self._told = self.route.detour, True
        last: ProviderError | None = None
        index = self.position
        while index < len(candidates):
            candidate = candidates[index]
            if not self.route.forced and not self.health.allow(candidate.provider):
                call.attempts.append(Attempt(str(candidate), "circuit_open"))
                index += 1
                continue
            provider = await self.models.provider(candidate.provider)
            policy = self.models.policy(candidate.provider)
            request = build(candidate, provider)
            began = self._monotonic()
            verdict = False  # the breaker was told how this attempt went
            shown = False

            def keep(entry: UsageEntry) -> None:
                call.entry = entry
                if counted is not None:
                    counted(entry)

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
            except CapabilityError as exc:
                # This model cannot take the request (an image, a thinking budget): the
                # next may, unless this was the one the turn is on, which reports it.
                call.attempts.append(Attempt(str(candidate), exc.code or "not_supported"))
                if index == self.position or shown:
                    raise
                last = last or exc
                index += 1
                continue
            except ProviderAuthError as exc:
                self.health.refused(candidate.provider)
                verdict = True
                call.attempts.append(self._failed(candidate, exc, began))
                log.warning("provider %s refused its key: marked unusable", candidate.provider)
                raise
            except ProviderError as exc:
                call.attempts.append(self._failed(candidate, exc, began))
                cause = failover_cause(exc)
                if cause is None:
                    raise
                self.health.failure(candidate.provider, cause)
                verdict = True
                if shown:
                    raise  # the owner saw part of this answer: not replayed elsewhere
                last = exc
                nxt = self._next(index)
                if nxt is None:
                    raise
                log.warning("provider %s failed (%s); failing over", candidate.provider, cause)
                switched = (candidate, cause)
                index = nxt
                continue
            finally:
                if not verdict:
                    self.health.release(candidate.provider)
        if last is not None:
            raise last
        waiting = ", ".join(str(c) for c in candidates[self.position :])
        raise TransientProviderError(t("routing.all_open", models=waiting), code="circuit_open")

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

    async def _record(self, call: _Call) -> None:
        if not call.attempts:
            return
        entry = call.entry
        chosen = call.chosen
        reasoning = chosen.reasoning if chosen is not None else self.current.reasoning
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
        try:
            await self.decisions.record(decision)
        except KernelError:
            log.warning("could not record a routing decision", exc_info=True)
