"""``[mcp]`` (reconnects, sampling, elicitation) and each ``[[mcp.servers]]`` table."""

from __future__ import annotations

from typing import Annotated, Literal

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
