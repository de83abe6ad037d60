"""Starting ``kernel tui``: over the sidecar at ``url``, or over a Kernel core started in
this process (no Telegram: deliveries to it fail at once, as in ``kernel chat``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from kernel.config import Config
from kernel.core.platform import install_stop
from kernel.tui.app import KernelTui
from kernel.tui.local import LocalBackend
from kernel.tui.remote import HttpBackend

if TYPE_CHECKING:
    from kernel.commands.parts import LocalCore


async def run_remote(url: str, api_key: str = "") -> int:
    backend = HttpBackend(url, api_key)
    app = KernelTui(backend)
    try:
        await _run(app)
    finally:
        await backend.close()
    return app.return_code or 0  # 1 when the app itself failed


async def run_local(config: Config, make_kernel: Callable[[Config], LocalCore]) -> int:
    kernel = make_kernel(config)
    kernel.channel_registry.detach("telegram")
    async with kernel:
        app = KernelTui(LocalBackend(kernel))
        await _run(app)
    return app.return_code or 0  # 1 when the app itself failed


async def _run(app: KernelTui) -> None:
    """The terminal closed (SIGHUP) or the process asked to stop (SIGTERM): quit the way
    Ctrl+Q does (the running turn cancelled and awaited), so an in-process Kernel stops
    cleanly (review R3). Ctrl+C is a key here (the terminal is raw), not a signal."""
    loop = asyncio.get_running_loop()

    pending: set[asyncio.Task[bool]] = set()

    def stop() -> None:
        task = loop.create_task(app.run_action("quit_tui"))
        pending.add(task)
        task.add_done_callback(pending.discard)

    try:
        restore = install_stop(loop, stop, signals=("SIGTERM", "SIGHUP"))
    except (NotImplementedError, RuntimeError, ValueError):  # no handlers here (a thread)
        restore = None
    try:
        await app.run_async()
    finally:
        if restore is not None:
            restore()
