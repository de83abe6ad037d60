"""A virtual clock for the outbox and polling tests: time moves only when the test
jumps it to the next deadline something sleeps until (never by wall time)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

from tests.clock import ManualClock


class JumpClock(ManualClock):
    """A :class:`ManualClock` that jumps from one sleeper's deadline to the next."""

    def __init__(self, start: datetime | None = None) -> None:
        # whole seconds: the store keeps times to the millisecond
        super().__init__(start or datetime.now(UTC).replace(microsecond=0))

    def _waiting(self) -> list[datetime]:
        return sorted(d for d, f in self._sleepers if not f.done())

    async def sleeping(self, timeout: float = 30) -> None:  # noqa: ASYNC109
        """Wait until something sleeps on the clock (time does not move)."""
        async with asyncio.timeout(timeout):
            while not self._waiting():
                self._changed.clear()
                await self._changed.wait()

    async def jump(self, timeout: float = 30) -> float:  # noqa: ASYNC109
        """Wait until something sleeps, then move to its deadline; the seconds moved."""
        await self.sleeping(timeout)
        deadline = self._waiting()[0]
        moved = (deadline - self._now).total_seconds()
        self.advance(to=deadline)
        await asyncio.sleep(0)
        return moved

    async def run_until(
        self, done: Callable[[], bool] | Callable[[], Awaitable[bool]], limit: int = 200
    ) -> list[float]:
        """Jump from deadline to deadline until ``done``; the jumps made, in order."""
        jumps: list[float] = []
        while True:
            outcome = done()
            if isinstance(outcome, Awaitable):
                outcome = await outcome
            if outcome:
                return jumps
            assert len(jumps) < limit, f"not done after {limit} jumps: {jumps}"
            jumps.append(await self.jump())

    @contextlib.asynccontextmanager
    async def driving(self) -> AsyncIterator[list[float]]:
        """Jump in the background meanwhile (whatever sleeps on the clock runs as fast
        as it can); yields the jumps made."""
        jumps: list[float] = []

        async def drive() -> None:
            while True:
                jumps.append(await self.jump(timeout=3600))

        driver = asyncio.create_task(drive())
        try:
            yield jumps
        finally:
            driver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await driver
