"""TaskSet: the one way Kernel runs background work.

Every long-lived or fire-and-forget coroutine goes through a TaskSet owned by the part
that started it: the task is named, kept referenced until it ends (asyncio holds only a
weak reference), a failure is logged by its exception type in the line itself (its
traceback follows through the log's redacting formatter), and ``close()`` cancels
what is left and waits for it, so stopping a part never leaves work running behind it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
ErrorHook = Callable[[asyncio.Task[Any], BaseException], None]


class TaskSet:
    def __init__(self, owner: str, *, on_error: ErrorHook | None = None) -> None:
        """``owner`` names the part in log lines; ``on_error`` is called (after the log
        line) with a task that raised, e.g. to tell the owner."""
        self.owner = owner
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_error = on_error

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        log.warning(
            "%s: background task %s failed: %s",
            self.owner,
            task.get_name(),
            type(error).__name__,
            exc_info=error,
        )
        if self._on_error is not None:
            self._on_error(task, error)

    def __len__(self) -> int:
        return len(self._tasks)

    def running(self) -> list[asyncio.Task[Any]]:
        return [task for task in self._tasks if not task.done()]

    async def wait(self, seconds: float | None = None) -> None:
        """Wait for the tasks running now to end by themselves (up to ``seconds``)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=seconds)

    async def close(self, seconds: float | None = None) -> None:
        """Cancel every task and wait for them to finish (up to ``seconds``)."""
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=seconds)
