"""``/envs``: environment variables given to tools and child processes.

Set here, they are kept in ``data/runtime.toml`` ``[envs]`` over ``config.toml``'s
``[envs]``, and are in effect for the next child process at once. A name that changes
how programs load, what they run or where they connect (``LD_*``, ``PYTHON*``, ``PATH``,
``*_BASE_URL``, ``HTTPS_PROXY`` …: :func:`kernel.config.privilege.env_family`) is set only
with the API key, or from the web console with the owner's confirmation in Telegram
(403 ``privilege_required`` otherwise). Values of secret
names (``api_key``, ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD`` …:
:func:`kernel.config.secrets.is_sensitive`) are never shown whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from aiohttp import web
from pydantic import BeforeValidator, Field, ValidationInfo, model_validator

from kernel.config import ENV_NAME
from kernel.config.secrets import is_sensitive
from kernel.core.i18n import t
from kernel.core.redact import mask_secret
from kernel.gateway.api import Param, Router, deps_of, json_response, not_found, refusal
from kernel.gateway.apikey import caller_of
from kernel.gateway.schema import BodyModel, Shape, documented_required, refuse

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("envs", "Environment variables for tools and CLIs")

VALUE_LIMIT = 32 * 1024


class EnvEntry(Shape):
    key: str | None = None
    value: str | None = None
    sensitive: bool | None = None
    source: Literal["runtime", "config"] | None = None


class EnvList(Shape):
    envs: list[EnvEntry] | None = None


def _value_refused(value: Any) -> bool:
    return not isinstance(value, str) or "\0" in value or len(value) > VALUE_LIMIT


def _checked_envs(envs: Any) -> Any:
    """Name by name, in order: a bad name (field ``key``), then its value (field: the name)."""
    if isinstance(envs, dict):
        for key, value in envs.items():
            if not ENV_NAME.fullmatch(key):  # as the pattern reads (no trailing newline)
                raise refuse("gw.env_name", key=key[:80], field="key")
            if _value_refused(value):
                raise refuse("gw.env_value", key=key, limit=VALUE_LIMIT, field=key)
    return envs


def _checked_value(value: Any, info: ValidationInfo) -> Any:
    """``context["key"]``: the variable's name, from the path."""
    if _value_refused(value):
        key = str((info.context or {}).get("key", "value"))
        raise refuse("gw.env_value", key=key, limit=VALUE_LIMIT, field=key)
    return value


EnvValue = Annotated[str, Field(max_length=VALUE_LIMIT, description="no NUL character")]


class EnvsBody(BodyModel):
    envs: Annotated[
        dict[str, EnvValue],
        BeforeValidator(_checked_envs),
        Field(description="names: letters, digits and _, not starting with a digit"),
    ]


class EnvBody(BodyModel):
    """``context["key"]``: the variable's name, from the path (refused first)."""

    model_config = documented_required("value")  # absent: "the value of … must be a string"

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any, info: ValidationInfo) -> Any:
        key = str((info.context or {}).get("key", ""))
        if not ENV_NAME.match(key):
            raise refuse("gw.env_name", key=key[:80], field="key")
        return data

    value: Annotated[EnvValue, BeforeValidator(_checked_value)] = Field(
        default=None, validate_default=True
    )


class EnvDeleted(Shape):
    deleted: bool | None = None


KEY = Param(
    "key",
    "path",
    Annotated[str, Field(pattern=ENV_NAME.pattern)],
    "a variable name: letters, digits, _",
    required=True,
)


def _entry(key: str, value: str, runtime: dict[str, Any]) -> dict[str, Any]:
    sensitive = is_sensitive(key)
    return {
        "key": key,
        "value": mask_secret(value) if sensitive else value,
        "sensitive": sensitive,
        "source": "runtime" if key in runtime else "config",
    }


async def _runtime_envs(deps: GatewayDeps) -> dict[str, Any]:
    envs = (await deps.runtime.overlay()).get("envs", {})
    return envs if isinstance(envs, dict) else {}


async def _listing(deps: GatewayDeps) -> web.Response:
    runtime = await _runtime_envs(deps)
    envs = deps.config.envs
    return json_response({"envs": [_entry(k, envs[k], runtime) for k in sorted(envs)]})


@router.get("/envs", summary="All variables (sensitive values masked)", response=EnvList)
async def list_envs(request: web.Request) -> web.Response:
    return await _listing(deps_of(request))


@router.put(
    "/envs",
    summary="Replace every variable set at runtime with these. A name that changes how "
    "programs load or where they connect (LD_*, PYTHON*, PATH, *_BASE_URL, HTTPS_PROXY…) "
    "needs the API key, or from the console the owner's confirmation in Telegram",
    body=EnvsBody,
    response=EnvList,
    errors=(403,),
)
async def replace_envs(request: web.Request, body: EnvsBody) -> web.Response:
    deps = deps_of(request)
    envs = body.envs
    table = {}
    for key, value in envs.items():
        table[key] = value

    def change(overlay: dict[str, Any]) -> None:
        overlay["envs"] = table

    await deps.runtime.update(change, caller=caller_of(request))
    return await _listing(deps)


@router.get("/envs/{key}", summary="One variable", params=(KEY,), response=EnvEntry, errors=(404,))
async def get_env(request: web.Request) -> web.Response:
    deps = deps_of(request)
    key = request.match_info["key"]
    if key not in deps.config.envs:
        raise not_found("key", key)
    return json_response(_entry(key, deps.config.envs[key], await _runtime_envs(deps)))


@router.put(
    "/envs/{key}",
    summary="Set one variable (a loader or key-destination name: as PUT /envs says)",
    params=(KEY,),
    body=EnvBody,
    response=EnvEntry,
    errors=(403,),
)
async def set_env(request: web.Request, body: EnvBody) -> web.Response:
    deps = deps_of(request)
    key = request.match_info["key"]
    value = body.value

    def change(overlay: dict[str, Any]) -> None:
        overlay.setdefault("envs", {})[key] = value

    await deps.runtime.update(change, caller=caller_of(request))
    return json_response(_entry(key, value, {key: value}))


@router.delete(
    "/envs/{key}",
    summary="Remove a variable set at runtime",
    params=(KEY,),
    response=EnvDeleted,
    errors=(404,),
)
async def delete_env(request: web.Request) -> web.Response:
    deps = deps_of(request)
    key = request.match_info["key"]
    runtime = await _runtime_envs(deps)
    if key not in runtime:
        if key in deps.config.envs:
            raise refusal("invalid_request", t("gw.env_in_config", key=key), {"key": key})
        raise not_found("key", key)

    def change(overlay: dict[str, Any]) -> None:
        overlay.get("envs", {}).pop(key, None)

    # Removing can only bring back config.toml's value (or the process's): no privilege.
    await deps.runtime.update(change)
    return json_response({"deleted": True, "key": key})
