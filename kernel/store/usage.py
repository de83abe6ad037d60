"""The ``usage`` table (migration 9): the usage ledger, one row per model call.

Rows are plain values: tokens as the provider reported them (:class:`Usage`), the cost
computed from the configured price when there was one (``None``: unknown), and what
the call was for. Sums and groups are computed on the database thread; a day is a day
of the owner's time zone, so grouping by day happens there in Python (SQLite knows no
time zones).
"""

from __future__ import annotations

import sqlite3
from asyncio import Future
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any, Literal, get_args

from kernel.core.usage import Usage
from kernel.store.database import RowId, last_id, parse_stamp, stamp
from kernel.store.db import Store

Purpose = Literal[
    "turn", "cron", "title", "api", "sampling", "speech", "subagent", "embedding", "memory"
]
PURPOSES: tuple[str, ...] = get_args(Purpose)
GroupBy = Literal["model", "provider", "channel", "job", "purpose", "session", "day"]
GROUPS: tuple[str, ...] = ("model", "provider", "channel", "job", "purpose", "session", "day")

_COLUMNS = (
    "id, at, provider, model, purpose, session_id, channel, job_id, turn_id, input_tokens,"
    " output_tokens, cache_read_tokens, cache_write_tokens, retries, cost, seconds,"
    " cost_bound, usage_known"
)
_GROUP_COLUMN = {
    "model": "provider || ':' || model",
    "provider": "provider",
    "channel": "channel",
    "job": "job_id",
    "purpose": "purpose",
    "session": "COALESCE(CAST(session_id AS TEXT), '')",
}
_SUMS = (
    "COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
    " COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0),"
    " COALESCE(SUM(cost), 0.0), COALESCE(SUM(cost IS NULL), 0),"
    " COALESCE(SUM(COALESCE(cost, cost_bound)), 0.0),"
    " COALESCE(SUM(cost IS NULL AND cost_bound IS NOT NULL), 0),"
    " COALESCE(SUM(cost = 0 AND usage_known = 0), 0)"
)


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """One model (or speech) call. ``retries``: failed attempts before this one
    succeeded; ``seconds``: audio length, for a speech call that reported it; ``bound``:
    the most an unknown ``cost`` can have been (what a budget counts), when known;
    ``usage_known`` False: no usage was reported (the counts are unknown, not zero)."""

    at: datetime
    provider: str
    model: str
    purpose: str
    usage: Usage
    cost: float | None
    session_id: int | None = None
    channel: str = ""
    job_id: str = ""
    turn_id: str = ""
    retries: int = 0
    seconds: float | None = None
    bound: float | None = None
    usage_known: bool = True
    id: int = 0

    @property
    def charged(self) -> float:
        """What a budget counts for this call: its cost, else its bound, else 0."""
        value = self.cost if self.cost is not None else self.bound
        return value or 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(timespec="seconds"),
            "provider": self.provider,
            "model": self.model,
            "purpose": self.purpose,
            "session_id": self.session_id,
            "channel": self.channel,
            "job_id": self.job_id,
            **self.usage.as_json(),
            "retries": self.retries,
            "cost": self.cost,
            "cost_bound": self.bound,
            "usage_known": self.usage_known,
            "seconds": self.seconds,
        }


@dataclass(frozen=True, slots=True)
class UsageFilter:
    """Which rows: ``since`` inclusive, ``until`` exclusive; empty fields match all."""

    since: datetime | None = None
    until: datetime | None = None
    provider: str = ""
    model: str = ""
    purpose: str = ""
    channel: str = ""
    job_id: str = ""
    session_id: int | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        values: list[Any] = []
        if self.since is not None:
            clauses.append("at >= ?")
            values.append(stamp(self.since))
        if self.until is not None:
            clauses.append("at < ?")
            values.append(stamp(self.until))
        for column, value in (
            ("provider", self.provider),
            ("model", self.model),
            ("purpose", self.purpose),
            ("channel", self.channel),
            ("job_id", self.job_id),
        ):
            if value:
                clauses.append(f"{column} = ?")
                values.append(value)
        if self.session_id is not None:
            clauses.append("session_id = ?")
            values.append(self.session_id)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", values


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """The sum of a group of calls. ``cost`` sums the known costs; ``unpriced`` counts
    the calls whose cost is unknown (so a total never hides them); ``charged`` adds the
    bounds of those that have one: what a budget counts, and the one figure every
    surface shows. ``bounded``: the unknown costs counted at a bound (so ``unpriced -
    bounded`` have no price at all); ``unbilled``: calls cancelled before the provider
    sent anything (cost 0)."""

    key: str = ""
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    unpriced: int = 0
    charged: float = 0.0
    bounded: int = 0
    unbilled: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "calls": self.calls,
            **self.usage.as_json(),
            "cost": round(self.cost, 6),
            "unpriced_calls": self.unpriced,
            "charged": round(self.charged, 6),
        }


