"""Channels: ``/config/channels`` (seed 000 "渠道配置契约"), the QQ callback
``/channels/qq/inbound`` and the channels' state.

Settings changed here are kept in ``data/runtime.toml`` ``[channels.<type>]`` (validated
as a whole configuration first, in effect at once); secrets (``secret``,
``client_secret``) are never shown whole, and sending back the masked value leaves the
secret as it is.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kernel.app import Kernel
from kernel.channels.qq_inbound import InboundError
from kernel.config import CHANNEL_TYPES, QQ_TARGET_TYPES
from kernel.config.channels import CHANNEL_MODELS
from kernel.config.secrets import env_variable, masked_view, secret_fields
from kernel.core.errors import ChannelError
from kernel.core.i18n import t
from kernel.core.redact import mask_secret
from kernel.gateway.api import (
    READ_TIMEOUT,
    ApiError,
    Param,
    Router,
    authorized,
    invalid,
    json_response,
    kernel_of,
    read_object,
)

router = Router("channels", "Channel settings, the QQ callback, delivery state")

QQ_MAX_BODY = 1024 * 1024  # a QQ callback's body, in bytes
SECRET_FIELDS = {key for model in CHANNEL_MODELS.values() for key in secret_fields(model)}
DESCRIPTIONS = {
    "console": "HTTP: replies come back from /agent/process; deliveries land in a console chat",
    "webhook": "each text POSTed as JSON to url (HMAC-SHA256 signed when secret is set)",
    "qq": "the official QQ bot open platform: callbacks at /channels/qq/inbound, replies by API",
}
NAME = Param(
    "name", "path", {"type": "string", "enum": list(CHANNEL_TYPES)}, "channel type", required=True
)

_KINDS = {bool: "boolean", str: "string", int: "integer", float: "number", list: "array"}


def _fields(name: str) -> dict[str, str]:
    """Field name → JSON type, from the settings model's defaults."""
    defaults = CHANNEL_MODELS[name]()
    return {field: _KINDS[type(getattr(defaults, field))] for field in type(defaults).model_fields}


def _schema(name: str) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for field, kind in _fields(name).items():
        props[field] = {"type": kind}
        if kind == "array":
            props[field]["items"] = {"type": "string"}
    if name == "qq":
        props["target_type"]["enum"] = list(QQ_TARGET_TYPES)
    return {"type": "object", "properties": props}


SETTINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "the settings of one channel type (fields depend on the type)",
    "properties": {k: v for name in CHANNEL_TYPES for k, v in _schema(name)["properties"].items()},
}


def settings_view(kernel: Kernel, name: str) -> dict[str, Any]:
    return masked_view(getattr(kernel.config.channels, name))


def _channel_name(request: web.Request) -> str:
    name = request.match_info["name"]
    if name not in CHANNEL_TYPES:
        raise ChannelError(
            ChannelError.NOT_SUPPORTED,
            t("channel.not_supported", name=name[:64], known=", ".join(CHANNEL_TYPES)),
            channel=name[:64],
            supported=list(CHANNEL_TYPES),
        )
    return name


@router.get(
    "/config/channels",
    summary="Every channel's settings (secrets masked)",
    response={
        "type": "object",
        "required": ["channels"],
        "properties": {"channels": {"type": "object", "additionalProperties": SETTINGS_SCHEMA}},
    },
)
async def list_channels(request: web.Request) -> web.Response:
    kernel = kernel_of(request)
    return json_response(
        {"channels": {name: settings_view(kernel, name) for name in CHANNEL_TYPES}}
    )


@router.get(
    "/config/channels/types",
    summary="The channel types and their fields",
    response={
        "type": "object",
        "required": ["types"],
        "properties": {"types": {"type": "array", "items": {"type": "object"}}},
    },
)
async def channel_types(request: web.Request) -> web.Response:
    types = [
        {
            "name": name,
            "description": DESCRIPTIONS[name],
            "fields": [
                {"name": field, "type": kind, "secret": field in SECRET_FIELDS}
                for field, kind in _fields(name).items()
            ],
        }
        for name in CHANNEL_TYPES
    ]
    return json_response({"types": types})


@router.get(
    "/config/channels/{name}",
    summary="One channel's settings (secrets masked)",
    params=(NAME,),
    response=SETTINGS_SCHEMA,
)
async def get_channel(request: web.Request) -> web.Response:
    return json_response(settings_view(kernel_of(request), _channel_name(request)))


