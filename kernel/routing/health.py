"""Which providers may be called now (issue 17): a circuit breaker per provider, the
providers whose key was refused, and the sessions that stay on a fallback.

A provider whose calls fail ``breaker_failures`` times in a row (each after its own
retries, with a cause worth failing over) is *open*: it is skipped for
``breaker_cooldown`` seconds. Then it is *half-open*: one call may probe it (others
still skip it); a success closes the circuit, a failure opens it for another cool-down.
A provider whose key was refused (401/403) is *unusable* until its configuration
changes (:meth:`Health.config_changed`). A session that failed over *sticks* to the
model that answered for ``sticky_minutes``, so that its prompt cache is not thrown away
at every message. Everything here is in memory: a restart starts every circuit closed.

The clock is injected (monotonic seconds), so tests drive the cool-down.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kernel.config import RoutingConfig

State = Literal["closed", "open", "half_open", "unusable"]
Clock = Callable[[], float]
MAX_STICKY = 1024  # sessions kept on a fallback at once; the one that stuck first goes first


@dataclass(slots=True)
class _Circuit:
    failures: int = 0  # in a row
    opened_at: float | None = None  # None: closed
    probing: bool = False  # a half-open probe call is running
    refused: bool = False  # the key was refused: unusable until the configuration changes
    last_error: str = ""


@dataclass(frozen=True, slots=True)
class ProviderState:
    """One provider as ``/status`` shows it. ``retry_in``: seconds until an open circuit
    lets a probe through (0 otherwise)."""

    provider: str
    state: State
    failures: int
    retry_in: float
    last_error: str


@dataclass(frozen=True, slots=True)
class Sticky:
    provider: str
    model: str
    until: float  # on the health clock


class Health:
    def __init__(self, config: RoutingConfig, clock: Clock = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._circuits: dict[str, _Circuit] = {}
        self._sticky: dict[int, Sticky] = {}

    def _circuit(self, provider: str) -> _Circuit:
        return self._circuits.setdefault(provider, _Circuit())

    # ----- the breaker -------------------------------------------------------------------

    def state(self, provider: str) -> State:
        circuit = self._circuits.get(provider)
        if circuit is None:
            return "closed"
        if circuit.refused:
            return "unusable"
        if circuit.opened_at is None:
            return "closed"
        if self._clock() - circuit.opened_at < self.config.breaker_cooldown:
            return "open"
        return "half_open"

    def usable(self, provider: str) -> bool:
        """False only for a provider whose key was refused."""
        return self.state(provider) != "unusable"

    def allow(self, provider: str) -> bool:
        """Whether a call may go to ``provider`` now; a half-open provider admits one
        probe at a time (the caller reports its outcome with success or failure)."""
        return self.take(provider) is not None

    def take(self, provider: str) -> Literal["closed", "probe"] | None:
        """Admit a call to ``provider``: "closed" (any call may go), "probe" (this call
        took the half-open circuit's one probe, and must end with success, failure or
        release), or None (not now). One reading of the clock decides."""
        state = self.state(provider)
        if state == "closed":
            return "closed"
        if state != "half_open":
            return None
        circuit = self._circuit(provider)
        if circuit.probing:
            return None
        circuit.probing = True
        return "probe"

    def success(self, provider: str) -> None:
        circuit = self._circuit(provider)
        circuit.failures = 0
        circuit.opened_at = None
        circuit.probing = False
        circuit.last_error = ""

    def failure(self, provider: str, cause: str, *, probe: bool = False) -> None:
        """A call failed after its retries with a cause worth failing over; ``probe``:
        it was the half-open circuit's probe (which re-opens it at once)."""
        circuit = self._circuit(provider)
        circuit.failures += 1
        circuit.last_error = cause
        if probe or circuit.failures >= self.config.breaker_failures:
            circuit.opened_at = self._clock()  # a new cool-down, then a new probe
            circuit.probing = False

    def release(self, provider: str) -> None:
        """A probe that ended without a verdict (cancelled, refused for another
        reason): the next call may probe again."""
        self._circuit(provider).probing = False

    def refused(self, provider: str) -> None:
        """The provider refused its key (every key): unusable until reconfigured."""
        circuit = self._circuit(provider)
        circuit.refused = True
        circuit.probing = False
        circuit.last_error = "provider_auth_failed"

    def config_changed(self, names: set[str]) -> None:
        """Providers' settings changed: their marks and circuits start afresh."""
        for name in names:
            self._circuits.pop(name, None)

    def states(self, providers: list[str]) -> list[ProviderState]:
        now = self._clock()
        out: list[ProviderState] = []
        for name in providers:
            circuit = self._circuits.get(name, _Circuit())
            state = self.state(name)
            retry_in = 0.0
            if state == "open" and circuit.opened_at is not None:
                retry_in = max(0.0, circuit.opened_at + self.config.breaker_cooldown - now)
            out.append(ProviderState(name, state, circuit.failures, retry_in, circuit.last_error))
        return out

    # ----- stickiness --------------------------------------------------------------------

    def stick(self, session_id: int | None, provider: str, model: str) -> None:
        """``session_id`` failed over to ``provider:model``: it stays there a while."""
        minutes = self.config.sticky_minutes
        if session_id is None or minutes <= 0:
            return
        now = self._clock()
        self._sticky.pop(session_id, None)  # kept in the order they stuck
        self._sticky[session_id] = Sticky(provider, model, now + minutes * 60)
        self._sweep(now)

    def _sweep(self, now: float) -> None:
        """From the oldest: the sessions whose time is up (a session that never calls
        again is not asked) and those beyond :data:`MAX_STICKY` go."""
        sticky = self._sticky
        while sticky:
            first = next(iter(sticky))
            if sticky[first].until > now and len(sticky) <= MAX_STICKY:
                return
            del sticky[first]

    def sticky(self, session_id: int | None) -> Sticky | None:
        if session_id is None:
            return None
        found = self._sticky.get(session_id)
        if found is not None and found.until <= self._clock():
            del self._sticky[session_id]
            return None
        return found

    def unstick(self, session_id: int | None) -> None:
        if session_id is not None:
            self._sticky.pop(session_id, None)

    def unstick_all(self) -> None:
        """The owner picked a model (/provider, /model, /model auto, a session's own):
        no session stays on a fallback against that choice."""
        self._sticky.clear()
