"""The MCP client as Kernel sees it: every configured server, their tools in the
ToolRegistry, and their status for /status and the sidecar's /healthz.

No ``mcp`` import here: the SDK is loaded (off the event loop) only when servers are
configured, by importing :mod:`kernel.mcp.connection`.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel.config import Config, MCPServerConfig
from kernel.core.i18n import t
from kernel.mcp.interact import Sampler
from kernel.mcp.naming import assign_names, server_parts
from kernel.tools.registry import CONTEXT_ARG, ToolContext, ToolRegistry, ToolReply

if TYPE_CHECKING:
    from kernel.mcp.connection import RemoteTool, ServerConnection

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ServerStatus:
    name: str
    type: str  # "http" | "stdio"
    state: str  # "connected" | "connecting" | "failed" | "disabled"
    tools: int  # tools the model can call now (withdrawn and disabled ones not counted)
    last_error: str  # redacted, one line; "" when none
    skipped: dict[str, str] = field(default_factory=dict)  # listed, not offered: name → why

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class MCPManager:
    def __init__(self, config: Config, registry: ToolRegistry) -> None:
        self._config = config
        self._registry = registry
        self._servers: list[MCPServerConfig] = list(config.mcp_servers)
        self._parts = server_parts(s.name for s in self._servers)
        self._connections: dict[str, ServerConnection] = {}
        self._names: dict[str, dict[str, str]] = {}  # server → its tool → registered name
        self._blocked: set[str] = set()  # names some other source registered first
        # Answers servers' sampling requests (the Kernel sets the agent's); None: declined.
        self.sampler: Sampler | None = None

    @property
    def log_dir(self) -> Path:
        return self._config.data_dir / "logs"

    async def start(self) -> None:
        """Connect every server concurrently; each may hold start-up for at most its
        connect_timeout, after which it goes on connecting in the background."""
        if not self._servers:
            return
        module = await asyncio.to_thread(importlib.import_module, "kernel.mcp.connection")
        for server in self._servers:
            connection = module.ServerConnection(
                server,
                self._config.mcp,
                self._publish,
                log_dir=self.log_dir,
                shared_env=lambda: self._config.envs,
                sampler=self.sampler,
            )
            self._connections[server.name] = connection
            connection.start()
        await asyncio.gather(*(c.wait_first_attempt() for c in self._connections.values()))
        connected = sum(1 for c in self._connections.values() if c.connected)
        log.info("mcp: %d of %d servers connected", connected, len(self._connections))

    async def stop(self) -> None:
        """Close every session and stdio child (concurrently), then drop their tools."""
        grace = self._config.general.shutdown_timeout
        await asyncio.gather(*(c.stop(grace) for c in self._connections.values()))
        for name in self._connections:
            self._registry.unregister_source(_source(name))

    # ------------------------------------------------------------------ tools

    def _publish(self, connection: ServerConnection, tools: list[RemoteTool] | None) -> None:
        """(Re)register a server's tools, or withdraw them (``None``)."""
        server = connection.name
        source = _source(server)
        self._registry.unregister_source(source)
        if tools is None:
            return
        kept = self._names.get(server, {})
        mine = set(kept.values())
        while True:
            names = assign_names(
                self._parts[server], [tool.name for tool in tools], kept, self._taken(mine)
            )
            clash = self._register_all(connection, tools, names)
            if clash is None:
                break
            # Someone else (a built-in tool, say) holds this name: pick another.
            self._blocked.add(clash)
            self._registry.unregister_source(source)
        # Names stay reserved for this server while it is away, so they come back unchanged.
        self._names[server] = {**kept, **names}

    def _taken(self, mine: set[str]) -> Any:
        reserved = {
            name for server_names in self._names.values() for name in server_names.values()
        } - mine

        def taken(name: str) -> bool:
            return name in self._blocked or name in reserved

        return taken

    def _register_all(
        self, connection: ServerConnection, tools: list[RemoteTool], names: dict[str, str]
    ) -> str | None:
        for tool in tools:
            name = names[tool.name]
            try:
                self._registry.register(
                    name,
                    tool.description,
                    tool.input_schema,
                    _handler(connection, tool.name),
                    source=_source(connection.name),
                    with_context=True,
                )
            except ValueError:
                return name
        return None

    def tool_names(self, server: str) -> dict[str, str]:
        """The server's tools as registered: its own name → the name the model sees."""
        connection = self._connections.get(server)
        if connection is None:
            return {}
        current = {tool.name for tool in connection.tools}
        return {k: v for k, v in self._names.get(server, {}).items() if k in current}

    # ------------------------------------------------------------------ status

    def status(self) -> list[ServerStatus]:
        """Per configured server, in config order; safe to show (no secrets)."""
        out: list[ServerStatus] = []
        for server in self._servers:
            connection = self._connections.get(server.name)
            if connection is None:
                state = "disabled" if not server.enabled else "connecting"
                out.append(ServerStatus(server.name, server.type, state, 0, ""))
                continue
            available = [
                name for name in self.tool_names(server.name).values() if name in self._registry
            ]
            out.append(
                ServerStatus(
                    server.name,
                    server.type,
                    connection.state,
                    len(available),
                    connection.last_error,
                    dict(connection.skipped),
                )
            )
        return out

    def status_text(self) -> str:
        """The /status line."""
        parts: list[str] = []
        for s in self.status():
            state = t(f"mcp.state.{s.state}")
            if s.state == "failed" and s.last_error:
                error = s.last_error if len(s.last_error) <= 80 else s.last_error[:79] + "…"
                parts.append(t("mcp.server_error", name=s.name, state=state, error=error))
            else:
                parts.append(t("mcp.server", name=s.name, state=state, tools=s.tools))
            if s.skipped:
                names = ", ".join(sorted(s.skipped))
                parts[-1] += t("mcp.skipped", count=len(s.skipped), names=names)
        line = t("tg.status_mcp", servers="; ".join(parts) if parts else t("mcp.none"))
        if self._servers:
            line += "\n" + self.features_text()
        return line

    def features_text(self) -> str:
        """What servers may ask of Kernel (the /status line under the servers)."""
        settings = self._config.mcp
        sampling = (
            t("mcp.feature_sampling_off")
            if settings.sampling == "off" or self.sampler is None
            else t(f"mcp.feature_sampling_{settings.sampling}", tokens=settings.sampling_max_tokens)
        )
        elicitation = t(
            "mcp.feature_elicitation_on" if settings.elicitation else "mcp.feature_elicitation_off"
        )
        return t("mcp.features", sampling=sampling, elicitation=elicitation)


def _source(server: str) -> str:
    return f"mcp:{server}"


def _handler(connection: ServerConnection, tool: str) -> Any:
    async def call(**arguments: Any) -> str | ToolReply:
        context: ToolContext | None = arguments.pop(CONTEXT_ARG, None)
        return await connection.call_tool(tool, arguments, context)

    return call
