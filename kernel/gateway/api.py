"""What a route module needs: a :class:`Router` that records each route with the models
of its body and answer (:mod:`kernel.gateway.schema`: they make /openapi.json, and the
router validates the body by its model and hands it to a handler taking ``(request,
body)``), the error model (:class:`ApiError` → ``{"error": {code, message, details}}``,
each code's status from :data:`kernel.core.errors.HTTP_STATUS`), body reading, and the
services the routes are handed (:func:`deps_of`: :class:`kernel.gateway.deps.GatewayDeps`).
Who is calling (the API key, a console sign-in): :mod:`kernel.gateway.apikey`.

A new area of the API is one module under ``kernel/gateway/routes/`` with its own
``router = Router("tag")``, listed in ``kernel/gateway/routes/__init__.py``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import inspect
import json
import types
import typing
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from aiohttp import web
from pydantic import Field, ValidationError

from kernel.core import safejson
from kernel.core.errors import CodedError, http_status
from kernel.core.i18n import t
from kernel.core.messages import ImageBlock
from kernel.gateway.schema import BodyModel, problem

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# A route's function: ``(request)``, or ``(request, body)`` to be handed its body
# validated by the route's ``body`` model (see :meth:`Router.route`).
H = TypeVar("H", bound=Callable[..., Awaitable[web.StreamResponse]])
M = TypeVar("M", bound=BodyModel)

DEPS: web.AppKey[GatewayDeps] = web.AppKey("deps")


def deps_of(request: web.Request) -> GatewayDeps:
    """The services the sidecar's routes use (built by the composition root)."""
    return request.app[DEPS]


class ApiError(Exception):
    """An answer other than success: HTTP status, a stable code, a message that names
    the problem and the fix, and optional details."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.headers = headers or {}  # sent with the answer (Retry-After)


def refusal(code: str, message: str, details: dict[str, Any] | None = None) -> ApiError:
    """An :class:`ApiError` whose status is the code's (``HTTP_STATUS``)."""
    return ApiError(http_status(code, 400), code, message, details)


def invalid(message: str, **details: Any) -> ApiError:
    return refusal("invalid_request", message, details)


def not_found(what: str, ident: str) -> ApiError:
    return refusal("not_found", t("gw.not_found", what=what, id=ident), {what: ident})


def coded(exc: CodedError) -> ApiError:
    return ApiError(http_status(exc.code, 400), exc.code, str(exc), dict(exc.details))


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=json_bytes(data, separators=(",", ":")),
        status=status,
        content_type="application/json",
        charset="utf-8",
        headers=headers,
    )


def json_bytes(data: Any, **kw: Any) -> bytes:
    """``data`` as UTF-8 JSON. A lone surrogate (a model's output may carry one) cannot be
    UTF-8: then the whole is ASCII JSON, the surrogate written as the escape it came as."""
    try:
        return safejson.dumps(data, ensure_ascii=False, **kw).encode()
    except UnicodeEncodeError:
        return safejson.dumps(data, **kw).encode()


