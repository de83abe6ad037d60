"""Time as components see it: ``now()`` and ``sleep()``, injectable so that tests drive
schedules (cron, token expiry, retry backoff) without waiting on the wall clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime, tzinfo
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MINUTE = "%Y-%m-%d %H:%M"  # how a list shows when something happened


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


def shown(when: datetime | str, tz: tzinfo, fmt: str = MINUTE) -> str:
    """A time as the owner reads it, on every surface: in ``tz`` (``general.timezone``,
    never the machine's zone), as ``fmt``. ``when`` may be ISO 8601 text (a stored value
    or an API's); a time without an offset is UTC, as Kernel stores it; text that is no
    time is shown as it is. "" stays ""."""
    if isinstance(when, str):
        try:
            moment = datetime.fromisoformat(when)
        except ValueError:
            return when[:19]
    else:
        moment = when
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(tz).strftime(fmt)


def zone_named(name: Any) -> tzinfo:
    """The zone a sidecar's ``/runtime-config`` names (``general.timezone``) for a
    client that shows times; UTC, as Kernel stores them, when it names none it knows."""
    try:
        return ZoneInfo(str(name or "UTC"))
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


async def sleep_unless(clock: Clock, seconds: float, event: asyncio.Event) -> bool:
    """Sleep ``seconds`` on ``clock``, cut short when ``event`` is set: whether it was."""
    await unless_set(clock.sleep(seconds), event)
    return event.is_set()


async def unless_set(awaitable: Awaitable[object], event: asyncio.Event) -> bool:
    """Await ``awaitable``, given up (cancelled) when ``event`` is set first: whether it
    finished."""
    task = asyncio.ensure_future(awaitable)
    waker = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({task, waker}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        task.cancel()
        waker.cancel()
    return task.done() and not task.cancelled()
