"""The shapes a plugin hands to the Kernel (see kernel/plugins.py for the hooks).

:class:`ChannelParts`: what a channel plugin builds for one Kernel: its outbound
channel and the lifecycle steps the Kernel runs at its place in the start and stop order.
:class:`Frontend`: a part that takes work from outside (the Telegram bot, the sidecar);
the Kernel starts frontends after its core and stops them first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kernel.core.delivery import Channel

Step = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class ChannelParts:
    """``start``: before the scheduler starts (a missed run may deliver at once);
    ``stop``: at shutdown, after the frontends and the scheduler (work that starts
    turns);
    ``close``: after the agent stopped (connections, pending records);
    ``inbound``: what receives for the channel, for the route that feeds it."""

    outlet: Channel
    start: Step | None = None
    stop: Step | None = None
    close: Step | None = None
    inbound: Any = None


class Frontend(Protocol):
    async def start(self) -> None:
        """Prompt, unless registered as one that waits (then a stop signal may cancel
        it); a refusal raises StartupError."""
        ...

    async def stop(self) -> None:
        """Take no new work; bounded by the part's own shutdown timeout."""
        ...