def _total(key: str, row: Iterable[Any]) -> UsageTotal:
    calls, fresh, out, read, write, cost, unpriced, charged, bounded, unbilled = row
    usage = Usage(fresh, out, read, write)
    return UsageTotal(key, calls, usage, float(cost), unpriced, float(charged), bounded, unbilled)


def _entry(values: tuple[Any, ...]) -> UsageEntry:
    return UsageEntry(
        id=values[0],
        at=parse_stamp(values[1]),
        provider=values[2],
        model=values[3],
        purpose=values[4],
        session_id=values[5],
        channel=values[6],
        job_id=values[7],
        turn_id=values[8],
        usage=Usage(values[9], values[10], values[11], values[12]),
        retries=values[13],
        cost=values[14],
        seconds=values[15],
        bound=values[16],
        usage_known=bool(values[17]),
    )


class UsageStore:
    """Reads and writes ``usage`` through the Store's database thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def record(self, entry: UsageEntry) -> int:
        return await self.store.write("record usage", self._recording(entry, RowId()))

    def record_soon(self, entry: UsageEntry, row: RowId) -> Future[int]:
        """:meth:`record` queued without waiting (``write_soon``): ``row`` gets the id on
        the database thread, for what is queued behind it."""
        return self.store.write_soon("record usage", self._recording(entry, row))

    def _recording(self, entry: UsageEntry, row: RowId) -> Callable[[sqlite3.Connection], int]:
        u = entry.usage
        values = (
            stamp(entry.at),
            entry.provider,
            entry.model,
            entry.purpose,
            entry.session_id,
            entry.channel,
            entry.job_id,
            entry.turn_id,
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            entry.retries,
            entry.cost,
            entry.seconds,
            entry.bound,
            int(entry.usage_known),
        )

        def op(conn: sqlite3.Connection) -> int:
            columns = _COLUMNS.split(", ", 1)[1]
            marks = ", ".join("?" * len(values))
            sql = f"INSERT INTO usage ({columns}) VALUES ({marks})"
            row.value = last_id(conn.execute(sql, values))
            return row.value

        return op

    async def total(self, where: UsageFilter) -> UsageTotal:
        sql, values = where.where()

        def op(conn: sqlite3.Connection) -> UsageTotal:
            return _total("", conn.execute(f"SELECT {_SUMS} FROM usage{sql}", values).fetchone())

        return await self.store.read("sum usage", op)

    async def grouped(
        self, where: UsageFilter, by: GroupBy, tz: tzinfo | None = None
    ) -> list[UsageTotal]:
        """Totals per group, the costliest first; ``by="day"``: per day of ``tz``
        (``YYYY-MM-DD``), in date order, days without calls left out."""
        sql, values = where.where()
        if by == "day":
            return await self.store.read("usage by day", lambda c: _by_day(c, sql, values, tz))
        column = _GROUP_COLUMN[by]

        def op(conn: sqlite3.Connection) -> list[UsageTotal]:
            rows = conn.execute(
                f"SELECT {column} AS k, {_SUMS} FROM usage{sql}"
                " GROUP BY k ORDER BY SUM(cost) DESC, COUNT(*) DESC, k",
                values,
            )
            return [_total(str(r[0]), r[1:]) for r in rows]

        return await self.store.read("group usage", op)

    async def entries(self, where: UsageFilter, limit: int = 100) -> list[UsageEntry]:
        """The newest ``limit`` rows, newest first."""
        sql, values = where.where()

        def op(conn: sqlite3.Connection) -> list[UsageEntry]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM usage{sql} ORDER BY id DESC LIMIT ?", [*values, limit]
            )
            return [_entry(r) for r in rows]

        return await self.store.read("list usage", op)


def _by_day(
    conn: sqlite3.Connection, sql: str, values: list[Any], tz: tzinfo | None
) -> list[UsageTotal]:
    days: dict[str, list[Any]] = {}
    rows = conn.execute(
        "SELECT at, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost,"
        f" cost_bound, usage_known FROM usage{sql} ORDER BY at",
        values,
    )
    for at, fresh, out, read, write, cost, bound, known in rows:
        day = parse_stamp(at).astimezone(tz).date().isoformat()
        sums = days.setdefault(day, [0, 0, 0, 0, 0, 0.0, 0, 0.0, 0, 0])
        for index, value in enumerate((1, fresh, out, read, write)):
            sums[index] += value
        if cost is None:
            sums[6] += 1
            sums[7] += bound or 0.0
            sums[8] += bound is not None
        else:
            sums[9] += cost == 0 and not known
            sums[5] += cost
            sums[7] += cost
    return [_total(day, sums) for day, sums in days.items()]
