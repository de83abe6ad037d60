"""Channels: ``/config/channels`` (seed 000 "渠道配置契约"), the QQ callback
``/channels/qq/inbound`` and the channels' state.

Settings changed here are kept in ``data/runtime.toml`` ``[channels.<type>]`` (validated
as a whole configuration first, in effect at once); secrets (``secret``,
``client_secret``) are never shown whole, and sending back the masked value leaves the
secret as it is.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aiohttp import web
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    model_validator,
)

from kernel.channels.qq_inbound import InboundError
from kernel.config import CHANNEL_TYPES, QQ_TARGET_TYPES
from kernel.config.channels import CHANNEL_MODELS
from kernel.config.privilege import strings_of
from kernel.config.secrets import env_variable, masked_view, secret_fields
from kernel.core.capped import TooLarge, read_capped
from kernel.core.errors import ChannelError
from kernel.core.i18n import t
from kernel.core.redact import mask_secret
from kernel.gateway.api import (
    READ_TIMEOUT,
    ApiError,
    Param,
    Router,
    deps_of,
    invalid,
    json_response,
    refusal,
)
from kernel.gateway.apikey import authorized, caller_of
from kernel.gateway.schema import BodyModel, OpenShape, Shape, documented, expecting

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("channels", "Channel settings, the QQ callback, delivery state")

QQ_MAX_BODY = 1024 * 1024  # a QQ callback's body, in bytes
SECRET_FIELDS = {key for model in CHANNEL_MODELS.values() for key in secret_fields(model)}
DESCRIPTIONS = {
    "console": "HTTP: replies come back from /agent/process; deliveries land in a console chat",
    "webhook": "each text POSTed as JSON to url (HMAC-SHA256 signed when secret is set)",
    "qq": "the official QQ bot open platform: callbacks at /channels/qq/inbound, replies by API",
}
NAME = Param("name", "path", Literal[CHANNEL_TYPES], "channel type", required=True)

_KINDS = {bool: "boolean", str: "string", int: "integer", float: "number", list: "array"}
_TYPES: dict[str, Any] = {
    "boolean": bool,
    "string": Annotated[str, Field(max_length=4096)],
    "integer": int,
    "number": float,
    "array": Annotated[list[Annotated[str, Field(max_length=256)]], Field(max_length=1000)],
}


def _fields(name: str) -> dict[str, str]:
    """Field name → JSON type, from the settings model's defaults."""
    defaults = CHANNEL_MODELS[name]()
    return {field: _KINDS[type(getattr(defaults, field))] for field in type(defaults).model_fields}


def _no_nul(value: Any) -> Any:
    if isinstance(value, str) and "\0" in value:
        raise ValueError("NUL")
    return value


def _field_type(name: str, field: str, kind: str) -> Any:
    kind_type = _TYPES[kind]
    if name == "qq" and field == "target_type":
        kind_type = Annotated[kind_type, documented(Literal[QQ_TARGET_TYPES])]
    return Annotated[kind_type, AfterValidator(_no_nul), expecting(kind)]


class _Settings(BodyModel):
    model_config = ConfigDict(strict=True, extra="forbid")


@cache
def settings_model(name: str) -> type[BodyModel]:
    """One channel type's settings, each field optional (a change names what changes)."""
    fields: dict[str, Any] = {
        field: (_field_type(name, field, kind) | None, None)
        for field, kind in _fields(name).items()
    }
    model: type[BodyModel] = create_model(f"{name.title()}Settings", __base__=_Settings, **fields)
    return model


def _all_settings() -> dict[str, Any]:
    """Every type's fields; a field two types share is of one JSON type (so the union
    validates each field as its own type's model does)."""
    fields: dict[str, Any] = {}
    kinds: dict[str, str] = {}
    for name in CHANNEL_TYPES:
        for field, kind in _fields(name).items():
            if kinds.setdefault(field, kind) != kind:
                raise TypeError(f"channels: {field} is {kind} in {name}, {kinds[field]} before")
            annotation = settings_model(name).model_fields[field].annotation
            fields.setdefault(field, (annotation, None))
    return fields


class OneChannel(BodyModel):
    """A change of the channel type the path names (``name`` in the validation's
    context): only that type's fields are taken."""

    @model_validator(mode="before")
    @classmethod
    def _that_types_fields(cls, data: Any, info: ValidationInfo) -> Any:
        context = info.context or {}
        if "name" not in context or not isinstance(data, dict):
            return data
        name = channel_name(context["name"])
        fields = _fields(name)
        unknown = [field for field in data if field not in fields]
        if unknown:
            allowed = ", ".join(fields)
            raise invalid(t("gw.channel_field", field=unknown[0][:64], name=name, fields=allowed))
        if not data:
            raise invalid(t("gw.nothing_to_change", fields=", ".join(fields)))
        return data


ChannelSettings: type[BodyModel] = create_model(
    "ChannelSettings",
    __base__=OneChannel,
    __doc__="the settings of one channel type (fields depend on the type)",
    **_all_settings(),
)


def settings_view(deps: GatewayDeps, name: str) -> dict[str, Any]:
    return masked_view(getattr(deps.config.channels, name))


def _channel_name(request: web.Request) -> str:
    return channel_name(request.match_info["name"])


