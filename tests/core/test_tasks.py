"""TaskSet: tasks are kept, failures logged by type and handed on, close() cancels."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kernel.core.tasks import TaskSet


async def test_a_failure_is_logged_by_type_and_handed_on(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[BaseException] = []
    tasks = TaskSet("test", on_error=lambda _task, error: seen.append(error))

    async def boom() -> None:
        raise ValueError("secret outside text")

    with caplog.at_level(logging.WARNING, logger="kernel.core.tasks"):
        task = tasks.spawn(boom(), "boom")
        await asyncio.wait([task])
        await asyncio.sleep(0)
    assert [type(e) for e in seen] == [ValueError]
    assert "ValueError" in caplog.text and "boom" in caplog.text
    assert "secret outside text" not in caplog.messages[0]
    assert len(tasks) == 0


async def test_close_cancels_what_is_left() -> None:
    tasks = TaskSet("test")
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    tasks.spawn(forever(), "forever")
    await started.wait()
    assert len(tasks.running()) == 1
    await tasks.close()
    assert cancelled.is_set()
    assert len(tasks) == 0
