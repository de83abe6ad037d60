"""``/version``, ``/healthz``, ``/runtime-config`` and ``/openapi.json``."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Protocol

from aiohttp import web

from kernel import __version__
from kernel.app import Kernel
from kernel.errors import KernelError
from kernel.gateway.api import Router, json_response, kernel_of

router = Router("health", "Liveness, version, feature flags and this document")

HEALTHY_MCP_STATES = frozenset({"connected", "ready", "running", "ok"})


class MCPStatusSource(Protocol):
    """What /healthz needs of ``kernel.mcp``: one entry per configured server, each
    with ``name``, ``type``, ``state``, a tool count and the last error (attributes or
    mapping keys). A Kernel without ``mcp`` has no servers."""

    def status(self) -> Any: ...


def _field(entry: Any, *names: str) -> Any:
    for name in names:
        value = entry.get(name) if isinstance(entry, Mapping) else getattr(entry, name, None)
        if value is not None:
            return value
    return None


async def mcp_servers(kernel: Kernel) -> list[dict[str, Any]]:
    source: MCPStatusSource | None = getattr(kernel, "mcp", None)
    if source is None:
        return []
    entries = source.status()
    if inspect.isawaitable(entries):
        entries = await entries
    servers = []
    for entry in entries or []:
        tools = _field(entry, "tool_count", "tools")
        servers.append(
            {
                "name": str(_field(entry, "name") or ""),
                "type": str(_field(entry, "type", "transport") or ""),
                "state": str(_field(entry, "state", "status") or "unknown"),
                "tools": len(tools) if isinstance(tools, list | tuple) else int(tools or 0),
                "last_error": _field(entry, "last_error", "error"),
            }
        )
    return servers


VERSION_SCHEMA = {
    "type": "object",
    "required": ["name", "version"],
    "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
}


@router.get("/version", summary="Kernel's name and version", response=VERSION_SCHEMA, public=True)
async def version(request: web.Request) -> web.Response:
    return json_response({"name": "kernel", "version": __version__})


HEALTH_SCHEMA = {
    "type": "object",
    "required": ["status", "version", "database", "channels", "mcp"],
    "properties": {
        "status": {"type": "string", "enum": ["ok", "degraded", "unavailable"]},
        "version": {"type": "string"},
        "database": {
            "type": "object",
            "properties": {"writable": {"type": "boolean"}, "error": {"type": "string"}},
        },
        "channels": {"type": "object", "additionalProperties": {"type": "object"}},
        "mcp": {
            "type": "object",
            "properties": {"servers": {"type": "array", "items": {"type": "object"}}},
        },
    },
}


@router.get(
    "/healthz",
    summary="Database writable, channel (Telegram polling) states, MCP servers",
    response=HEALTH_SCHEMA,
    errors=(503,),
    public=True,
)
async def healthz(request: web.Request) -> web.Response:
    """200 with ``ok`` or ``degraded`` (a channel or MCP server is unwell); 503 with
    ``unavailable`` when the database does not accept writes."""
    kernel = kernel_of(request)
    database: dict[str, Any] = {"writable": True}
    try:
        await kernel.store.check_writable()
    except KernelError as exc:
        database = {"writable": False, "error": str(exc)}
    channels = {}
    for state in kernel.channel_states():
        channels[state.name] = {"state": state.state, **state.detail}
    servers = await mcp_servers(kernel)
    if not database["writable"]:
        status = "unavailable"
    elif any(c["state"] != "running" for c in channels.values()) or any(
        s["state"] not in HEALTHY_MCP_STATES for s in servers
    ):
        status = "degraded"
    else:
        status = "ok"
    body = {
        "status": status,
        "version": __version__,
        "database": database,
        "channels": channels,
        "mcp": {"servers": servers},
    }
    return json_response(body, 503 if status == "unavailable" else 200)


RUNTIME_SCHEMA = {
    "type": "object",
    "required": ["features"],
    "properties": {
        "features": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "language": {"type": "string"},
        "timezone": {"type": "string"},
        "limits": {"type": "object"},
    },
}


@router.get(
    "/runtime-config", summary="Feature flags and limits (never secrets)", response=RUNTIME_SCHEMA
)
async def runtime_config(request: web.Request) -> web.Response:
    kernel = kernel_of(request)
    config = kernel.config
    features = {
        # seed 000's flags: Kernel has no prompt templates or codex mode; the layers
        # endpoint is always on.
        "prompt_templates": False,
        "prompt_context_introspect": True,
        "codex_mode_v2": False,
        "telegram": "telegram" in kernel.channels,
        "telegram_stream": config.telegram.stream,
        "titles": config.titles is not None,
        "mcp": bool(config.mcp_servers),
        "stt": "stt" in config.extra,
        "tts": "tts" in config.extra,
        "api_key_required": bool(config.gateway.api_key),
        "claude_compatible_messages": True,
    }
    body = {
        "features": features,
        "language": config.general.language,
        "timezone": config.general.timezone,
        "limits": {
            "max_body_bytes": config.gateway.max_body_bytes,
            "max_tool_calls": config.general.max_tool_calls,
            "context_rounds": config.general.context_rounds,
            "queue_timeout_seconds": config.gateway.queue_timeout,
        },
    }
    return json_response(body)


@router.get(
    "/openapi.json",
    summary="This document (OpenAPI 3.1)",
    response={"type": "object"},
)
async def openapi(request: web.Request) -> web.Response:
    from kernel.gateway.openapi import build_document
    from kernel.gateway.server import ROUTERS

    routers = request.app[ROUTERS]
    return json_response(build_document(routers))
