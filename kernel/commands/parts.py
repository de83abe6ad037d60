"""What the commands read of the composition root: :class:`KernelParts` (the agent,
the store, memories, delegation, cron and the MCP manager's status), and
:class:`LocalCore`, those parts as a core started in this process (``kernel chat``,
``kernel tui``). kernel/app.py's ``Kernel`` provides both; nothing here imports it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kernel.core.ports import Service

if TYPE_CHECKING:
    from kernel.agent.agent import Agent
    from kernel.commands.mcp import ServerLine
    from kernel.core.delivery import ChannelRegistry
    from kernel.cron.scheduler import CronScheduler
    from kernel.delegate.delegator import Delegator
    from kernel.memory.memories import Memories
    from kernel.store.db import Store


class StatusSource(Protocol):
    """The MCP manager (kernel.mcp.MCPManager): the /status line, the /mcp listing."""

    def status_text(self) -> str: ...
    def status(self) -> Sequence[ServerLine]: ...


class KernelParts(Protocol):
    """What the commands use of the composition root."""

    @property
    def agent(self) -> Agent: ...
    @property
    def store(self) -> Store: ...
    @property
    def memories(self) -> Memories: ...
    @property
    def delegator(self) -> Delegator: ...
    @property
    def cron(self) -> CronScheduler: ...
    @property
    def mcp(self) -> StatusSource: ...


class LocalCore(KernelParts, Service, Protocol):
    """A core started in this process: its parts, started and stopped by ``async with``,
    and its outbound channels (the terminal detaches Telegram's)."""

    @property
    def channel_registry(self) -> ChannelRegistry: ...