def error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> web.Response:
    return json_response(
        {"error": {"code": code, "message": message, "details": details or {}}}, status
    )


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_error(
    status: int, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    """The Messages API's error shape, so the anthropic SDK raises its usual errors."""
    kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return json_response(body, status, headers)


def openai_error(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    code: str | None = None,
    param: str | None = None,
) -> web.Response:
    """OpenAI's error shape for its routes, so the openai SDK reads it as its own.
    ``code``: a stable code of Kernel's own (``budget_exceeded``), also its ``type``, as
    OpenAI names a quota refusal (``insufficient_quota``) in both. ``param``: the field."""
    kind = code or (
        "server_error" if status >= 500 else _ANTHROPIC_TYPES.get(status, "invalid_request_error")
    )
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return json_response(body, status, headers)


def openai_path(path: str) -> bool:
    """The /v1 routes of OpenAI's APIs (chat completions, responses): their errors in
    OpenAI's shape, the rest of /v1 in Anthropic's."""
    return path.startswith(("/v1/chat/", "/v1/responses"))


def v1_error(
    path: str,
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    param: str | None = None,
) -> web.Response:
    """An error on /v1/*: OpenAI's shape on its routes, Anthropic's on the rest."""
    if openai_path(path):
        return openai_error(status, message, headers, param=param)
    return anthropic_error(status, message, headers)


ROUTERS: web.AppKey[list[Router]] = web.AppKey("routers")


# ---------------------------------------------------------------------- bodies

READ_TIMEOUT = web.AppKey("read_timeout", float)
MAX_BODY = web.AppKey("max_body", int)


async def read_bytes(request: web.Request) -> bytes:
    """The whole body: 408 when it does not arrive within ``gateway.read_timeout``, 413
    over ``gateway.max_body_bytes`` (aiohttp's ``client_max_size``)."""
    try:
        async with asyncio.timeout(request.app[READ_TIMEOUT]):
            return await request.read()
    except TimeoutError:
        raise refusal("request_timeout", t("gw.read_timeout")) from None


async def read_json(request: web.Request) -> Any:
    """The parsed body. 400 when it is not JSON (or too deep, a number out of range,
    NaN/Infinity: see :mod:`kernel.core.safejson`), 415 when not sent as JSON, 408 when it
    does not arrive within ``gateway.read_timeout``, 413 over ``gateway.max_body_bytes``."""
    kind = request.content_type.lower()
    if kind != "application/json" and not kind.endswith("+json"):
        # A cross-site page can POST text/plain without a preflight; never JSON.
        raise refusal("unsupported_media_type", t("gw.json_only", got=kind or "none"))
    raw = await read_bytes(request)
    if not raw.strip():
        raise invalid(t("gw.body_missing"))
    try:
        if len(raw) > _PARSE_OFF_LOOP:
            return await asyncio.to_thread(safejson.loads, raw)
        return safejson.loads(raw)
    except safejson.LoneSurrogateError as exc:
        raise invalid(str(exc), field=exc.field) from None
    except safejson.UnsafeJSONError as exc:
        raise invalid(str(exc)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise invalid(t("gw.bad_json", detail=_json_problem(exc))) from None


_PARSE_OFF_LOOP = 1024 * 1024  # bodies larger than this are parsed in a thread


def _json_problem(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno} column {exc.colno}: {exc.msg}"
    return "not UTF-8"


async def read_object(request: web.Request) -> dict[str, Any]:
    data = await read_json(request)
    if not isinstance(data, dict):
        raise invalid(t("gw.body_not_object"))
    return data


async def read_model(
    request: web.Request, model: type[M], context: dict[str, Any] | None = None
) -> M:
    """The body validated by ``model`` (its validators see ``context``, e.g. a path
    parameter): a 400 naming the first field that is wrong."""
    data = await read_object(request)
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        message, field_name = problem(exc)
        raise invalid(message, field=field_name) from None


def query_int(
    request: web.Request, name: str, default: int, *, maximum: int, minimum: int = 0
) -> int:
    """An integer query parameter from ``minimum`` to ``maximum`` (``default`` when
    absent); anything else is refused naming the parameter and the range."""
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if not minimum <= value <= maximum:
        if minimum == 0:
            raise invalid(t("gw.bad_query_int", name=name, maximum=maximum), field=name)
        text = t("gw.bad_query_between", name=name, low=minimum, high=maximum)
        raise invalid(text, field=name)
    return value


# ---------------------------------------------------------------------- routers


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    where: str  # "path" or "query"
    schema: Any  # the parameter's type, as pydantic reads it
    description: str = ""
    required: bool = False


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    body: Any  # the body's model (or type): None when the route takes no body
    response: Any  # the answer's model (or type)
    status: int
    errors: tuple[int, ...]
    params: tuple[Param, ...]
    public: bool
    sse: bool  # may answer with text/event-stream
    anthropic: bool  # errors in the Anthropic format
    body_type: str = "application/json"
    response_type: str = "application/json"
    # "key": the sidecar's API key when one is set. "signature": the handler checks the
    # caller's own signature instead (the QQ platform cannot send the key). "bearer": the
    # handler checks the bearer itself (the API key or a delegation's run token: /mcp).
    # The browser checks still apply to all.
    auth: str = "key"
    also: tuple[int, ...] = ()  # other success statuses, same response (200 beside 201)
    # "jsonrpc": another protocol answers the body (/mcp: the MCP SDK): its success is an
    # SSE stream of JSON-RPC messages or 202, its own refusals JSON-RPC errors.
    protocol: str = ""
    # The router validated the body by ``body`` and handed it to the handler; false: the
    # handler reads its body itself (bytes, a form, JSON-RPC, a model API's own codec).
    validated: bool = False


@dataclass
class Router:
    """One area of the API. Routes carry what /openapi.json says about them, so the
    document and the server are built from the same table."""

    tag: str
    description: str = ""
    operations: list[Operation] = field(default_factory=list)
    # Run at gateway start, before it listens (e.g. to make sure the default chat exists).
    startup: list[Callable[[GatewayDeps], Awaitable[None]]] = field(default_factory=list)
    # Services living as long as the sidecar (the MCP endpoint's session manager): each
    # entered in a task of its own at start, before the sidecar listens (it may set keys
    # of the app), and left in that task at stop, once the sidecar no longer accepts
    # requests and before those in flight are drained (so it can cancel its own).
    services: list[Callable[[GatewayDeps, web.Application], AbstractAsyncContextManager[None]]] = (
        field(default_factory=list)
    )
    # Called once the sidecar listens, with its app and bound port (e.g. to say where).
    listening: list[Callable[[GatewayDeps, web.Application, int], None]] = field(
        default_factory=list
    )

    def route(
        self,
        method: str,
        path: str,
        *,
        summary: str,
        body: Any = None,
        response: Any = None,
        status: int = 200,
        errors: Iterable[int] = (),
        params: Iterable[Param] = (),
        public: bool = False,
        sse: bool = False,
        anthropic: bool = False,
        body_type: str = "application/json",
        response_type: str = "application/json",
        auth: str = "key",
        also: Iterable[int] = (),
        protocol: str = "",
    ) -> Callable[[H], H]:
        """Record a route. ``body``: its body's model, the one declaration of it: for a
        handler taking ``(request, body)`` the router reads the body, validates it by
        that model (its validators see the path's parameters as ``context``) and hands
        the value over; /openapi.json documents the same model."""

        def register(handler: H) -> H:
            validated = _takes_body(handler, body)
            self.operations.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    handler=_validating(handler, body) if validated else handler,
                    summary=summary,
                    tag=self.tag,
                    body=body,
                    response=response,
                    status=status,
                    errors=tuple(errors),
                    params=tuple(params),
                    public=public,
                    sse=sse,
                    anthropic=anthropic,
                    body_type=body_type,
                    response_type=response_type,
                    auth=auth,
                    also=tuple(also),
                    protocol=protocol,
                    validated=validated,
                )
            )
            return handler

        return register

    def get(self, path: str, **kw: Any) -> Callable[[H], H]:
        return self.route("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Callable[[H], H]:
        return self.route("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> Callable[[H], H]:
        return self.route("PUT", path, **kw)

    def delete(self, path: str, **kw: Any) -> Callable[[H], H]:
        return self.route("DELETE", path, **kw)


def _takes_body(handler: Callable[..., Any], body: Any) -> bool:
    """``handler`` takes ``(request, body)``: then ``body`` must be a body model its
    annotation accepts (else the route is refused at import: the model documented is the
    model handed over)."""
    params = list(inspect.signature(handler).parameters)
    if len(params) < 2:
        return False
    if not (isinstance(body, type) and issubclass(body, BodyModel)):
        raise TypeError(f"{handler.__qualname__} takes a body: declare its model as body=")
    try:
        wanted = typing.get_type_hints(handler).get(params[1])
    except NameError as exc:  # a model known only inside a function
        raise TypeError(f"{handler.__qualname__}: name a module-level model ({exc})") from None
    accepted = typing.get_args(wanted) if isinstance(wanted, types.UnionType) else (wanted,)
    if not any(isinstance(kind, type) and issubclass(body, kind) for kind in accepted):
        raise TypeError(f"{handler.__qualname__} takes {wanted}, its route's body is {body}")
    return True


def _validating(handler: Callable[..., Awaitable[web.StreamResponse]], model: Any) -> Handler:
    """``handler`` handed its body validated by ``model`` (:func:`read_model`)."""

    @functools.wraps(handler)
    async def validated(request: web.Request) -> web.StreamResponse:
        body = await read_model(request, model, context=dict(request.match_info))
        return await handler(request, body)

    return validated


def path_param(name: str, description: str = "") -> Param:
    return Param(name, "path", PathPart, description, required=True)


def query_param(name: str, schema: Any, description: str = "") -> Param:
    return Param(name, "query", schema, description)


PathPart = Annotated[str, Field(min_length=1)]


def bounded(low: int, high: int | None = None) -> Any:
    """An integer query parameter from ``low`` to ``high``."""
    return Annotated[int, Field(ge=low, le=high)]


# ---------------------------------------------------------------------- content

IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def image_block(media_type: Any, data: Any, field: str) -> ImageBlock:
    """A base64 image from a request, checked: a known type and valid base64."""
    if media_type not in IMAGE_MEDIA_TYPES:
        raise invalid(
            t("gw.bad_image_type", field=field, types=", ".join(IMAGE_MEDIA_TYPES)), field=field
        )
    if not is_base64(data):
        raise invalid(t("gw.bad_image_data", field=field), field=field)
    return ImageBlock(media_type, data)


def is_base64(data: Any) -> bool:
    """``data`` is a non-empty base64 string."""
    if not isinstance(data, str) or not data:
        return False
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def sse_frame(data: Any, event: str | None = None) -> bytes:
    text = json_bytes(data) if not isinstance(data, str) else data.encode()
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: ".encode() + text + b"\n\n"