def _check(name: str, field: str, kind: str, value: Any) -> Any:
    ok = {
        "boolean": isinstance(value, bool),
        "string": isinstance(value, str) and "\0" not in value and len(value) <= 4096,
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "array": isinstance(value, list)
        and len(value) <= 1000
        and all(isinstance(v, str) and len(v) <= 256 for v in value),
    }[kind]
    if not ok:
        raise invalid(t("gw.bad_field", field=field, expected=kind), field=field)
    return float(value) if kind == "number" else value


@router.put(
    "/config/channels/{name:(?!types$)[^/]+}",  # PUT .../types: 405, not a channel
    summary="Change a channel's settings (kept in data/runtime.toml, in effect at once)",
    params=(NAME,),
    body=SETTINGS_SCHEMA,
    response=SETTINGS_SCHEMA,
)
async def set_channel(request: web.Request) -> web.Response:
    kernel = kernel_of(request)
    name = _channel_name(request)
    body = await read_object(request)
    fields = _fields(name)
    current = getattr(kernel.config.channels, name)
    changes: dict[str, Any] = {}
    for field, value in body.data.items():
        if field not in fields:
            allowed = ", ".join(fields)
            raise invalid(t("gw.channel_field", field=field[:64], name=name, fields=allowed))
        value = _check(name, field, fields[field], value)
        if field in SECRET_FIELDS:
            secret = getattr(current, field)
            if secret and value == mask_secret(secret):
                continue  # the masked value shown by GET, sent back unchanged
            env = env_variable(CHANNEL_MODELS[name], field)
            if env and kernel.config.source_env.get(env):
                raise ApiError(400, "invalid_request", t("gw.provider_env_wins", env=env))
        changes[field] = value
    if not changes and not body.data:
        raise invalid(t("gw.nothing_to_change", fields=", ".join(fields)))

    def change(overlay: dict[str, Any]) -> None:
        section = overlay.setdefault("channels", {}).setdefault(name, {})
        section.update(changes)

    if changes:
        await kernel.runtime.update(change)
    return json_response(settings_view(kernel, name))


@router.post(
    "/channels/qq/inbound",
    summary="QQ bot open platform callback: op 13 validation, signed message events",
    body={"type": "object", "description": "a QQ callback payload ({op, d, t, id})"},
    response={"type": "object"},
    errors=(400, 401, 413),
    auth="signature",
)
async def qq_inbound(request: web.Request) -> web.Response:
    """Signed with X-Signature-Ed25519 / X-Signature-Timestamp; message events are
    acknowledged at once ({"op": 12, "d": 0}) and answered through the QQ API. No API
    key needed (the platform cannot send one): the signature is checked instead, and
    only while the QQ channel is enabled and configured."""
    kernel = kernel_of(request)
    if kernel.qq.unavailable() and not authorized(request):
        # Without the key, this route exists only for a QQ channel that runs.
        raise ApiError(401, "unauthorized", t("gw.unauthorized"))
    # Read by anyone (no key) before the signature is checked: kept small.
    too_large = ApiError(
        413, "request_too_large", t("qq.too_large", limit=QQ_MAX_BODY), {"limit": QQ_MAX_BODY}
    )
    if (request.content_length or 0) > QQ_MAX_BODY:
        raise too_large
    try:
        async with asyncio.timeout(request.app[READ_TIMEOUT]):
            raw = await request.read()
    except TimeoutError:
        raise ApiError(408, "request_timeout", t("gw.read_timeout")) from None
    if len(raw) > QQ_MAX_BODY:
        raise too_large
    try:
        answer = await kernel.qq_inbound.handle(raw, request.headers)
    except InboundError as exc:
        raise ApiError(exc.status, exc.code, str(exc)) from None
    return json_response(answer)


@router.get(
    "/channels/qq/state",
    summary="QQ channel: token state, last inbound event, last reply, last error",
    response={"type": "object", "required": ["token"], "properties": {"token": {"type": "object"}}},
)
async def qq_state(request: web.Request) -> web.Response:
    return json_response(kernel_of(request).qq.state())


@router.get(
    "/channels/webhook/state",
    summary="Webhook channel: deliveries, failures (the recent ones listed), last error",
    response={
        "type": "object",
        "required": ["delivered", "failed", "recent_failures"],
        "properties": {
            "delivered": {"type": "integer"},
            "failed": {"type": "integer"},
            "recent_failures": {"type": "array", "items": {"type": "object"}},
        },
    },
)
async def webhook_state(request: web.Request) -> web.Response:
    return json_response(kernel_of(request).webhook.state())
