"""What running channels report about themselves for /healthz and /status.

Not to be confused with :class:`kernel.core.delivery.ChannelRegistry`, the outbound
channels every delivery goes through: the :class:`StatusBoard` only lists channels whose
health others show (the sidecar reads Telegram's polling state without importing it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class ChannelState:
    """One channel's state: "running", "starting", "degraded" or "stopped"."""

    name: str
    state: str
    detail: dict[str, Any] = field(default_factory=dict)


class ChannelStatus(Protocol):
    """A channel that reports its state on the board (async: a channel may read its
    records, e.g. Telegram's inbox and outbox, to report)."""

    name: str

    async def status(self) -> ChannelState: ...


class StatusBoard:
    """The running channels whose state /healthz shows, by name."""

    def __init__(self) -> None:
        self._channels: dict[str, ChannelStatus] = {}

    def add(self, channel: ChannelStatus) -> None:
        self._channels[channel.name] = channel

    async def states(self) -> list[ChannelState]:
        return [await channel.status() for channel in self._channels.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._channels
