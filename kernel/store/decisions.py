"""The ``routing_decisions`` table (migration 11): the decisions log, one row per model
call of a turn (issue 17).

A :class:`Decision` says which models were candidates and why (the rule matched, the
session's override, the owner's ``/model``, the default), which were left out and why,
each attempt with its outcome (an error code for a failover), the model that answered,
the reasoning level, the time from the first attempt to the answer, and the answer's
tokens and cost (as the usage ledger recorded them; ``None`` when unknown).
"""

from __future__ import annotations

import json
import sqlite3
from asyncio import Future
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kernel.core.usage import Usage
from kernel.store.database import last_id, parse_stamp, stamp
from kernel.store.db import Store

MAX_LIMIT = 200  # rows one listing returns at most

_COLUMNS = (
    "id, at, session_id, turn_id, step, channel, job_id, why, rule, sticky, candidates,"
    " skipped, chosen, reasoning, attempts, latency_ms, input_tokens, output_tokens,"
    " cache_read_tokens, cache_write_tokens, cost"
)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One call to one model: ``outcome`` is "ok" or the error's code (a failover's
    cause, ``provider_auth_failed``, ``not_supported``: the model cannot take this
    request); ``seconds`` from its start to its end."""

    model: str
    outcome: str
    seconds: float = 0.0
    status: int | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model,
            "outcome": self.outcome,
            "seconds": round(self.seconds, 3),
        }
        if self.status is not None:
            out["status"] = self.status
        return out


@dataclass(frozen=True, slots=True)
class Decision:
    at: datetime
    why: str  # "session" | "owner" | "rule" | "default"
    candidates: list[str]
    chosen: str  # "provider:model" that answered; "" when none did
    attempts: list[Attempt] = field(default_factory=list)
    session_id: int | None = None
    turn_id: str = ""
    step: int = 0
    channel: str = ""
    job_id: str = ""
    rule: str = ""
    sticky: bool = False
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (model, why left out)
    reasoning: str = ""  # the chosen model's level or budget; "" none
    latency_ms: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    id: int = 0

    @property
    def failovers(self) -> int:
        """How many times another model was tried after one failed or was skipped."""
        return sum(1 for a in self.attempts[:-1] if a.outcome != "ok")

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(timespec="milliseconds"),
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "step": self.step,
            "channel": self.channel,
            "job_id": self.job_id,
            "why": self.why,
            "rule": self.rule,
            "sticky": self.sticky,
            "candidates": list(self.candidates),
            "skipped": [{"model": m, "why": w} for m, w in self.skipped],
            "chosen": self.chosen,
            "reasoning": self.reasoning,
            "attempts": [a.as_json() for a in self.attempts],
            "failovers": self.failovers,
            "latency_ms": self.latency_ms,
            **self.usage.as_json(),
            "cost": self.cost,
        }


def _decision(row: tuple[Any, ...]) -> Decision:
    attempts = [
        Attempt(
            str(a.get("model", "")),
            str(a.get("outcome", "")),
            float(a.get("seconds", 0)),
            a.get("status"),
        )
        for a in json.loads(row[14])
        if isinstance(a, dict)
    ]
    skipped = [
        (str(s.get("model", "")), str(s.get("why", "")))
        for s in json.loads(row[11])
        if isinstance(s, dict)
    ]
    return Decision(
        id=row[0],
        at=parse_stamp(row[1]),
        session_id=row[2],
        turn_id=row[3],
        step=row[4],
        channel=row[5],
        job_id=row[6],
        why=row[7],
        rule=row[8],
        sticky=bool(row[9]),
        candidates=[str(c) for c in json.loads(row[10])],
        skipped=skipped,
        chosen=row[12],
        reasoning=row[13],
        attempts=attempts,
        latency_ms=row[15],
        usage=Usage(row[16], row[17], row[18], row[19]),
        cost=row[20],
    )


class DecisionStore:
    """Reads and writes ``routing_decisions`` through the Store's database thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def record(self, decision: Decision) -> int:
        return await self.store.write("record a routing decision", _recording(decision))

    def record_soon(self, decision: Decision) -> Future[int]:
        """:meth:`record` queued without waiting for it (``Database.write_soon``)."""
        return self.store.write_soon("record a routing decision", _recording(decision))

    async def recent(self, session_id: int | None = None, limit: int = 50) -> list[Decision]:
        """The newest ``limit`` (at most :data:`MAX_LIMIT`) decisions, newest first; of
        one session when ``session_id`` is given."""
        limit = max(1, min(limit, MAX_LIMIT))
        where, values = ("", []) if session_id is None else (" WHERE session_id = ?", [session_id])

        def op(conn: sqlite3.Connection) -> list[Decision]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM routing_decisions{where} ORDER BY id DESC LIMIT ?",
                [*values, limit],
            )
            return [_decision(r) for r in rows]

        return await self.store.read("list routing decisions", op)

    async def prune(self, before: datetime) -> int:
        """Forget decisions made before ``before``; returns how many."""
        cutoff = stamp(before)

        def op(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM routing_decisions WHERE at < ?", (cutoff,)).rowcount

        return await self.store.write("prune routing decisions", op)


def _recording(decision: Decision) -> Callable[[sqlite3.Connection], int]:
    """The write of one decision's row, returning its id."""
    u = decision.usage
    values = (
        stamp(decision.at),
        decision.session_id,
        decision.turn_id,
        decision.step,
        decision.channel,
        decision.job_id,
        decision.why,
        decision.rule,
        int(decision.sticky),
        json.dumps(decision.candidates, ensure_ascii=False),
        json.dumps([{"model": m, "why": w} for m, w in decision.skipped], ensure_ascii=False),
        decision.chosen,
        decision.reasoning,
        json.dumps([a.as_json() for a in decision.attempts], ensure_ascii=False),
        decision.latency_ms,
        u.input,
        u.output,
        u.cache_read,
        u.cache_write,
        decision.cost,
    )

    def op(conn: sqlite3.Connection) -> int:
        columns = _COLUMNS.split(", ", 1)[1]
        marks = ", ".join("?" * len(values))
        sql = f"INSERT INTO routing_decisions ({columns}) VALUES ({marks})"
        return last_id(conn.execute(sql, values))

    return op
