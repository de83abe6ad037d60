"""What the Telegram channel is given, and what its parts share.

:class:`TelegramServices` is the channel's narrow port onto Kernel: the services it
uses, built in ``kernel/app.py`` (the composition root), never the whole ``Kernel``.
It also serves the shared commands (:class:`kernel.commands.command_set.KernelParts`).

:class:`Deps` is the one frozen object every part of the channel (inbound, mailroom,
files, commands, the busy desk, the picker, the outlet) gets: the services, the
channel's settings, the clock, the bot and the things built once per channel (the
outbox, the question board, the tracked tasks, the chats' views). A part reaches
another part only when it is handed that part, never through the channel object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.telegram.outbox import plain_items
from kernel.telegram.topics import CONVERSATION, TOPIC_BASE

if TYPE_CHECKING:
    from telegram.ext import Application

    from kernel.agent.agent import Agent
    from kernel.audit import AuditLog
    from kernel.commands.parts import StatusSource
    from kernel.config import Config
    from kernel.config.general import TelegramConfig
    from kernel.core.clock import Clock
    from kernel.core.delivery import ChannelRegistry
    from kernel.core.status import StatusBoard
    from kernel.cron.scheduler import CronScheduler
    from kernel.delegate.delegator import Delegator
    from kernel.memory.memories import Memories
    from kernel.store.artifacts import ArtifactStore
    from kernel.store.db import Store
    from kernel.telegram.asks import AskBoard
    from kernel.telegram.outbox import Outbox
    from kernel.telegram.polling import PollingBot

log = logging.getLogger(__name__)


def conversation_of(chat_id: int) -> str:
    """The agent's conversation of a Telegram chat, or of a topic's lane (``topics.py``)."""
    if chat_id >= TOPIC_BASE:
        return CONVERSATION.format(thread=chat_id - TOPIC_BASE)
    return f"telegram:{chat_id}"


@dataclass(frozen=True)
class TelegramServices:
    """The parts of Kernel the Telegram channel uses (built in ``kernel/app.py``)."""

    config: Config
    clock: Clock
    agent: Agent
    store: Store
    memories: Memories
    delegator: Delegator
    cron: CronScheduler
    mcp: StatusSource
    audit: AuditLog
    artifacts: ArtifactStore
    needs_approval: Callable[[str], bool]  # whether a tool runs only once approved
    channel_registry: ChannelRegistry
    status_board: StatusBoard


class Lifetime:
    """The channel's tracked background work (cancelled at stop) and whether it stops."""

    def __init__(self, outbox: Outbox, owner: int) -> None:
        self.outbox = outbox
        self.owner = owner
        self.started = False
        self.stopping = False
        self.tasks = TaskSet("telegram")  # replies, commands: awaited at stop

    @property
    def running(self) -> bool:
        return self.started and not self.stopping

    def spawn(
        self, coro: Coroutine[Any, Any, None], name: str, *, for_owner: bool = False
    ) -> asyncio.Task[None]:
        """Tracked background work, cancelled at stop. ``for_owner``: work the owner
        asked for, so a failure is told in the chat, as the update error handler would."""
        if for_owner:
            coro = self._telling_failures(coro)
        return self.tasks.spawn(coro, name)

    async def _telling_failures(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except Exception as exc:
            log.error("owner task failed: %s", type(exc).__name__, exc_info=exc)
            await self.tell_owner(exc)

    async def tell_owner(self, error: BaseException | None) -> None:
        """One notice: the disk's trouble and its fix when the store failed for it, else
        an internal error; straight through the Bot API when it cannot be queued."""
        words = await self.outbox.trouble_words(error) if error is not None else None
        text = words or t("turn.internal_error", kind=type(error).__name__)
        try:
            await self.outbox.put(self.owner, plain_items(text))
        except Exception as exc:  # the outbox cannot be written: tell the owner directly
            log.error("could not queue a failure notice: %s; telling directly", type(exc).__name__)
            direct = words or await self.outbox.trouble_words(exc) or text
            await self.outbox.tell_directly(self.owner, direct)


class Views:
    """Each chat's task showing its turn (a view, a download being read, a message
    waiting for a stopped turn to wind down): the chat is busy while it runs."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def get(self, chat_id: int) -> asyncio.Task[None] | None:
        return self.tasks.get(chat_id)

    def __setitem__(self, chat_id: int, task: asyncio.Task[None]) -> None:
        self.tasks[chat_id] = task

    def busy(self, chat_id: int) -> bool:
        view = self.tasks.get(chat_id)
        return self.agent.sessions.is_busy(conversation_of(chat_id)) or bool(
            view and not view.done()
        )


@dataclass(frozen=True)
class Deps:
    """What every part of the Telegram channel is given (one per channel)."""

    services: TelegramServices
    cfg: TelegramConfig
    clock: Clock
    app: Application[Any, Any, Any, Any, Any, Any]
    bot: PollingBot
    outbox: Outbox
    board: AskBoard
    life: Lifetime
    views: Views

    @property
    def owner(self) -> int:
        return self.cfg.allowed_user

    @property
    def agent(self) -> Agent:
        return self.services.agent

    @property
    def config(self) -> Config:
        return self.services.config
