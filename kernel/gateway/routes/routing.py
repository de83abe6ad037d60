"""``/agent/routing/*`` (issue 17): the decisions log (which model each call of a turn
went to, why, and what failed over) and the providers' health (circuit breakers,
refused keys)."""

from __future__ import annotations

from typing import Literal

from aiohttp import web

from kernel.gateway.api import (
    Router,
    bounded,
    deps_of,
    json_response,
    query_int,
    query_param,
)
from kernel.gateway.schema import Shape
from kernel.store.decisions import MAX_LIMIT

router = Router("routing", "Model routing: the decisions log and the providers' health")

DEFAULT_LIMIT = 50
MAX_SESSION = 2**62


class SkippedInfo(Shape):
    model: str
    why: str


class AttemptInfo(Shape):
    """One call to one model: ``outcome`` "ok" or the error's code."""

    model: str
    outcome: str
    seconds: float
    status: int | None = None


class DecisionInfo(Shape):
    """One model call of a turn. ``why``: session (its override), owner (/model), rule,
    default; ``chosen`` "" when no candidate answered; ``cost`` null when unknown."""

    id: int
    at: str
    session_id: int | None = None
    turn_id: str
    step: int
    channel: str
    job_id: str
    why: str
    rule: str
    sticky: bool
    candidates: list[str]
    skipped: list[SkippedInfo]
    chosen: str
    reasoning: str
    attempts: list[AttemptInfo]
    failovers: int
    latency_ms: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float | None = None


class DecisionList(Shape):
    """``currency``: the costs' (``budget.currency``)."""

    items: list[DecisionInfo]
    currency: str


class ProviderHealthInfo(Shape):
    """``state``: closed (called), open (skipped for ``retry_in`` seconds), half_open
    (one probe call may go), unusable (its key was refused: fix the configuration),
    disabled (no key or switched off). ``keys``: how many API keys it rotates through."""

    provider: str
    state: Literal["closed", "open", "half_open", "unusable", "disabled"]
    failures: int
    retry_in: float
    last_error: str
    keys: int


class ProviderHealthList(Shape):
    items: list[ProviderHealthInfo]


@router.get(
    "/agent/routing/decisions",
    summary="The decisions log: which model each call went to and why, newest first",
    params=(
        query_param("session_id", bounded(0, MAX_SESSION), "only this session (the N of chat-N)"),
        query_param("limit", bounded(1, MAX_LIMIT), f"how many, newest first ({DEFAULT_LIMIT})"),
    ),
    response=DecisionList,
)
async def decisions(request: web.Request) -> web.Response:
    deps = deps_of(request)
    session: int | None = None
    if "session_id" in request.query:
        session = query_int(request, "session_id", 0, minimum=0, maximum=MAX_SESSION)
    limit = query_int(request, "limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
    found = await deps.agent.decisions.recent(session, limit)
    return json_response(
        {"items": [d.as_json() for d in found], "currency": deps.config.budget.currency}
    )


@router.get(
    "/agent/routing/providers",
    summary="Every configured provider's health: circuit state, failures, refused keys",
    response=ProviderHealthList,
)
async def providers(request: web.Request) -> web.Response:
    deps = deps_of(request)
    configured = deps.config.providers
    states = {s.provider: s for s in deps.agent.health.states(list(configured))}
    items = []
    for name, pcfg in configured.items():
        s = states[name]
        items.append(
            {
                "provider": name,
                "state": s.state if pcfg.enabled else "disabled",
                "failures": s.failures,
                "retry_in": round(s.retry_in, 1),
                "last_error": s.last_error,
                "keys": len(pcfg.keys),
            }
        )
    return json_response({"items": items})