def channel_name(name: str) -> str:
    """``name`` when it is a channel type, else refused (``channel_not_supported``)."""
    if name not in CHANNEL_TYPES:
        raise ChannelError(
            ChannelError.NOT_SUPPORTED,
            t("channel.not_supported", name=name[:64], known=", ".join(CHANNEL_TYPES)),
            channel=name[:64],
            supported=list(CHANNEL_TYPES),
        )
    return name


class ChannelsSettings(Shape):
    channels: dict[str, ChannelSettings]


@router.get(
    "/config/channels",
    summary="Every channel's settings (secrets masked)",
    response=ChannelsSettings,
)
async def list_channels(request: web.Request) -> web.Response:
    deps = deps_of(request)
    return json_response({"channels": {name: settings_view(deps, name) for name in CHANNEL_TYPES}})


class ChannelField(Shape):
    name: str
    type: str
    secret: bool


class ChannelType(Shape):
    name: str
    description: str
    fields: list[ChannelField]


class ChannelTypes(Shape):
    types: list[ChannelType]


@router.get(
    "/config/channels/types",
    summary="The channel types and their fields",
    response=ChannelTypes,
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
    response=ChannelSettings,
)
async def get_channel(request: web.Request) -> web.Response:
    return json_response(settings_view(deps_of(request), _channel_name(request)))


@router.put(
    "/config/channels/{name:(?!types$)[^/]+}",  # PUT .../types: 405, not a channel
    summary="Change a channel's settings (kept in data/runtime.toml, in effect at once); "
    "QQ's api_base or token_url while it holds client_secret: only with client_secret "
    "given again, or the owner's confirmation in Telegram",
    params=(NAME,),
    body=ChannelSettings,
    response=ChannelSettings,
    errors=(403,),
)
async def set_channel(request: web.Request, given: OneChannel) -> web.Response:
    """``given``: the body, only the named type's fields (checked by the router)."""
    deps = deps_of(request)
    name = _channel_name(request)
    current = getattr(deps.config.channels, name)
    changes: dict[str, Any] = {}
    for field in given.model_fields_set:
        value = getattr(given, field)
        if field in SECRET_FIELDS:
            secret = getattr(current, field)
            if secret and value == mask_secret(secret):
                continue  # the masked value shown by GET, sent back unchanged
            env = env_variable(CHANNEL_MODELS[name], field)
            if env and deps.config.source_env.get(env):
                raise refusal("invalid_request", t("gw.provider_env_wins", env=env))
        changes[field] = value

    def change(overlay: dict[str, Any]) -> None:
        section = overlay.setdefault("channels", {}).setdefault(name, {})
        section.update(changes)

    if changes:  # QQ's addresses move its secret: given again here, or privileged
        own = strings_of(changes)
        await deps.runtime.update(change, caller=caller_of(request), given=own)
    return json_response(settings_view(deps, name))


class QQCallback(OpenShape):
    """a QQ callback payload ({op, d, t, id}), read by the QQ channel itself"""


@router.post(
    "/channels/qq/inbound",
    summary="QQ bot open platform callback: op 13 validation, signed message events",
    body=QQCallback,
    response=OpenShape,
    errors=(400, 401, 413),
    auth="signature",
)
async def qq_inbound(request: web.Request) -> web.Response:
    """Signed with X-Signature-Ed25519 / X-Signature-Timestamp; message events are
    acknowledged at once ({"op": 12, "d": 0}) and answered through the QQ API. No API
    key needed (the platform cannot send one): the signature is checked instead, and
    only while the QQ channel is enabled and configured."""
    deps = deps_of(request)
    if deps.qq.unavailable() and not authorized(request, refuse=False):
        # Without the key, this route exists only for a QQ channel that runs (while wrong
        # keys are throttled, none is compared: 401 as documented).
        raise refusal("unauthorized", t("gw.unauthorized"))
    # Read by anyone (no key) before the signature is checked: kept small.
    too_large = refusal(
        "request_too_large", t("qq.too_large", limit=QQ_MAX_BODY), {"limit": QQ_MAX_BODY}
    )
    if (request.content_length or 0) > QQ_MAX_BODY:
        raise too_large
    try:
        async with asyncio.timeout(request.app[READ_TIMEOUT]):
            raw = await read_capped(request.content.iter_any(), QQ_MAX_BODY)
    except TimeoutError:
        raise refusal("request_timeout", t("gw.read_timeout")) from None
    except TooLarge:  # a chunked body says no length: counted as it comes
        raise too_large from None
    try:
        answer = await deps.qq_inbound.handle(raw, request.headers)
    except InboundError as exc:
        raise ApiError(exc.status, exc.code, str(exc)) from None
    return json_response(answer)


class QQState(Shape):
    token: OpenShape


@router.get(
    "/channels/qq/state",
    summary="QQ channel: token state, last inbound event, last reply, last error",
    response=QQState,
)
async def qq_state(request: web.Request) -> web.Response:
    return json_response(deps_of(request).qq.state())


class WebhookState(Shape):
    delivered: int
    failed: int
    recent_failures: list[OpenShape]


@router.get(
    "/channels/webhook/state",
    summary="Webhook channel: deliveries, failures (the recent ones listed), last error",
    response=WebhookState,
)
async def webhook_state(request: web.Request) -> web.Response:
    return json_response(deps_of(request).webhook.state())
