"""The lifecycle the small simulators share: an aiohttp app on a loopback port."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Self

from aiohttp import web

from tests.waiting import event_or_tick, wait_until


class LoopbackServer:
    """Subclasses set ``host``/``port`` and build their routes in :meth:`routes`."""

    host: str
    port: int
    _runner: web.AppRunner | None = None
    _arrived: asyncio.Event  # set by a subclass whenever a request arrives

    async def wait_until(
        self,
        condition: Callable[[], bool],
        timeout: float = 30,  # noqa: ASYNC109 (the documented API)
    ) -> None:
        """``tests.waiting.wait_until``, rechecked as soon as a request arrives."""

        async def pause() -> None:
            self._arrived.clear()
            await event_or_tick(self._arrived)

        await wait_until(condition, timeout=timeout, pause=pause)

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def start(self) -> Self:
        app = web.Application()
        self.routes(app)
        runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, self.host, self.port).start()
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
