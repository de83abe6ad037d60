"""``/models``: providers, their settings and the active model.

Provider settings changed here go to ``data/runtime.toml`` (never ``config.toml``) and
take effect at once: the provider's client is rebuilt on its next use. The active
model is the same choice Telegram's ``/provider`` and ``/model`` make (SPEC §3), so the
two never disagree.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kernel.config import PROVIDER_TYPES, ProviderConfig
from kernel.core.i18n import t
from kernel.core.redact import mask_secret
from kernel.gateway.api import (
    ApiError,
    Param,
    Router,
    invalid,
    json_response,
    kernel_of,
    read_object,
)

router = Router("models", "Providers, models and the active model")

PROVIDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "type": {"type": "string"},
        "enabled": {"type": "boolean"},
        "has_api_key": {"type": "boolean"},
        "api_key": {"type": "string", "description": "masked"},
        "base_url": {"type": "string"},
        "default_model": {"type": "string"},
        "models": {"type": "array", "items": {"type": "string"}},
        "aliases": {"type": "object", "additionalProperties": {"type": "string"}},
        "capabilities": {"type": "array", "items": {"type": "string"}},
    },
}
ACTIVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["provider_id", "model"],
    "properties": {"provider_id": {"type": "string"}, "model": {"type": "string"}},
}


def provider_json(p: ProviderConfig) -> dict[str, Any]:
    capabilities = p.capabilities
    if capabilities is None:
        reasoning = ["reasoning"] if p.type == "claude" else []
        capabilities = ["stream", "tool_call", "attachments", *reasoning]
    return {
        "id": p.name,
        "type": p.type,
        "enabled": p.enabled,
        "has_api_key": bool(p.api_key),
        "api_key": mask_secret(p.api_key) if p.api_key else "",
        "base_url": p.api_base,
        "default_model": p.default_model,
        "models": list(p.models),
        "aliases": dict(p.aliases),
        "max_tokens": p.max_tokens,
        "capabilities": list(capabilities),
    }


def _active(request: web.Request) -> dict[str, str]:
    agent = kernel_of(request).agent
    return {"provider_id": agent.provider_name, "model": agent.model}


@router.get(
    "/models/catalog",
    summary="Configured providers (keys masked) and the active model",
    response={
        "type": "object",
        "properties": {
            "providers": {"type": "array", "items": PROVIDER_SCHEMA},
            "active_llm": ACTIVE_SCHEMA,
            "default_provider": {"type": "string"},
        },
    },
)
async def catalog(request: web.Request) -> web.Response:
    config = kernel_of(request).config
    return json_response(
        {
            "providers": [provider_json(p) for p in config.providers.values()],
            "active_llm": _active(request),
            "default_provider": config.general.default_provider,
        }
    )


CONFIG_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": list(PROVIDER_TYPES)},
        "enabled": {"type": "boolean"},
        "api_key": {"type": "string"},
        "base_url": {"type": "string"},
        "default_model": {"type": "string"},
        "models": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "aliases": {"type": "object", "additionalProperties": {"type": "string"}},
        "max_tokens": {"type": "integer", "minimum": 1},
    },
}


@router.put(
    "/models/{provider}/config",
    summary="Change (or, with type, add) a provider; kept in data/runtime.toml",
    params=(
        Param(
            "provider",
            "path",
            {"type": "string", "minLength": 1, "maxLength": 64},
            required=True,
        ),
    ),
    body=CONFIG_BODY,
    response=PROVIDER_SCHEMA,
    errors=(404,),
)
async def configure(request: web.Request) -> web.Response:
    kernel = kernel_of(request)
    config = kernel.config
    name = request.match_info["provider"]
    body = await read_object(request)
    changes: dict[str, Any] = {}
    kind = body.text("type")
    if kind is not None:
        if kind not in PROVIDER_TYPES:
            raise invalid(t("gw.provider_type", types=", ".join(PROVIDER_TYPES)), field="type")
        changes["type"] = kind
    for field, key in (("api_key", "api_key"), ("base_url", "api_base")):
        value = body.text(field, max_len=4096)
        if value is not None:
            changes[key] = value.strip()
    default_model = body.text("default_model", max_len=256)
    if default_model is not None:
        changes["default_model"] = default_model
    models = body.str_list("models")
    if models is not None:
        changes["models"] = models
    aliases = body.str_map("aliases")
    if aliases is not None:
        changes["aliases"] = aliases
    max_tokens = body.integer("max_tokens", minimum=1)
    if max_tokens is not None:
        changes["max_tokens"] = max_tokens
    enabled = body.boolean("enabled")
    if enabled is not None:
        changes["enabled"] = enabled
    if not changes:
        raise invalid(t("gw.nothing_to_change", fields=", ".join(CONFIG_BODY["properties"])))
    current = config.providers.get(name)
    if current is None and "type" not in changes:
        raise ApiError(
            404, "provider_not_found", t("gw.provider_new", name=name), {"provider": name}
        )
    if not _valid_name(name):
        raise invalid(t("gw.provider_name"), field="provider")
    if current is not None:
        if "api_key" in changes and current.env_key in config.source_env:
            raise invalid(t("gw.provider_env_wins", env=current.env_key), field="api_key")
        if enabled is False and name == kernel.agent.provider_name:
            raise invalid(t("gw.provider_active", name=name), field="enabled")

    def change(overlay: dict[str, Any]) -> None:
        overlay.setdefault("providers", {}).setdefault(name, {}).update(changes)

    await kernel.runtime.update(change)
    return json_response(provider_json(config.providers[name]))


def _valid_name(name: str) -> bool:
    return 0 < len(name) <= 64 and all(c.isalnum() or c in "-_" for c in name)


@router.get("/models/active", summary="The active provider and model", response=ACTIVE_SCHEMA)
async def get_active(request: web.Request) -> web.Response:
    return json_response(_active(request))


@router.put(
    "/models/active",
    summary="Switch the active provider (and model or alias), as /provider and /model do",
    body={
        "type": "object",
        "required": ["provider_id"],
        "properties": {
            "provider_id": {"type": "string"},
            "model": {"type": "string", "nullable": True},  # null: the provider's default
        },
    },
    response=ACTIVE_SCHEMA,
    errors=(404,),
)
async def set_active(request: web.Request) -> web.Response:
    kernel = kernel_of(request)
    body = await read_object(request)
    name = body.required_text("provider_id", max_len=64)
    requested = body.text("model", max_len=256)
    pcfg = kernel.config.providers.get(name)
    if pcfg is None:
        raise ApiError(
            404,
            "provider_not_found",
            t("gw.provider_unknown", name=name, available=", ".join(kernel.config.providers)),
            {"provider": name},
        )
    if not pcfg.enabled:
        raise ApiError(400, "provider_disabled", t("gw.provider_disabled", name=name))
    model = pcfg.resolve(requested) if requested else pcfg.default_model
    if model is None:
        raise ApiError(
            400,
            "model_not_found",
            t("model.invalid", model=requested, provider=name, models=", ".join(pcfg.models)),
            {"models": pcfg.models, "aliases": pcfg.aliases},
        )

    async def switch() -> None:
        await kernel.agent.set_provider(name)
        await kernel.agent.set_model(model)

    await asyncio.shield(switch())  # both or neither, even if the client goes away
    return json_response(_active(request))
