"""The one way a test waits for a condition that has no event of its own to await.

    await wait_until(lambda: job.status == "done", what="the job done")

``wait_until`` rechecks ``condition()`` (awaited if it returns an awaitable: an HTTP
read, say) after every ``pause`` (by default a 20 ms sleep; a simulator passes one that
returns early when a request arrives, the TUI one that lets the app run) and raises
``TimeoutError`` naming ``what`` after ``timeout`` seconds. The limit is generous on
purpose: a loaded machine is slow, and a test never measures time with it (the
simulators' ``wait_until`` methods delegate here).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable

TICK = 0.02  # seconds between checks when nothing wakes the waiter earlier
LIMIT = 30.0  # seconds before a wait fails the test (not a bound on the code under test)


async def wait_until(
    condition: Callable[[], object] | Callable[[], Awaitable[object]],
    *,
    timeout: float = LIMIT,  # noqa: ASYNC109 (a limit for a failing test, not a deadline)
    what: str = "condition",
    pause: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Return once ``condition()`` is true; ``TimeoutError`` after ``timeout`` seconds."""
    between = pause or (lambda: asyncio.sleep(TICK))
    try:
        async with asyncio.timeout(timeout):
            while not await _holds(condition):
                await between()
    except TimeoutError:
        raise TimeoutError(f"{what} not met within {timeout:g} s") from None


async def _holds(condition: Callable[[], object]) -> bool:
    """``condition()``, awaited when it is a coroutine function (an HTTP read, say)."""
    value = condition()
    return bool(await value if inspect.isawaitable(value) else value)


async def event_or_tick(event: asyncio.Event, tick: float = TICK) -> None:
    """A ``pause``: return when ``event`` is set or after ``tick`` seconds."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(tick):
            await event.wait()
