"""Wiring: build the store, tools, providers and agent from a Config, start and stop
them in one written-down order."""

from __future__ import annotations

import asyncio
import logging

from kernel.agent.agent import Agent
from kernel.config import Config
from kernel.providers import create_provider
from kernel.providers.base import Provider, Sleep
from kernel.store.db import Store
from kernel.tools import memory
from kernel.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


def secrets_of(config: Config) -> list[str]:
    found = [config.telegram.token, config.gateway.api_key]
    for p in config.providers.values():
        found += [p.api_key, *p.headers.values()]
    if config.titles:
        found += [config.titles.api_key, *config.titles.headers.values()]
    for server in config.mcp_servers:
        found += list(server.headers.values())
    return [s for s in found if s]


class Kernel:
    """The assembled assistant, independent of any channel."""

    def __init__(self, config: Config, *, sleep: Sleep = asyncio.sleep) -> None:
        self.config = config
        self.store = Store(config.db_path)
        self.tools = ToolRegistry()
        self.agent = Agent(config, self.store, self.tools, self._make_provider, sleep=sleep)

    def _make_provider(self, name: str) -> Provider:
        return create_provider(self.config.providers[name])

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        await self.store.start()
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
        await self.store.close()
        log.info("kernel stopped")

    async def __aenter__(self) -> Kernel:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
