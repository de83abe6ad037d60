"""How long to wait before trying again: the one backoff in Kernel.

Every place that retries (a model call, an MCP server's reconnect, a cron pass, a webhook
delivery, the Telegram outbox and poller, the Bot API at start, the store at start) holds
a :class:`Backoff` — the first delay, its cap, the growth factor and a jitter fraction —
and asks it for the delay after the n-th consecutive failure. A server's ``Retry-After``
overrides the computed delay. :class:`Retrying` carries the count of failures and sleeps
on the caller's :class:`~kernel.core.clock.Clock`, so a test drives it on a virtual one.

Pure arithmetic, no I/O; ``rand`` is injectable for tests of the jitter bounds.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from kernel.core.clock import Clock

_MAX_EXPONENT = 64  # beyond this every sane cap is reached; it keeps the power finite


@dataclass(frozen=True)
class Backoff:
    """``first`` seconds after the first failure, multiplied by ``factor`` after each
    further one, never above ``cap``; ``jitter`` spreads each delay uniformly over
    ``±jitter`` of itself (0.2: 80 %–120 %), still never above ``cap``."""

    first: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.first < 0 or self.cap < self.first or self.factor < 1:
            raise ValueError("backoff needs 0 <= first <= cap and factor >= 1")
        if not 0 <= self.jitter < 1:
            raise ValueError("backoff jitter is a fraction in [0, 1)")

    def delay(
        self,
        failures: int,
        retry_after: float | None = None,
        *,
        rand: Callable[[], float] = random.random,
    ) -> float:
        """Seconds to wait after ``failures`` consecutive failures (1: the first).
        A ``retry_after`` the server sent wins, whatever the cap (negative counts as 0):
        whether to wait that long is the caller's choice."""
        if retry_after is not None:
            return max(0.0, float(retry_after))
        exponent = min(max(failures - 1, 0), _MAX_EXPONENT)
        delay = min(self.cap, self.first * self.factor**exponent)
        if self.jitter:
            delay *= 1 - self.jitter + 2 * self.jitter * rand()
        return min(self.cap, delay)


class Retrying:
    """A run of attempts under one :class:`Backoff`: count failures, sleep the delay on
    the injected clock, start over after a success."""

    def __init__(
        self,
        backoff: Backoff,
        clock: Clock,
        *,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.backoff = backoff
        self.clock = clock
        self.failures = 0
        self.last_delay = 0.0  # the last wait (0 after a success): status pages show it
        self._rand = rand

    def failed(self, retry_after: float | None = None) -> float:
        """Count one failure; the delay before the next attempt."""
        self.failures += 1
        self.last_delay = self.backoff.delay(self.failures, retry_after, rand=self._rand)
        return self.last_delay

    def succeeded(self) -> None:
        self.failures = 0
        self.last_delay = 0.0

    async def pause(self, retry_after: float | None = None) -> float:
        """Count one failure and sleep its delay on the clock; the delay slept."""
        delay = self.failed(retry_after)
        await self.clock.sleep(delay)
        return delay
