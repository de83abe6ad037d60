"""The MCP client as Kernel sees it: every configured server, their tools in the
ToolRegistry, and their status for /status and the sidecar's /healthz; servers added,
removed and restarted while Kernel runs (the sidecar's /mcp/servers), kept in
``data/runtime.toml`` through :class:`~kernel.runtime.Runtime`. Each change (refused
ones too) is recorded in the audit trail: ``mcp.changed`` with the action, the server,
its transport and the outcome.

No ``mcp`` import here: the SDK is loaded (off the event loop) only when servers are
configured or added, by importing :mod:`kernel.mcp.connection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Coroutine
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from kernel.audit import AuditLog
from kernel.audit import kinds as audit_kinds
from kernel.config import Config, MCPServerConfig
from kernel.config.privilege import strings_of
from kernel.core.clock import Clock
from kernel.core.errors import CodedError, KernelError
from kernel.core.i18n import t
from kernel.core.session_modes import ACTS, READS
from kernel.core.tasks import TaskSet
from kernel.mcp.interact import Sampler
from kernel.mcp.naming import assign_names, server_part, server_parts
from kernel.tools.describe import remote
from kernel.tools.registry import CONTEXT_ARG, ToolContext, ToolRegistry, ToolReply

if TYPE_CHECKING:
    from kernel.mcp.connection import RemoteTool, ServerConnection
    from kernel.runtime import Overlay, Runtime

T = TypeVar("T")

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
    def __init__(self, config: Config, registry: ToolRegistry, clock: Clock | None = None) -> None:
        """``clock``: what the servers' reconnect waits sleep on (the Kernel's)."""
        self._config = config
        self._clock = clock
        self._registry = registry
        self._servers: list[MCPServerConfig] = list(config.mcp_servers)
        self._parts = server_parts(s.name for s in self._servers)
        self._connections: dict[str, ServerConnection] = {}
        self._names: dict[str, dict[str, str]] = {}  # server → its tool → registered name
        self._blocked: set[str] = set()  # names some other source registered first
        # Answers servers' sampling requests (the Kernel sets the agent's); None: declined.
        self.sampler: Sampler | None = None
        self._module: ModuleType | None = None  # kernel.mcp.connection, once loaded
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # a name being changed → users
        self._changes = TaskSet("mcp changes")  # run to the end even if the caller goes away
        self._closing = False
        self.audit: AuditLog | None = None  # where changes are recorded (set by the Kernel)

    @property
    def log_dir(self) -> Path:
        return self._config.data_dir / "logs"

    async def start(self) -> None:
        """Connect every server concurrently; each may hold start-up for at most its
        connect_timeout, after which it goes on connecting in the background."""
        if not self._servers:
            return
        module = await self._sdk()
        for server in self._servers:
            self._open(module, server)
        await asyncio.gather(*(c.wait_first_attempt() for c in self._connections.values()))
        connected = sum(1 for c in self._connections.values() if c.connected)
        log.info("mcp: %d of %d servers connected", connected, len(self._connections))

    async def stop(self) -> None:
        """Close every session and stdio child (concurrently), then drop their tools.
        A change under way is cancelled first; none starts a server afterwards."""
        self._closing = True
        await self._changes.close()
        grace = self._config.general.shutdown_timeout
        await asyncio.gather(*(c.stop(grace) for c in self._connections.values()))
        for name in self._connections:
            self._registry.unregister_source(_source(name))

    async def _sdk(self) -> ModuleType:
        if self._module is None:
            name = "kernel.mcp.connection"
            self._module = await asyncio.to_thread(importlib.import_module, name)
        return self._module

    def _open(self, module: ModuleType, server: MCPServerConfig) -> ServerConnection:
        connection: ServerConnection = module.ServerConnection(
            server,
            self._config.mcp,
            self._publish,
            log_dir=self.log_dir,
            shared_env=lambda: self._config.envs,
            sampler=self.sampler,
            clock=self._clock,
        )
        self._connections[server.name] = connection
        connection.start()
        return connection

    # ------------------------------------------------------------------ at run time

    def server(self, name: str) -> MCPServerConfig | None:
        """The definition in use for ``name`` (None: no such server)."""
        return next((s for s in self._servers if s.name == name), None)

    async def add(
        self, runtime: Runtime, table: dict[str, Any], by: str = "api", caller: str = "owner"
    ) -> ServerStatus:
        """Keep ``table`` (a checked ``[[mcp.servers]]`` definition) in
        data/runtime.toml and connect the server; answers after the first attempt (at
        most its connect_timeout) with its status. A name in use: refused. ``by``: who
        asked (``api``: a sidecar client), for the audit; ``caller``: for the privilege
        rule (a stdio server runs a program; ``${VAR}`` headers send Kernel's values)."""
        name = str(table["name"])
        transport = str(table.get("type") or "http")
        adding = self._add(runtime, name, table, by, caller)
        return await self._change(name, adding, "add", by, transport)

    async def remove(self, runtime: Runtime, name: str, by: str = "api") -> None:
        """Remove a server added at run time: out of data/runtime.toml, its session
        closed and its tools withdrawn. One of config.toml is refused (remove it there)."""
        await self._change(name, self._remove(runtime, name, by), "remove", by)

    async def restart(self, name: str, by: str = "api") -> ServerStatus:
        """Close the server's session (and stdio child) and connect it again; answers
        after the first attempt with its status."""
        return await self._change(name, self._restart(name), "restart", by)

    async def _change(
        self,
        name: str,
        change: Coroutine[Any, Any, T],
        action: str,
        by: str,
        transport: str | None = None,
    ) -> T:
        """One change of ``name`` at a time; it runs to its end even if the caller goes
        away (the file and the live servers never disagree), unless Kernel stops."""

        async def run() -> tuple[T | None, KernelError | None]:
            async with self._changing(name):
                server = self.server(name)  # a name from the request: kept when it is known
                known = server is not None or action == "add"
                kind = transport or (server.type if server is not None else None)
                try:
                    result, refused = await change, None
                except KernelError as exc:  # a refusal, the caller's to show
                    result, refused = None, exc
                outcome = "ok" if refused is None else getattr(refused, "code", "refused")
                state = result.state if isinstance(result, ServerStatus) else None
                await self._audit(action, name if known else None, kind, outcome, state, by)
                return result, refused

        if self._closing:
            change.close()
            raise CodedError("mcp_stopping", t("mcp.stopping"))
        task = self._changes.spawn(run(), name="mcp-change")
        result, refused = await asyncio.shield(task)
        if refused is not None:
            raise refused
        return result  # type: ignore[return-value]  # None only with a refusal

    async def _audit(
        self,
        action: str,
        server: str | None,
        transport: str | None,
        outcome: str,
        state: str | None,
        by: str,
    ) -> None:
        """``state``: the server's after an add or a restart (connected, failed …)."""
        if self.audit is not None:
            await self.audit.record(
                audit_kinds.MCP_CHANGED,
                actor=by,
                action=action,
                server=server,
                transport=transport,
                outcome=outcome,
                state=state,
            )

    @contextlib.asynccontextmanager
    async def _changing(self, name: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(name, (asyncio.Lock(), 0))
        self._locks[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[name]
            if users == 1:
                del self._locks[name]
            else:
                self._locks[name] = (lock, users - 1)

    async def _add(
        self, runtime: Runtime, name: str, table: dict[str, Any], by: str, caller: str
    ) -> ServerStatus:
        if self.server(name) is not None:
            raise _exists(name)

        def change(overlay: Overlay) -> None:
            mcp = overlay.setdefault("mcp", {})
            servers = mcp.setdefault("servers", []) if isinstance(mcp, dict) else None
            if not isinstance(servers, list):  # data/runtime.toml edited by hand
                raise CodedError("invalid_request", t("mcp.overlay_broken"))
            if any(isinstance(s, dict) and s.get("name") == name for s in servers):
                raise _exists(name)
            servers.append(table)

        given = strings_of(table)  # header values written out: the caller's own
        fresh = await runtime.update(change, by=by, caller=caller, given=given)
        server = next((s for s in fresh.mcp_servers if s.name == name), None)
        if server is None:  # skipped as it was read (an unset ${VAR}): none to connect
            raise CodedError("invalid_request", t("mcp.skipped_at_load", name=name))
        log.info("mcp server %s added at run time", name)
        return await self._connect(server)

    async def _remove(self, runtime: Runtime, name: str, by: str) -> None:
        if self.server(name) is None:
            raise _missing(name)

        def expect(overlay: Overlay) -> None:
            if name not in runtime_names(overlay):
                raise CodedError(
                    "mcp_server_in_config", t("mcp.in_config", name=name), {"name": name}
                )

        def change(overlay: Overlay) -> None:
            servers = overlay["mcp"]["servers"]
            overlay["mcp"]["servers"] = [
                s for s in servers if not (isinstance(s, dict) and s.get("name") == name)
            ]

        fresh = await runtime.update(change, expect=expect, by=by)
        await self._close(name)
        self._forget(name)
        log.info("mcp server %s removed at run time", name)
        # A runtime definition may have covered one of config.toml's own: that one is back.
        uncovered = next((s for s in fresh.mcp_servers if s.name == name), None)
        if uncovered is not None:
            await self._connect(uncovered)

    async def _restart(self, name: str) -> ServerStatus:
        server = self.server(name)
        if server is None:
            raise _missing(name)
        await self._close(name)
        log.info("mcp server %s restarted", name)
        return await self._connect(server)

    async def _connect(self, server: MCPServerConfig) -> ServerStatus:
        module = await self._sdk()
        if self._closing:  # stopping: no server may start behind stop()
            raise CodedError("mcp_stopping", t("mcp.stopping"))
        if self.server(server.name) is None:
            self._parts[server.name] = server_part(server.name, set(self._parts.values()))
            self._servers.append(server)
        else:
            self._servers = [server if s.name == server.name else s for s in self._servers]
        connection = self._open(module, server)
        await connection.wait_first_attempt()
        return self._status_of(server)

    async def _close(self, name: str) -> None:
        """Stop the server's connection (its child too) and withdraw its tools."""
        connection = self._connections.pop(name, None)
        if connection is not None:
            await connection.stop(self._config.general.shutdown_timeout)
        self._registry.unregister_source(_source(name))

    def _forget(self, name: str) -> None:
        self._servers = [s for s in self._servers if s.name != name]
        self._parts.pop(name, None)
        self._names.pop(name, None)

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
                    describe=remote(connection.name, tool.name),
                    effect=READS if tool.read_only else ACTS,
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
        return [self._status_of(server) for server in self._servers]

    def _status_of(self, server: MCPServerConfig) -> ServerStatus:
        connection = self._connections.get(server.name)
        if connection is None:
            state = "disabled" if not server.enabled else "connecting"
            return ServerStatus(server.name, server.type, state, 0, "")
        available = [
            name for name in self.tool_names(server.name).values() if name in self._registry
        ]
        return ServerStatus(
            server.name,
            server.type,
            connection.state,
            len(available),
            connection.last_error,
            dict(connection.skipped),
        )

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


def runtime_names(overlay: Overlay) -> list[str]:
    """The servers ``data/runtime.toml`` defines (added at run time), by name."""
    mcp = overlay.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    if not isinstance(servers, list):
        return []
    return [s["name"] for s in servers if isinstance(s, dict) and isinstance(s.get("name"), str)]


def _exists(name: str) -> CodedError:
    return CodedError("mcp_server_exists", t("mcp.exists", name=name), {"name": name})


def _missing(name: str) -> CodedError:
    return CodedError("mcp_server_not_found", t("mcp.not_found", name=name), {"name": name})


def _handler(connection: ServerConnection, tool: str) -> Any:
    async def call(**arguments: Any) -> str | ToolReply:
        context: ToolContext | None = arguments.pop(CONTEXT_ARG, None)
        return await connection.call_tool(tool, arguments, context)

    return call
