"""A clock tests drive by hand: ``now()`` stands still until ``advance``; ``sleep``
returns when the clock is advanced past its deadline (never by wall time)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta


class ManualClock:
    def __init__(self, start: datetime) -> None:
        assert start.tzinfo is not None
        self._now = start
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []
        self.slept: list[float] = []  # every duration asked for, in order
        self._changed = asyncio.Event()

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        entry = (self._now + timedelta(seconds=seconds), asyncio.get_running_loop().create_future())
        self._sleepers.append(entry)
        self._changed.set()
        try:
            await entry[1]
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    def advance(self, seconds: float = 0, *, to: datetime | None = None) -> None:
        self._now = to if to is not None else self._now + timedelta(seconds=seconds)
        for deadline, future in list(self._sleepers):
            if deadline <= self._now and not future.done():
                future.set_result(None)

    def sleeping_until(self, deadline: datetime) -> bool:
        """Whether something sleeps until exactly ``deadline``."""
        return any(d == deadline for d, f in self._sleepers if not f.done())

    async def wait_for_sleeper(self, seconds: float, timeout: float = 30) -> None:  # noqa: ASYNC109
        """Wait until something sleeps ``seconds`` from now (a workflow's delay, say)."""
        deadline = self._now + timedelta(seconds=seconds)
        async with asyncio.timeout(timeout):
            while not self.sleeping_until(deadline):
                self._changed.clear()
                await self._changed.wait()


class InstantClock(ManualClock):
    """Sleeps return at once (the durations are recorded): for retry backoffs."""

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await asyncio.sleep(0)


class WarpPace:
    """Real time with a rate budget's waits compressed: a sleep lasts at most ``real``
    seconds of wall time, and the reading then moves on to the sleep's end. The budget's
    arithmetic holds on it (one call a second to a chat stays one a second on this
    clock, a burst is still three) while the chat tests wait a twentieth of that; what
    the budget thins or holds back is decided as before. Only for the pacing of calls:
    a 429's ``retry_after`` is the simulator's real time, so tests of 429s pace really."""

    def __init__(self, real: float = 0.05) -> None:
        self.real = real
        self._ahead = 0.0  # seconds this clock is ahead of time.monotonic()

    def monotonic(self) -> float:
        return time.monotonic() + self._ahead

    async def sleep(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        end = self.monotonic() + seconds
        await asyncio.sleep(min(seconds, self.real))
        self._ahead += max(0.0, end - self.monotonic())


def midday_zone() -> str:
    """An IANA zone (``Etc/GMT±N``) where it is now between 12:00 and 13:00: a test that
    reads "today" off the real clock in it cannot be cut by a midnight for hours. (POSIX
    writes the offset's sign inverted: ``Etc/GMT-8`` is UTC+8.)"""
    offset = 12 - datetime.now(UTC).hour  # hours east of UTC, from -11 to +12
    return "Etc/GMT" if offset == 0 else f"Etc/GMT{-offset:+d}"
