"""Wiring: build the store, tools, providers and agent from a Config, start and stop
them in one written-down order."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernel.agent.agent import SKILLS_FOLDER, Agent
from kernel.agent.titles import TitleMaker
from kernel.channels.console import ConsoleChannel
from kernel.channels.qq import QQChannel
from kernel.channels.qq_inbound import QQInbound
from kernel.channels.webhook import WebhookChannel
from kernel.config import Config
from kernel.core.clock import Clock, SystemClock
from kernel.core.delivery import ChannelRegistry, Detached
from kernel.core.errors import StartupError, StoreError
from kernel.core.i18n import t
from kernel.core.provider import Provider, Sleep
from kernel.cron import tools as cron_tools
from kernel.cron.runner import JobRunner
from kernel.cron.scheduler import CronScheduler
from kernel.delegate import tool as delegate_tool
from kernel.delegate.delegator import Delegator
from kernel.mcp import MCPManager
from kernel.mcp.interact import agent_sampler
from kernel.memory.memories import Memories
from kernel.providers import create_provider, create_titles_provider
from kernel.providers.retirement import retirement_notices
from kernel.retention import RetentionJob
from kernel.runtime import Runtime
from kernel.selfops import Mutations
from kernel.skills import SkillLibrary
from kernel.store.channels import ChannelStore
from kernel.store.cron import CronStore
from kernel.store.db import Store
from kernel.tools import ask, memory
from kernel.tools.registry import ToolRegistry
from kernel.workspace import Workspace
from kernel.workspace.archive import Archives

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChannelState:
    """What a channel reports about itself for /healthz and /status."""

    name: str
    state: str  # "running", "starting", "degraded" or "stopped"
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        return self.state == "running"


class ChannelStatus(Protocol):
    """A channel that registers with the Kernel so others can see its state without
    importing it (the sidecar never imports telegram)."""

    name: str

    def status(self) -> ChannelState: ...


class Kernel:
    """The assembled assistant, independent of any channel."""

    def __init__(
        self, config: Config, *, sleep: Sleep = asyncio.sleep, clock: Clock | None = None
    ) -> None:
        """``clock``: what cron, token expiry and webhook backoff see as time (tests
        inject one they drive); ``sleep``: provider retry waits."""
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.store = Store(config.db_path)
        self.memories = Memories(self.store, config.data_dir / "cache")
        self.tools = ToolRegistry()
        self.mcp = MCPManager(config, self.tools)
        self._sleep = sleep
        self.delegator = Delegator(config)
        self.skills = SkillLibrary(config.base_dir / SKILLS_FOLDER)
        self.agent = Agent(
            config,
            self.store,
            self.tools,
            self._make_provider,
            sleep=sleep,
            memories=self.memories,
            skills=self.skills,
            clock=self.clock.now,
        )
        self.mcp.sampler = agent_sampler(self.agent)  # MCP sampling: the agent's own model
        self.retention = RetentionJob(config.data_dir, config.general.retention_days)
        self.runtime = Runtime(config)
        self.runtime.on_providers_changed(self.agent.providers_changed)
        # The workspace the sidecar serves: config.toml and the data dir never among it.
        self.workspace = Workspace(
            config.general.default_workspace,
            protected=[config.path, config.data_dir],
            allow_hard_links=config.gateway.allow_hard_links,
        )
        self.archives = Archives(
            self.workspace,
            config.data_dir / "tmp",
            max_bytes=config.gateway.archive_max_bytes,
            max_files=config.gateway.archive_max_files,
        )
        # SelfOps writes beside config.toml, maybe the same folder: one lock for both.
        self.selfops = Mutations(config, self.runtime, self.agent, lock=self.workspace.lock)
        self.channels: dict[str, ChannelStatus] = {}
        # Outbound channels (seed 000's Channel plugins): every delivery goes through here.
        self.channel_registry = ChannelRegistry()
        records = ChannelStore(self.store)  # what channels keep across restarts
        self.webhook = WebhookChannel(config, self.clock, records)
        self.qq = QQChannel(config, self.clock)
        self.channel_registry.register(ConsoleChannel(config, self.store))
        self.channel_registry.register(self.webhook, close=self.webhook.aclose)
        self.channel_registry.register(self.qq, close=self.qq.aclose)
        # Attached by TelegramChannel once it runs; deliveries due before then (a missed
        # cron run fired at start) wait for it when Telegram is configured.
        telegram = Detached("telegram", pending=bool(config.telegram.token))
        self.channel_registry.register(telegram)
        self.runtime.on_channels_changed(self.qq.settings_changed)
        self.qq_inbound = QQInbound(self.qq, self.agent, self.channel_registry, records)
        self.cron = CronScheduler(
            config,
            CronStore(self.store),
            JobRunner(config, self.agent, self.channel_registry, self.clock),
            self.clock,
            self.channel_registry.names,
        )

    def register_channel(self, channel: ChannelStatus) -> None:
        self.channels[channel.name] = channel

    def channel_states(self) -> list[ChannelState]:
        return [channel.status() for channel in self.channels.values()]

    def _make_provider(self, name: str) -> Provider:
        return create_provider(self.config.providers[name])

    async def start(self) -> None:
        try:
            self.config.data_dir.mkdir(parents=True, exist_ok=True)
            await self.store.start()
        except (OSError, StoreError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            path = self.config.data_dir
            raise StartupError(t("startup.storage", path=path, detail=detail)) from None
        await self.webhook.load()
        if self.config.titles is not None:
            titles = self.config.titles
            self.agent.titles = TitleMaker(lambda: create_titles_provider(titles), self._sleep)
        memory.register(self.tools, self.memories)
        ask.register(self.tools)
        delegate_tool.register(self.tools, self.delegator)
        if self.config.cron.enabled:
            cron_tools.register(self.tools, self.cron)
        self.tools.disable(self.config.general.disabled_tools)
        for policy in self.config.tools.values():
            if policy.approval:
                self.tools.require_approval(policy.name, policy.approval_timeout)
        try:
            await self.mcp.start()
            await self.agent.start()
        except BaseException:
            await self.mcp.stop()  # no stdio child may outlive a failed start
            raise
        if self.config.cron.enabled:
            await self.cron.start()
        self.retention.start()
        for notice in retirement_notices(self.config, self.clock.now().date()):
            log.warning("%s", notice.describe())
        log.info(
            "kernel started: provider=%s model=%s tools=%d",
            self.agent.provider_name,
            self.agent.model,
            len(self.tools.names()),
        )

    async def stop(self) -> None:
        """Turns first (they write their last history; cancelling one kills its CLI), then
        any CLI still running, MCP sessions and their child processes, the database last.
        Scheduled jobs and QQ messages stop first: they start turns."""
        await self.cron.stop()
        await self.qq_inbound.stop()
        await self.retention.stop()
        await self.agent.stop()
        await self.delegator.stop()
        await self.mcp.stop()
        if self.agent.titles is not None:
            await self.agent.titles.aclose()
        await self.channel_registry.aclose()
        await self.store.close()
        log.info("kernel stopped")

    async def __aenter__(self) -> Kernel:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
