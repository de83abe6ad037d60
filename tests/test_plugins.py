"""Registration: the built-ins are plugins, an extension uses the same hooks, and the
Kernel starts and stops every registered part in one order (Kernel.serve)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kernel.app import Kernel
from kernel.channels.deps import ChannelDeps
from kernel.config import ProviderConfig, load_config
from kernel.core.delivery import Target
from kernel.core.errors import ConfigError, StartupError
from kernel.core.plugin import ChannelParts, Frontend
from kernel.core.provider import Provider
from kernel.cron.workflow import NODE_HANDLERS
from kernel.gateway.server import Gateway
from kernel.plugins import DEFAULT_PLUGINS, FrontendDeps, Plugins, load_plugins
from tests.conftest import write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.waiting import wait_until

# What the extension below saw, in order (reset by each test).
EVENTS: list[str] = []
BUILT: list[str] = []


class PigeonChannel:
    name = "pigeon"

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def unavailable(self) -> str:
        return ""

    async def send_text(self, target: Target, text: str) -> None:
        self.texts.append((target.user_id, text))


class Door:
    """A frontend: ``mode`` "open" starts at once, "stuck" waits forever, "refuse" raises."""

    mode = "open"

    def __init__(self, deps: FrontendDeps) -> None:
        self.deps = deps
        self.started = asyncio.Event()

    async def start(self) -> None:
        EVENTS.append("door start")
        self.started.set()
        if Door.mode == "stuck":
            await asyncio.Event().wait()
        if Door.mode == "refuse":
            raise StartupError("the door is locked")

    async def stop(self) -> None:
        # Frontends stop while the core still runs: the database still answers.
        await self.deps.store.check_writable()
        EVENTS.append("door stop")


class CooNode:
    type = "coo"

    def validate(self, node: object) -> None:
        return None

    async def execute(self, ctx: object, node: object) -> object:
        raise NotImplementedError


def extension(plugins: Plugins) -> None:
    """An outside plugin: a provider type wrapper, a channel, a tool, a node, a frontend."""
    builtin = plugins.provider_types["claude"]

    def claude(cfg: ProviderConfig) -> Provider:
        BUILT.append(cfg.name)
        return builtin(cfg)

    def pigeon(deps: ChannelDeps) -> ChannelParts:
        async def start() -> None:
            EVENTS.append("pigeon start")

        async def stop() -> None:
            EVENTS.append("pigeon stop")

        async def close() -> None:
            EVENTS.append("pigeon close")

        return ChannelParts(PigeonChannel(), start=start, stop=stop, close=close)

    def coo(times: int) -> str:
        """Coo a few times."""
        return "coo " * times

    async def door(deps: FrontendDeps) -> Frontend | None:
        return Door(deps)

    plugins.add_provider_type("claude", claude)
    # A new type name: the Anthropic API under another name, as a gateway plugin would add.
    plugins.add_provider_type("pigeon_llm", claude)
    plugins.add_channel("pigeon", pigeon)
    plugins.add_tools(lambda deps: deps.tools.tool(coo))
    plugins.add_node(CooNode())
    plugins.add_frontend("door", door, waits=True)


@pytest.fixture
def extended() -> Iterator[Plugins]:
    EVENTS.clear()
    BUILT.clear()
    Door.mode = "open"
    try:
        yield load_plugins([*DEFAULT_PLUGINS, "tests.test_plugins:extension"])
    finally:
        NODE_HANDLERS.pop("coo", None)  # node types are process-wide


def test_the_builtins_are_plugins() -> None:
    from kernel.gateway.routes import ROUTERS

    plugins = load_plugins()
    assert list(plugins.provider_types) == ["claude", "openai_compat"]
    assert list(plugins.channels) == ["console", "webhook", "qq", "telegram"]
    assert list(plugins.frontends) == ["telegram", "gateway"]
    assert [node.type for node in plugins.nodes] == ["start", "text_event", "delay", "if_event"]
    assert plugins.routers() == ROUTERS


def test_registering_the_builtins_imports_no_sdk_server_or_bot_library(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from kernel.plugins import load_plugins\n"
        "load_plugins()\n"
        "heavy = ('anthropic', 'openai', 'aiohttp', 'telegram')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


async def test_an_extension_registers_like_a_builtin_and_serve_orders_its_parts(
    anthropic_sim: AnthropicSim, tmp_path: Path, extended: Plugins, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kernel.app")
    path = write_config(tmp_path, anthropic_sim.base_url, "claude")
    config = load_config(path, env={}, require_telegram=False)
    kernel = Kernel(config, plugins=extended)
    stopped = asyncio.Event()
    serving = asyncio.create_task(kernel.serve(stopped))
    await wait_until(lambda: EVENTS[-1:] == ["door start"])
    assert not serving.done()

    assert kernel.channel_registry.names() == ["console", "webhook", "qq", "telegram", "pigeon"]
    await kernel.channel_registry.send("pigeon", Target(user_id="u1"), "hello", timeout=30)
    pigeon = kernel.channel_registry.get("pigeon")
    assert isinstance(pigeon, PigeonChannel) and pigeon.texts == [("u1", "hello")]
    assert "coo" in kernel.tools.names()
    assert "coo" in NODE_HANDLERS
    await kernel.agent.selection.provider()
    assert BUILT == ["main"]  # the provider came through the plugin's factory
    # The built-in sidecar is a frontend too, on its free port.
    gateway, door = kernel.frontends
    assert isinstance(gateway, Gateway) and isinstance(door, Door)
    async with httpx.AsyncClient() as client:
        answer = await client.get(f"{gateway.url}/healthz", timeout=30)
    assert answer.status_code == 200

    stopped.set()
    await serving
    assert EVENTS == ["pigeon start", "door start", "door stop", "pigeon stop", "pigeon close"]
    messages = [r.getMessage() for r in caplog.records if r.name == "kernel.app"]
    assert messages[-2:] == ["stop signal received; shutting down", "kernel stopped"]


async def test_a_provider_type_is_whatever_a_plugin_registers(
    anthropic_sim: AnthropicSim, tmp_path: Path, extended: Plugins
) -> None:
    """A new provider type is the plugin alone: config.toml names it and the Kernel
    builds it; a type no plugin provides is refused in the configuration's own words,
    at start and when a live change names it."""
    path = write_config(tmp_path, anthropic_sim.base_url, "pigeon_llm")
    config = load_config(path, env={}, require_telegram=False)
    kernel = Kernel(config, plugins=extended)
    provider = await kernel.agent.selection.provider()
    assert BUILT == ["main"] and provider.name == "main"
    await kernel.agent.stop()

    with pytest.raises(ConfigError) as refused:
        Kernel(config, plugins=load_plugins())  # the built-ins only: no pigeon_llm
    message = str(refused.value)
    assert "providers.main.type" in message and "pigeon_llm" in message
    assert "claude" in message and "openai_compat" in message

    def to_unknown(overlay: dict[str, object]) -> None:
        overlay["providers"] = {"main": {"type": "nope"}}

    with pytest.raises(ConfigError, match="providers.main.type"):
        await kernel.runtime.update(to_unknown)
    assert kernel.config.providers["main"].type == "pigeon_llm"  # nothing applied


async def test_a_refusal_while_starting_propagates_after_the_whole_shutdown(
    anthropic_sim: AnthropicSim, tmp_path: Path, extended: Plugins
) -> None:
    Door.mode = "refuse"
    path = write_config(tmp_path, anthropic_sim.base_url, "claude")
    config = load_config(path, env={}, require_telegram=False)
    kernel = Kernel(config, plugins=extended)
    with pytest.raises(StartupError, match="the door is locked"):
        await kernel.serve(asyncio.Event())
    assert EVENTS == ["pigeon start", "door start", "door stop", "pigeon stop", "pigeon close"]
    assert kernel.frontends == []


async def test_a_stop_signal_ends_a_start_that_still_waits(
    anthropic_sim: AnthropicSim, tmp_path: Path, extended: Plugins
) -> None:
    """As Telegram waiting for an unreachable Bot API when SIGTERM comes."""
    Door.mode = "stuck"
    path = write_config(tmp_path, anthropic_sim.base_url, "claude")
    config = load_config(path, env={}, require_telegram=False)
    kernel = Kernel(config, plugins=extended)
    stopped = asyncio.Event()
    serving = asyncio.create_task(kernel.serve(stopped))
    await wait_until(lambda: EVENTS[-1:] == ["door start"])
    stopped.set()
    await serving
    assert EVENTS == ["pigeon start", "door start", "door stop", "pigeon stop", "pigeon close"]
