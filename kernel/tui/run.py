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
    try:
        code = await KernelTui(backend).run_async()
    finally:
        await backend.close()
    return code or 0


async def run_local(config: Config, make_kernel: Callable[[Config], Kernel]) -> int:
    kernel = make_kernel(config)
    kernel.channel_registry.detach("telegram")
    async with kernel:
        code = await KernelTui(LocalBackend(kernel)).run_async()
    return code or 0
