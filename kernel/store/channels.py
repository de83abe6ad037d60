"""What channels keep across restarts (migration 6): ``inbound_events``, the ids of
inbound events already handled (per channel, pruned once their signature window has
passed), and ``webhook_failures``, the deliveries that finally failed (the newest kept).

Times are UTC ISO strings, compared as text (one format, so the order is the time order).
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from kernel.store.db import Store


def _time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class WebhookFailure:
    """A delivery that did not happen: never the text nor the URL."""

    delivery_id: str
    at: str  # ISO 8601, as shown
    attempts: int
    error: str
    origin: str
    session_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ChannelStore:
    """Reads and writes the channels' tables through the Store's database thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def claim_event(
        self, channel: str, event_id: str, now: datetime, *, forget_before: datetime
    ) -> bool:
        """Record ``event_id`` as handled; False when it already was (a repeat). Ids seen
        before ``forget_before`` are forgotten first: their events can no longer pass
        the signature check, so they cannot come back."""
        seen_at, cutoff = _time(now), _time(forget_before)

        def op(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM inbound_events WHERE seen_at < ?", (cutoff,))
            cur = conn.execute(
                "INSERT OR IGNORE INTO inbound_events (channel, event_id, seen_at)"
                " VALUES (?, ?, ?)",
                (channel, event_id, seen_at),
            )
            return cur.rowcount == 1

        return await self.store.write("record inbound event", op)

    async def add_webhook_failure(self, failure: WebhookFailure, *, keep: int) -> None:
        """Record a failed delivery, keeping only the newest ``keep``."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO webhook_failures (delivery_id, at, attempts, error, origin,"
                " session_id) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    failure.delivery_id,
                    failure.at,
                    failure.attempts,
                    failure.error,
                    failure.origin,
                    failure.session_id,
                ),
            )
            conn.execute(
                "DELETE FROM webhook_failures WHERE id NOT IN"
                " (SELECT id FROM webhook_failures ORDER BY id DESC LIMIT ?)",
                (keep,),
            )

        await self.store.write("record webhook failure", op)

    async def webhook_failures(self, *, limit: int) -> list[WebhookFailure]:
        """The newest failures first."""

        def op(conn: sqlite3.Connection) -> list[WebhookFailure]:
            rows = conn.execute(
                "SELECT delivery_id, at, attempts, error, origin, session_id"
                " FROM webhook_failures ORDER BY id DESC LIMIT ?",
                (limit,),
            )
            return [WebhookFailure(*row) for row in rows]

        return await self.store.read("list webhook failures", op)
