"""``[mcp]`` (reconnects, sampling, elicitation) and each ``[[mcp.servers]]`` table."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from kernel.config.schema import (
    SECRET_ALL_HEADERS,
    SECRET_MAP,
    NonNegFloat,
    PathText,
    PosFloat,
    PosInt,
    Section,
    StrMap,
)


class MCPServerConfig(Section):
    name: str = Field("", description="unique; part of its tools' names")
    type: Literal["http", "stdio"] = Field("http", description="streamable HTTP or a command")
    url: str = Field("", description="http: the endpoint")
    headers: Annotated[StrMap, SECRET_ALL_HEADERS] = Field(
        default_factory=dict, description="http: request headers, ${ENV} expanded; never logged"
    )
    command: str = Field("", description="stdio: the executable")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments")
    env: Annotated[StrMap, SECRET_MAP] = Field(
        default_factory=dict, description="stdio: extra environment, ${ENV} expanded"
    )
    cwd: PathText | None = Field(None, description="stdio: working directory")
    enabled: bool = Field(True, description="false keeps the server configured but unconnected")
    connect_timeout: PosFloat = Field(10.0, description="seconds for start + initialize + list")
    timeout: PosFloat = Field(60.0, description="seconds per tool call")


class MCPSettings(Section):
    """``[mcp]``: how dropped servers are retried (per-server keys live on each server)."""

    reconnect_attempts: PosInt = Field(
        5, description="consecutive failures before a server's tools are withdrawn"
    )
    reconnect_base_delay: PosFloat = Field(1.0, description="first backoff, doubled")
    reconnect_max_delay: PosFloat = Field(60.0, description="backoff ceiling")
    ping_interval: NonNegFloat = Field(30.0, description="seconds between pings; 0 = off")
    # Server → client sampling/createMessage: "off" (not declared), "ask" (the owner
    # approves each request with buttons), "auto" (answered without asking).
    sampling: Literal["off", "ask", "auto"] = Field("ask", description="MCP sampling")
    sampling_max_tokens: PosInt = Field(1024, description="the ceiling on one sampling answer")
    elicitation: bool = Field(True, description="server questions with choices, as buttons")
    serve: bool = Field(
        True, description="Kernel's own MCP endpoint at /mcp on the sidecar (loopback only)"
    )
    notify_per_minute: PosInt = Field(
        5, description="notify_owner calls to /mcp allowed per minute (all callers)"
    )
    # [[mcp.servers]], read one by one (each refusal names its index); the live list is
    # the MCP manager's to connect (a runtime change replaces it).
    servers: list[MCPServerConfig] = Field(default_factory=list, json_schema_extra={"toml": False})


def server_problem(server: MCPServerConfig) -> tuple[str, str] | None:
    """What a server's keys miss together: (its key, the catalogue text's key), or None.
    The loader words it for ``config.toml``, the sidecar for a request body."""
    if server.type == "http" and not server.url.startswith(("http://", "https://")):
        return "url", "config.mcp_needs_url"
    if server.type == "stdio" and not server.command:
        return "command", "config.mcp_needs_command"
    return None


def merge_servers(base: Any, overlay: Any) -> Any:
    """``[[mcp.servers]]`` of ``data/runtime.toml`` over ``config.toml``'s, by name: a
    server of the overlay replaces the one of the same name (whole, in its place),
    others are appended. Anything but two lists: the overlay's, as every other array."""
    if not isinstance(base, list) or not isinstance(overlay, list):
        return copy.deepcopy(overlay)
    merged = copy.deepcopy(base)
    where = {_name_of(table): i for i, table in enumerate(merged) if _name_of(table)}
    for table in overlay:
        name = _name_of(table)
        if name and name in where:
            merged[where[name]] = copy.deepcopy(table)
        else:
            merged.append(copy.deepcopy(table))
    return merged


def _name_of(table: Any) -> str:
    name = table.get("name") if isinstance(table, dict) else None
    return name if isinstance(name, str) else ""


ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # ${VAR} in headers and env


def unset_reference(server: MCPServerConfig, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The first ``${VAR}`` of the server's headers or env that ``env`` lacks, as
    (``headers.<name>`` or ``env.<name>``, the variable); None when all are set. The
    loader skips such a server with a warning; a request adding one is refused."""
    for key, values in (("headers", server.headers), ("env", server.env)):
        for name, value in values.items():
            missing = next((v for v in ENV_REFERENCE.findall(value) if v not in env), None)
            if missing is not None:
                return f"{key}.{name}", missing
    return None
