"""Wiring: build the store, tools, providers and agent from a Config, start and stop
them in one written-down order."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernel.agent.agent import Agent
from kernel.agent.titles import TitleMaker
from kernel.config import Config
from kernel.errors import StartupError, StoreError
from kernel.i18n import t
from kernel.providers import create_provider, create_titles_provider
from kernel.providers.base import Provider, Sleep
from kernel.runtime import Runtime
from kernel.store.db import Store
from kernel.tools import memory
from kernel.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


_PUBLIC_HEADERS = {"user-agent", "accept", "accept-language", "content-type"}


def _header_secrets(headers: dict[str, str]) -> list[str]:
    return [v for k, v in headers.items() if k.lower() not in _PUBLIC_HEADERS]


def secrets_of(config: Config) -> list[str]:
    """Every configured value that must never reach a log line or an error message."""
    from kernel.runtime import is_sensitive

    found = [config.telegram.token, config.gateway.api_key]
    found += [v for k, v in config.envs.items() if is_sensitive(k)]
    for p in config.providers.values():
        found += [p.api_key, *_header_secrets(p.headers)]
    if config.titles:
        found += [config.titles.api_key, *_header_secrets(config.titles.headers)]
    for server in config.mcp_servers:
        found += list(server.headers.values())  # MCP headers: always secret (seed 004)
    return [s for s in found if s]


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

    def __init__(self, config: Config, *, sleep: Sleep = asyncio.sleep) -> None:
        self.config = config
        self.store = Store(config.db_path)
        self.tools = ToolRegistry()
        self._sleep = sleep
        self.agent = Agent(config, self.store, self.tools, self._make_provider, sleep=sleep)
        self.runtime = Runtime(config)
        self.runtime.on_providers_changed(self.agent.providers_changed)
        self.channels: dict[str, ChannelStatus] = {}

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
        if self.config.titles is not None:
            provider = await asyncio.to_thread(create_titles_provider, self.config.titles)
            self.agent.titles = TitleMaker(provider, self._sleep)
        memory.register(self.tools, self.store)
        self.tools.disable(self.config.general.disabled_tools)
        await self.agent.start()
        log.info(
            "kernel started: provider=%s model=%s tools=%d",
            self.agent.provider_name,
            self.agent.model,
            len(self.tools.names()),
        )

    async def stop(self) -> None:
        """Turns first (they write their last history), then the database last."""
        await self.agent.stop()
        if self.agent.titles is not None:
            await self.agent.titles.provider.aclose()
        await self.store.close()
        log.info("kernel stopped")

    async def __aenter__(self) -> Kernel:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
