"""Registration: built-ins and extensions add their parts through the same hooks.

A plugin is a function ``register(plugins: Plugins) -> None`` (llm's
``DEFAULT_PLUGINS``, datasette's built-in plugins): it adds provider types, channels,
tools, cron workflow nodes, coding-CLI adapters, sidecar route groups and frontends.
:data:`DEFAULT_PLUGINS` lists the built-ins in order, each as ``"module"`` (its ``register``) or
``"module:function"``; a new provider type or channel is one new package with a
``register`` function plus one line there. Registering imports no SDK, aiohttp or
python-telegram-bot: the factories import them when they build. The built-ins of
packages that have no registration of their own (Telegram, the tools, delegation,
cron, the sidecar) are the functions at the end of this module.

Each factory receives a narrow, declared interface built by the composition root
(kernel/app.py), never the Kernel: :class:`ChannelDeps`, :class:`ToolDeps`,
:class:`FrontendDeps`.

Public API: :class:`Plugins` (the hooks), :data:`DEFAULT_PLUGINS`, :func:`load_plugins`,
:func:`default_plugins`, the three deps.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernel.channels.deps import ChannelDeps, ChannelFactory
from kernel.config import Config, ProviderConfig
from kernel.config.schema import bad_choice
from kernel.core.delivery import Detached
from kernel.core.plugin import ChannelParts, Frontend
from kernel.core.provider import Provider

if TYPE_CHECKING:
    from kernel.core.delivery import ChannelRegistry
    from kernel.cron.scheduler import CronScheduler
    from kernel.cron.workflow import NodeHandler
    from kernel.delegate.adapters import CliAdapter
    from kernel.delegate.delegator import Delegator
    from kernel.gateway.api import Router
    from kernel.memory.memories import Memories
    from kernel.profiles import Profiles
    from kernel.store.artifacts import ArtifactStore
    from kernel.store.db import Store
    from kernel.tools.registry import ToolRegistry


@dataclass(frozen=True, slots=True)
class ToolDeps:
    """What a tools hook registers its tools with and over (built at start)."""

    config: Config
    tools: ToolRegistry
    memories: Memories
    delegator: Delegator
    profiles: Profiles
    cron: CronScheduler
    # What a tool may make and send into a chat (a browser screenshot), and the closers
    # Kernel's stop awaits (a Chromium a tool started): issue 38.
    artifacts: ArtifactStore | None = None
    channels: ChannelRegistry | None = None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FrontendDeps:
    """What a frontend factory builds from: the configuration, the store, the sidecar's
    route groups, and the built-in frontends over the dependencies kernel/app.py gives
    them (``telegram()``: the bot; ``gateway(routers)``: the sidecar, its module
    imported first)."""

    config: Config
    store: Store
    routers: Callable[[], list[Router]]
    telegram: Callable[[], Frontend]
    gateway: Callable[[Sequence[Router]], Frontend]


ProviderFactory = Callable[[ProviderConfig], Provider]
ToolsHook = Callable[[ToolDeps], None]
RoutesSource = Callable[[], Sequence["Router"]]
FrontendFactory = Callable[[FrontendDeps], Awaitable[Frontend | None]]

DEFAULT_PLUGINS: tuple[str, ...] = (
    "kernel.providers",
    "kernel.channels:console_plugin",
    "kernel.channels:webhook_plugin",
    "kernel.channels:qq_plugin",
    "kernel.plugins:telegram",
    "kernel.plugins:tools",
    "kernel.plugins:web",
    "kernel.plugins:browser",
    "kernel.plugins:delegation",
    "kernel.plugins:cron",
    "kernel.plugins:gateway",
)


class Plugins:
    """What the plugins registered, in registration order."""

    def __init__(self) -> None:
        self.provider_types: dict[str, ProviderFactory] = {}
        self.channels: dict[str, ChannelFactory] = {}
        self.tools: list[ToolsHook] = []
        self.nodes: list[NodeHandler] = []
        self.clis: list[str] = []
        self.route_sources: list[RoutesSource] = []
        self.frontends: dict[str, FrontendFactory] = {}
        self.waiting_frontends: set[str] = set()

    def add_provider_type(self, type_name: str, factory: ProviderFactory) -> None:
        """``providers.<name>.type = "<type_name>"`` is built by ``factory``."""
        self.provider_types[type_name] = factory

    def add_channel(self, name: str, factory: ChannelFactory) -> None:
        """A delivery channel, built when the Kernel is (its outlet named ``name``)."""
        self.channels[name] = factory

    def add_tools(self, hook: ToolsHook) -> None:
        """``hook(deps)`` registers tools in ``deps.tools`` at start."""
        self.tools.append(hook)

    def add_node(self, handler: NodeHandler) -> None:
        """A cron workflow node type. Node types are process-wide: a job's workflow is
        checked wherever it is parsed."""
        from kernel.cron.workflow import register_node

        register_node(handler)
        self.nodes.append(handler)

    def add_cli(self, adapter: CliAdapter) -> None:
        """A coding CLI for ``delegate_to_cli`` (seed 003): its adapter (command line,
        output format, permission wiring, version probe) and its ``[cli.<name>]``
        defaults. Process-wide, as node types are: a configuration read after this knows
        the table."""
        from kernel.delegate.adapters import register_adapter

        register_adapter(adapter)
        self.clis.append(adapter.name)

    def add_routes(self, source: RoutesSource) -> None:
        """A group of sidecar routes; ``source`` is called (importing aiohttp) only when
        the sidecar is built."""
        self.route_sources.append(source)

    def add_frontend(self, name: str, factory: FrontendFactory, *, waits: bool = False) -> None:
        """A part started after the Kernel's core and stopped first; ``factory`` returns
        None when the part is not configured. Its ``start()`` is awaited in order, so a
        refusal ends the start-up at once; ``waits``: it may wait long for an outside
        party instead (Telegram's Bot API), so it runs beside the others, until a stop
        signal cancels it."""
        self.frontends[name] = factory
        if waits:
            self.waiting_frontends.add(name)

    def check_config(self, config: Config) -> None:
        """Refuse (ConfigError, the configuration's own one-line wording) a provider or
        titles type that no plugin provides, for a configuration read without the names
        (``load_config(provider_types=...)`` checks them as it reads)."""
        types = tuple(self.provider_types)
        tables = [(f"providers.{name}.type", p.type) for name, p in config.providers.items()]
        if config.titles is not None:
            tables.append(("titles.type", config.titles.type))
        for key, kind in tables:
            if kind not in self.provider_types:
                raise bad_choice(key, types, kind)

    def create_provider(self, cfg: ProviderConfig) -> Provider:
        try:
            factory = self.provider_types[cfg.type]
        except KeyError:
            raise ValueError(f"no plugin provides provider type {cfg.type!r}") from None
        return factory(cfg)

    def routers(self) -> list[Router]:
        return [router for source in self.route_sources for router in source()]


def load_plugins(modules: Iterable[str] = DEFAULT_PLUGINS) -> Plugins:
    """A registry filled by each module's ``register`` in order."""
    plugins = Plugins()
    for entry in modules:
        module, _, function = entry.partition(":")
        getattr(importlib.import_module(module), function or "register")(plugins)
    return plugins


_default: Plugins | None = None


def default_plugins() -> Plugins:
    """The built-ins, loaded once per process."""
    global _default
    if _default is None:
        _default = load_plugins()
    return _default


def telegram(plugins: Plugins) -> None:
    def outlet(deps: ChannelDeps) -> ChannelParts:
        # The bot attaches its outlet once it runs; deliveries due before then (a missed
        # cron run fired at start) wait for it when Telegram is configured.
        return ChannelParts(Detached("telegram", pending=bool(deps.config.telegram.token)))

    async def bot(deps: FrontendDeps) -> Frontend | None:
        if not deps.config.telegram.token:
            return None  # `kernel run` refuses to start without one
        return deps.telegram()

    plugins.add_channel("telegram", outlet)
    plugins.add_frontend("telegram", bot, waits=True)


def tools(plugins: Plugins) -> None:
    from kernel.tools import ask, memory, todo

    plugins.add_tools(lambda deps: memory.register(deps.tools, deps.memories))
    plugins.add_tools(lambda deps: ask.register(deps.tools))
    plugins.add_tools(lambda deps: todo.register(deps.tools))


def web(plugins: Plugins) -> None:
    def register(deps: ToolDeps) -> None:
        from kernel import web

        web.register(deps.tools, deps.config)

    plugins.add_tools(register)


def browser(plugins: Plugins) -> None:
    def register(deps: ToolDeps) -> None:
        if not deps.config.browser.enabled:
            return  # nothing of the browser is imported
        from kernel import browser

        closer = browser.register(
            deps.tools, deps.config, artifacts=deps.artifacts, channels=deps.channels
        )
        if closer is not None:
            deps.closers.append(closer)

    plugins.add_tools(register)


def delegation(plugins: Plugins) -> None:
    from kernel.delegate import tool

    plugins.add_tools(lambda deps: tool.register(deps.tools, deps.delegator, deps.profiles))


def cron(plugins: Plugins) -> None:
    from kernel.cron import tools as cron_tools
    from kernel.cron.workflow import DelayNode, IfEventNode, StartNode, TextEventNode

    def register_tools(deps: ToolDeps) -> None:
        if deps.config.cron.enabled:
            cron_tools.register(deps.tools, deps.cron)

    plugins.add_tools(register_tools)
    for node in (StartNode(), TextEventNode(), DelayNode(), IfEventNode()):
        plugins.add_node(node)


def gateway(plugins: Plugins) -> None:
    def routes() -> Sequence[Router]:
        from kernel.gateway.routes import ROUTERS

        return ROUTERS

    async def sidecar(deps: FrontendDeps) -> Frontend | None:
        if not deps.config.gateway.enabled:
            return None
        # Imported in a thread while Telegram connects: importing aiohttp's server takes
        # ~0.3 s, which would otherwise delay the first getUpdates.
        await asyncio.to_thread(importlib.import_module, "kernel.gateway.server")
        return deps.gateway(deps.routers())

    plugins.add_routes(routes)
    plugins.add_frontend("gateway", sidecar)
