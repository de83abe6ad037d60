"""Starting ``kernel tui``: over the sidecar at ``url``, or over a Kernel core started in
this process (no Telegram: deliveries to it fail at once, as in ``kernel chat``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kernel.config import Config
from kernel.tui.app import KernelTui
from kernel.tui.local import LocalBackend
from kernel.tui.remote import HttpBackend

if TYPE_CHECKING:
    from kernel.app import Kernel


async def run_remote(url: str, api_key: str = "") -> int:
    backend = HttpBackend(url, api_key)
    app = KernelTui(backend)
    try:
        await app.run_async()
    finally:
        await backend.close()
    return app.return_code or 0  # 1 when the app itself failed


async def run_local(config: Config, make_kernel: Callable[[Config], Kernel]) -> int:
    kernel = make_kernel(config)
    kernel.channel_registry.detach("telegram")
    async with kernel:
        app = KernelTui(LocalBackend(kernel))
        await app.run_async()
    return app.return_code or 0  # 1 when the app itself failed
