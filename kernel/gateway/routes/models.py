"""``/models``: providers, their settings and the active model.

Provider settings changed here go to ``data/runtime.toml`` (never ``config.toml``) and
take effect at once: the provider's client is rebuilt on its next use. The active
model is the same choice Telegram's ``/provider`` and ``/model`` make (SPEC §3), so the
two never disagree.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from aiohttp import web
from pydantic import Field

from kernel.audit import kinds
from kernel.config import CAPABILITIES, ProviderConfig
from kernel.core.i18n import t
from kernel.core.redact import mask_secret
from kernel.gateway.api import Param, Router, deps_of, invalid, json_response, refusal
from kernel.gateway.apikey import caller_of
from kernel.gateway.schema import BodyModel, Shape, StrList, StrMap, Text

router = Router("models", "Providers, models and the active model")


class ProviderInfo(Shape):
    id: str | None = None
    type: str | None = None
    enabled: bool | None = None
    has_api_key: bool | None = None
    api_key: str | None = Field(default=None, description="masked")
    base_url: str | None = None
    default_model: str | None = None
    models: list[str] | None = None
    aliases: dict[str, str] | None = None
    max_tokens: int | None = None
    capabilities: list[str] | None = None
    keys: int | None = Field(default=None, description="how many API keys it rotates through")


class ActiveModel(Shape):
    provider_id: str
    model: str


def provider_json(p: ProviderConfig) -> dict[str, Any]:
    capabilities = [c for c in CAPABILITIES if p.declares(c)]
    return {
        "id": p.name,
        "type": p.type,
        "enabled": p.enabled,
        "has_api_key": bool(p.keys),
        "api_key": mask_secret(p.api_key) if p.api_key else "",
        "base_url": p.api_base,
        "default_model": p.default_model,
        "models": list(p.models),
        "aliases": dict(p.aliases),
        "max_tokens": p.max_tokens,
        "capabilities": capabilities,
        "keys": len(p.keys),
    }


def _active(request: web.Request) -> dict[str, str]:
    agent = deps_of(request).agent
    return {"provider_id": agent.selection.provider_name, "model": agent.selection.model}


class Catalog(Shape):
    providers: list[ProviderInfo] | None = None
    active_llm: ActiveModel | None = None
    default_provider: str | None = None


@router.get(
    "/models/catalog",
    summary="Configured providers (keys masked) and the active model",
    response=Catalog,
)
async def catalog(request: web.Request) -> web.Response:
    config = deps_of(request).config
    return json_response(
        {
            "providers": [provider_json(p) for p in config.providers.values()],
            "active_llm": _active(request),
            "default_provider": config.general.default_provider,
        }
    )


class ProviderBody(BodyModel):
    # In this order in the "nothing to change" refusal.
    type: str | None = None
    enabled: bool | None = None
    api_key: Annotated[str, Field(max_length=4096)] | None = None
    base_url: Annotated[str, Field(max_length=4096)] | None = None
    default_model: Annotated[str, Field(max_length=256)] | None = None
    models: StrList | None = None
    aliases: StrMap | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None


@router.put(
    "/models/{provider}/config",
    summary="Change (or, with type, add) a provider; kept in data/runtime.toml. A new "
    "base_url of a provider holding keys: only with its api_key given again in the same "
    "request, or the owner's confirmation in Telegram (else 403 privilege_required)",
    params=(
        Param(
            "provider",
            "path",
            Annotated[str, Field(min_length=1, max_length=64)],
            required=True,
        ),
    ),
    body=ProviderBody,
    response=ProviderInfo,
    errors=(403, 404),
)
async def configure(request: web.Request, body: ProviderBody) -> web.Response:
    deps = deps_of(request)
    config = deps.config
    name = request.match_info["provider"]
    types = list(deps.provider_types)
    if body.type is not None and body.type not in types:
        raise invalid(t("gw.provider_type", types=", ".join(types)), field="type")
    given = body.model_dump(exclude_none=True)
    changes: dict[str, Any] = {_SETTING.get(k, k): v for k, v in given.items()}
    for key in ("api_key", "api_base"):
        if key in changes:
            changes[key] = changes[key].strip()
    enabled = body.enabled
    if not changes:
        fields = ", ".join(ProviderBody.model_fields)
        raise invalid(t("gw.nothing_to_change", fields=fields))
    current = config.providers.get(name)
    if current is None and "type" not in changes:
        raise refusal("provider_not_found", t("gw.provider_new", name=name), {"provider": name})
    if not _valid_name(name):
        raise invalid(t("gw.provider_name"), field="provider")
    if current is not None:
        if "api_key" in changes and current.env_key in config.source_env:
            raise invalid(t("gw.provider_env_wins", env=current.env_key), field="api_key")
        if enabled is False and name == deps.agent.selection.provider_name:
            raise invalid(t("gw.provider_active", name=name), field="enabled")

    def change(overlay: dict[str, Any]) -> None:
        overlay.setdefault("providers", {}).setdefault(name, {}).update(changes)

    # Moving a keyed provider: only with its keys given again here (or the owner's word).
    keys = {changes["api_key"]} if changes.get("api_key") else set()
    await deps.runtime.update(change, caller=caller_of(request), given=keys)
    return json_response(provider_json(config.providers[name]))


_SETTING = {"base_url": "api_base"}  # the body's names for provider settings


def _valid_name(name: str) -> bool:
    return 0 < len(name) <= 64 and all(c.isalnum() or c in "-_" for c in name)


@router.get("/models/active", summary="The active provider and model", response=ActiveModel)
async def get_active(request: web.Request) -> web.Response:
    return json_response(_active(request))


class ActiveBody(BodyModel):
    provider_id: Annotated[Text, Field(max_length=64)]
    model: Annotated[
        str | None, Field(max_length=256, description="null: the provider's default")
    ] = None


@router.put(
    "/models/active",
    summary="Switch the active provider (and model or alias), as /provider and /model do",
    body=ActiveBody,
    response=ActiveModel,
    errors=(404,),
)
async def set_active(request: web.Request, body: ActiveBody) -> web.Response:
    deps = deps_of(request)
    name, requested = body.provider_id, body.model
    pcfg = deps.config.providers.get(name)
    if pcfg is None:
        raise refusal(
            "provider_not_found",
            t("gw.provider_unknown", name=name, available=", ".join(deps.config.providers)),
            {"provider": name},
        )
    if not pcfg.enabled:
        raise refusal("provider_disabled", t("gw.provider_disabled", name=name))
    model = pcfg.resolve(requested) if requested else pcfg.default_model
    if model is None:
        raise refusal(
            "model_not_found",
            t("model.invalid", model=requested, provider=name, models=", ".join(pcfg.models)),
            {"models": pcfg.models, "aliases": pcfg.aliases},
        )

    async def switch() -> None:
        await deps.agent.selection.set_provider(name)
        await deps.agent.selection.set_model(model)

    await asyncio.shield(switch())  # both or neither, even if the client goes away
    keys = ["active.model", "active.provider"]  # the audit: names, as for config.changed
    await deps.audit.record(kinds.CONFIG_CHANGED, actor="api", sections=["active"], keys=keys)
    return json_response(_active(request))
