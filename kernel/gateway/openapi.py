"""``/openapi.json``: built from the same :class:`Router` tables the server is built from."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import ConfigDict

from kernel import __version__
from kernel.gateway.api import Operation, Router, openai_path
from kernel.gateway.schema import OpenShape, Shape, component, json_schema


class ErrorDetail(Shape):
    code: str
    message: str
    details: dict[str, Any]


class Error(Shape):
    """Kernel's own error shape."""

    error: ErrorDetail


class AnthropicErrorDetail(Shape):
    type: str
    message: str


class AnthropicError(Shape):
    """The Messages API's error shape (/v1/*)."""

    type: Literal["error"]
    error: AnthropicErrorDetail


class OpenAIErrorDetail(Shape):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIError(Shape):
    """OpenAI's error shape (/v1/chat/*, /v1/responses)."""

    error: OpenAIErrorDetail


class JsonRpcErrorData(Shape):
    code: int
    message: str
    data: Any = None


class JsonRpcError(Shape):
    """A JSON-RPC 2.0 error (the MCP protocol's refusals on /mcp)."""

    jsonrpc: Literal["2.0"]
    id: int | str | None = None
    error: JsonRpcErrorData


class JsonRpcMessage(Shape):
    """One JSON-RPC 2.0 message of the MCP protocol (streamable HTTP): a request
    (``method`` and ``id``), a notification (``method``, no ``id``), or the answer to a
    server's request (``id`` with ``result`` or ``error``)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": True})
    jsonrpc: Literal["2.0"]
    id: int | str | None = None
    method: str | None = None
    params: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: JsonRpcErrorData | None = None


# A JSON-RPC route's own answers (the SDK's), beside Kernel's refusals before it.
_JSONRPC_STATUSES = {400: "Not JSON, too deep (Kernel's error) or no JSON-RPC message", 406: ""}

_REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted: started; its outcome shows in the state",
    400: "Invalid request",
    401: "Missing or wrong API key",
    403: "Forbidden",
    404: "Not found",
    406: "Not acceptable: Accept must name application/json and text/event-stream",
    408: "The body did not arrive in time",
    409: (
        "Conflict: busy (a chat's running turn, a running job), exists already, "
        "or changed since (see the error code)"
    ),
    410: "Gone: expired",
    413: "Body larger than gateway.max_body_bytes",
    415: "The body was not sent as Content-Type: application/json",
    429: (
        "Rate limited: too many wrong API keys or sign-ins from this address or all "
        "together (see Retry-After), or by the model provider"
    ),
    502: "The model provider failed",
    503: "Unavailable",
}


def operation_id(op: Operation) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "_", openapi_path(op.path)).strip("_")
    return f"{op.method.lower()}_{words or 'root'}"


def _response(op: Operation, status: int, components: dict[str, Any]) -> dict[str, Any]:
    schema = json_schema(op.response if op.response is not None else OpenShape, components)
    content: dict[str, Any] = {op.response_type: {"schema": schema}}
    if op.sse:
        # Each event's data: a JSON turn event (and "[DONE]" to end /agent/process).
        content["text/event-stream"] = {"schema": {"description": "one event's data"}}
    return {"description": _REASONS.get(status, "OK"), "content": content}


def _jsonrpc_responses(op: Operation, components: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC route's success: an SSE stream whose events each carry one JSON-RPC
    message (``op.response``: the answer to a request), or 202 with no body (a
    notification or an answer was taken)."""
    each = component(op.response, components)
    return {
        "200": {
            "description": "The answer, streamed: each SSE event's data is one JSON-RPC message",
            "content": {op.response_type: {"schema": each}},
        },
        "202": {"description": "Accepted: a notification or an answer; no body"},
    }


def _error(op: Operation, status: int, components: dict[str, Any]) -> dict[str, Any]:
    name = "AnthropicError" if op.anthropic else "Error"
    if openai_path(op.path):  # the same path rule as api.v1_error
        name = "OpenAIError"
    schema: dict[str, Any] = {"$ref": "#/components/schemas/" + name}
    if op.protocol == "jsonrpc" and status in _JSONRPC_STATUSES:
        protocol = component(JsonRpcError, components)
        schema = {"oneOf": [schema, protocol]} if status == 400 else protocol
    described = _JSONRPC_STATUSES.get(status) if op.protocol == "jsonrpc" else ""
    error: dict[str, Any] = {
        "description": described or _REASONS.get(status, "Error"),
        "content": {"application/json": {"schema": schema}},
    }
    if status == 429:
        retry = "seconds until a slot frees (wrong keys throttled)"
        error["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": retry}}
    return error


def _operation(op: Operation, components: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operationId": operation_id(op),
        "summary": op.summary,
        "tags": [op.tag],
    }
    if op.params:
        out["parameters"] = [
            {
                "name": p.name,
                "in": p.where,
                "required": p.required,
                "schema": json_schema(p.schema, components),
                **({"description": p.description} if p.description else {}),
            }
            for p in op.params
        ]
    if op.body is not None:
        out["requestBody"] = {
            # A file's bytes may be none (an empty file); a JSON body may not.
            "required": _is_json(op.body_type),
            "content": {op.body_type: {"schema": json_schema(op.body, components)}},
        }
    errors = set(op.errors)
    if op.body is not None:
        errors |= {400, 408, 413}
    if op.body is not None and _is_json(op.body_type):
        errors.add(415)  # read_json refuses any other Content-Type
    if op.params:
        errors.add(400)
    if not op.public and op.auth in ("key", "bearer"):
        errors |= {401, 429}  # 429: wrong keys throttled (kernel.gateway.guesses)
        out["security"] = [{"ApiKey": []}, {"Bearer": []}]
    else:
        out["security"] = []
    if op.protocol == "jsonrpc":
        errors |= set(_JSONRPC_STATUSES)
        responses = _jsonrpc_responses(op, components)
    else:
        responses = {
            str(status): _response(op, status, components) for status in (op.status, *op.also)
        }
    for status in sorted(errors):
        responses[str(status)] = _error(op, status, components)
    out["responses"] = responses
    return out


def _is_json(media_type: str) -> bool:
    return media_type == "application/json" or media_type.endswith("+json")


def openapi_path(path: str) -> str:
    """aiohttp's ``{name:regex}`` as OpenAPI's ``{name}``."""
    return re.sub(r"\{(\w+):[^}]*\}", r"{\1}", path)


def build_document(routers: Sequence[Router]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    components: dict[str, Any] = {}
    for kind in (Error, AnthropicError, OpenAIError):
        component(kind, components)
    for router in routers:
        for op in router.operations:
            item = paths.setdefault(openapi_path(op.path), {})
            item[op.method.lower()] = _operation(op, components)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Kernel sidecar",
            "version": __version__,
            "description": (
                "The local HTTP API of Kernel, in the same process as the Telegram bot. "
                "Errors are {error: {code, message, details}}; /v1/* answers in the "
                "Anthropic Messages format. Every response carries X-Request-Id."
            ),
        },
        "tags": [{"name": r.tag, "description": r.description} for r in routers],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"},
            },
        },
    }
