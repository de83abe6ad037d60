"""Model resilience (issue 17): which models a turn tries, in what order
(:mod:`~kernel.routing.router`), and which providers may be called now
(:mod:`~kernel.routing.health`: circuit breakers, refused keys, sticky sessions).
The turn's failover itself runs in :mod:`kernel.agent.turn`; what was decided is kept
in the decisions log (:mod:`kernel.store.decisions`)."""

from kernel.routing.health import Health, ProviderState, State, Sticky
from kernel.routing.router import Candidate, Choice, Facts, Route, Router, Why

__all__ = [
    "Candidate",
    "Choice",
    "Facts",
    "Health",
    "ProviderState",
    "Route",
    "Router",
    "State",
    "Sticky",
    "Why",
]
