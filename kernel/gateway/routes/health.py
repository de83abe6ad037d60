"""``/version``, ``/healthz``, ``/runtime-config`` and ``/openapi.json``."""

from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

from kernel import __version__
from kernel.core.errors import KernelError
from kernel.gateway.api import ROUTERS, Router, deps_of, json_response
from kernel.gateway.apikey import API_KEY, authorized
from kernel.gateway.schema import OpenShape, Shape
from kernel.store.settings import SettingTables

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("health", "Liveness, version, feature flags and this document")

HEALTHY_MCP_STATES = frozenset({"connected", "disabled"})
WRITE_CHECK_TTL = 2.0  # seconds one write probe answers for: /healthz is public


def mcp_servers(deps: GatewayDeps, *, detailed: bool) -> list[dict[str, Any]]:
    servers = [s.as_dict() for s in deps.mcp.status()]
    if not detailed:  # an error can name commands and paths: only for the key holder
        for server in servers:
            server["last_error"] = ""
    return servers


async def database_state(deps: GatewayDeps) -> dict[str, Any]:
    """Whether the database takes a write, probed at most once per WRITE_CHECK_TTL."""
    now = time.monotonic()
    cached = _last_check.get(deps.settings)
    if cached is not None and now - cached[0] < WRITE_CHECK_TTL:
        return dict(cached[1])
    state: dict[str, Any] = {"writable": True}
    try:
        await deps.settings.check_writable()
    except KernelError as exc:
        state = {"writable": False, "error": str(exc)}
    _last_check[deps.settings] = (now, state)
    return dict(state)


_last_check: weakref.WeakKeyDictionary[SettingTables, tuple[float, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


class VersionInfo(Shape):
    name: str
    version: str


@router.get("/version", summary="Kernel's name and version", response=VersionInfo, public=True)
async def version(request: web.Request) -> web.Response:
    return json_response({"name": "kernel", "version": __version__})


class DatabaseState(Shape):
    writable: bool | None = None
    error: str | None = None


class McpState(Shape):
    servers: list[OpenShape] | None = None


class Health(Shape):
    status: Literal["ok", "degraded", "unavailable"]
    version: str
    database: DatabaseState
    channels: dict[str, OpenShape]
    mcp: McpState


@router.get(
    "/healthz",
    summary="Database writable, channel (Telegram polling) states, MCP servers",
    response=Health,
    errors=(503,),
    public=True,
)
async def healthz(request: web.Request) -> web.Response:
    """200 with ``ok`` or ``degraded`` (a channel or MCP server is unwell); 503 with
    ``unavailable`` when the database does not accept writes."""
    deps = deps_of(request)
    detailed = authorized(request)
    database = await database_state(deps)
    if not detailed:
        database.pop("error", None)
    channels = {}
    for state in await deps.status_board.states():
        channels[state.name] = {"state": state.state, **state.detail}
    servers = mcp_servers(deps, detailed=detailed)
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


class RuntimeConfig(Shape):
    features: dict[str, bool]
    codex_prompt_source: Literal["file", "catalog"] | None = None
    language: str | None = None
    timezone: str | None = None
    limits: OpenShape | None = None


@router.get(
    "/runtime-config", summary="Feature flags and limits (never secrets)", response=RuntimeConfig
)
async def runtime_config(request: web.Request) -> web.Response:
    deps = deps_of(request)
    config = deps.config
    flags = config.features  # seed 000's flags: [features], NEXTAI_ENABLE_* over them
    features = {
        "prompt_templates": flags.prompt_templates,
        "prompt_context_introspect": flags.prompt_context_introspect,
        "codex_mode_v2": flags.codex_mode_v2,
        "codex_prompt_shadow_compare": flags.codex_prompt_shadow_compare,
        "telegram": "telegram" in deps.status_board,
        "telegram_stream": config.telegram.stream,
        "titles": config.titles is not None,
        "mcp": bool(config.mcp_servers),
        "stt": config.stt is not None,  # [stt] with a key: voice messages transcribed
        "tts": config.tts is not None,  # [tts] usable: replies to voice spoken
        "api_key_required": bool(request.app[API_KEY]),
        "claude_compatible_messages": True,
    }
    body = {
        "features": features,
        "codex_prompt_source": flags.codex_prompt_source,
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
    summary="This document (OpenAPI 3.0.3)",
    response=OpenShape,
)
async def openapi(request: web.Request) -> web.Response:
    from kernel.gateway.openapi import build_document

    routers = request.app[ROUTERS]
    return json_response(build_document(routers))
