"""A sliding window: at most ``limit`` events in any ``seconds`` (exact, unlike a token
bucket's burst). The one such count in Kernel: Telegram's overall and group budgets
(:mod:`kernel.telegram.budget`), ``notify_owner`` per minute (:mod:`kernel.mcp.endpoint`),
guesses of the sidecar's key (:mod:`kernel.gateway.guesses`).

Pure bookkeeping, no clock of its own: every method takes ``now`` (the caller's monotonic
clock), so a test can drive it. It remembers one time per event within the window, and
never more than it is asked to count: a caller that takes only when :meth:`wait` is 0
keeps at most ``limit`` times.
"""

from __future__ import annotations

from collections import deque


class SlidingWindow:
    """At most ``limit`` events in any ``seconds``."""

    def __init__(self, limit: int, seconds: float) -> None:
        self.limit = limit
        self.seconds = seconds
        self.times: deque[float] = deque()

    def _trim(self, now: float) -> None:
        while self.times and self.times[0] <= now - self.seconds:
            self.times.popleft()

    def level(self, now: float) -> float:
        """Events that may still happen now."""
        self._trim(now)
        return float(self.limit - len(self.times))

    def wait(self, now: float) -> float:
        """Seconds until one more event may happen (0: now)."""
        self._trim(now)
        if len(self.times) < self.limit:
            return 0.0
        return self.times[len(self.times) - self.limit] + self.seconds - now

    def take(self, now: float) -> None:
        """Count an event at ``now`` (whether there was room is :meth:`wait`'s question)."""
        self._trim(now)
        self.times.append(now)

    def give_back(self, at: float) -> None:
        """Forget one event counted at ``at``: it did not happen after all."""
        for index in range(len(self.times) - 1, -1, -1):
            if self.times[index] == at:
                del self.times[index]
                return

    def idle(self, now: float) -> bool:
        """No event in the window."""
        self._trim(now)
        return not self.times
