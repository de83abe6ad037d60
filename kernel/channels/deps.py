"""What a channel plugin receives: :class:`ChannelDeps`, built by the composition root
(kernel/app.py) for every channel factory, and :class:`ChannelHooks`, the registration
hook a channel plugin adds its factory with (kernel/plugins.py's ``Plugins``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kernel.agent.agent import Agent
    from kernel.config import Config
    from kernel.core.clock import Clock
    from kernel.core.delivery import ChannelRegistry
    from kernel.core.plugin import ChannelParts
    from kernel.runtime import Runtime
    from kernel.store.channels import ChannelStore
    from kernel.store.db import Store


@dataclass(frozen=True, slots=True)
class ChannelDeps:
    """The configuration, the Kernel's clock, the store, the agent that answers inbound
    messages, the runtime (channel settings changed), the outbound channels and what
    channels keep across restarts."""

    config: Config
    clock: Clock
    store: Store
    agent: Agent
    runtime: Runtime
    registry: ChannelRegistry
    records: ChannelStore


ChannelFactory = Callable[[ChannelDeps], "ChannelParts"]


class ChannelHooks(Protocol):
    def add_channel(self, name: str, factory: ChannelFactory) -> None: ...
