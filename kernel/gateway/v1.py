"""What the model APIs of the sidecar share (``/v1/messages``: Anthropic's shape,
``/v1/chat/completions`` and ``/v1/responses``: OpenAI's): their errors (:class:`V1Error`,
in English, never the catalogue's), the body reader, validation of a body's top-level
fields by a pydantic model (:func:`validate`), the model names served
(:func:`resolve_model`), a provider's failure in terms the SDKs act on, and the one
problems table (:data:`PROBLEMS`). The answer's flow is :mod:`kernel.gateway.model_api`."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from kernel.config import ProviderConfig, model_alias_target
from kernel.core import safejson
from kernel.core.errors import (
    CapabilityError,
    ProviderError,
    RateLimitedError,
    ToolError,
)
from kernel.core.messages import ImageBlock, Message
from kernel.core.provider import ChatRequest, Provider
from kernel.gateway.api import ApiError, read_json
from kernel.gateway.schema import BodyModel
from kernel.tools.repair import repair_arguments

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

log = logging.getLogger(__name__)

MODEL_NAME_MAX = 256
B = TypeVar("B", bound=BaseModel)


# ---------------------------------------------------------------------- errors


class V1Error(ApiError):
    """An error of the Claude-compatible API, its message already in English."""


def bad(field: str, problem: str) -> V1Error:
    return V1Error(400, "invalid_request", f"{field}: {problem}", {"field": field})


def not_found_model(model: str, served: list[str]) -> V1Error:
    shown = ", ".join(served[:50]) + (", …" if len(served) > 50 else "")
    return V1Error(
        404,
        "not_found",
        f"model: {model[:MODEL_NAME_MAX]!r} is not served here. Served: {shown or 'none'}. "
        "Name one of these, or map the name in config.toml [gateway.model_aliases]",
    )


_V1_MESSAGES: dict[str, str] = {
    "unauthorized": "invalid x-api-key: send Kernel's gateway.api_key (or the content of "
    "gateway.key in its data directory) as the x-api-key header (ANTHROPIC_API_KEY) or as "
    "Authorization: Bearer",
    "forbidden_origin": "requests from web pages are refused: list your page's origin in "
    "gateway.allowed_origins",
    "forbidden_host": "the Host header is not a loopback name: use 127.0.0.1 or localhost, "
    'or remove gateway.auth = "none" and send the key',
    "method_not_allowed": "method not allowed here",
    "request_too_large": "request too large: the body exceeds gateway.max_body_bytes",
    "request_timeout": "the request body did not arrive within gateway.read_timeout",
    "unsupported_media_type": "the body must be sent as Content-Type: application/json",
    "invalid_request": "the request body is not a valid JSON object",
    "internal_error": "internal error in Kernel: see its log (search for the request-id)",
}


def v1_message(method: str, path: str, exc: ApiError) -> str:
    """The English message of an error on ``/v1/``: its own for the API's errors, one per
    code for errors the sidecar raised before the route ran (auth, routing, limits)."""
    if isinstance(exc, V1Error):
        return exc.message
    if exc.status == 404:
        return (
            f"not found: {method} {path[:200]} is not part of this API (POST /v1/messages, "
            "POST /v1/messages/count_tokens, POST /v1/chat/completions, POST /v1/responses, "
            "GET and DELETE /v1/responses/{response_id}, GET /v1/models, "
            "GET /v1/models/{model_id})"
        )
    if exc.code == "too_many_wrong_keys":
        return (
            "rate limited: too many wrong API keys from this address (or from all together) "
            f"in the last minute; no key is checked for {exc.details.get('retry_after', 60)} s "
            "(retry-after)"
        )
    if exc.code == "method_not_allowed":
        allowed = ", ".join(exc.details.get("allowed") or []) or "-"
        return f"method {method} not allowed for {path[:200]}; allowed: {allowed}"
    return _V1_MESSAGES.get(exc.code, f"request failed ({exc.status})")


# ---------------------------------------------------------------------- bodies

LONE_SURROGATE = (
    "holds a lone surrogate (an escape such as \\ud800 without its other half), which is "
    "not text: send the whole character (both halves of its UTF-16 pair) or leave it out"
)
TOO_DEEP = f"nested deeper than {safejson.MAX_DEPTH} levels"


class V1Body(BodyModel):
    """A model API's request body, as any body (strict types, null is absent); unknown
    fields are ignored as the APIs ignore fields of betas they do not use."""


# The words for a body field's problem, by field and pydantic's error type (``""``: any
# other type), the one table of the three APIs: a field's words are the same in each API
# that has the field, unless an API has words of its own (``"<api>:<field>"``: the
# Messages API's temperature is from 0 to 1, OpenAI's from 0 to 2).
PROBLEMS: dict[str, dict[str, str]] = {
    "model": {"": f"Field required (a model name of at most {MODEL_NAME_MAX} characters)"},
    "messages:model": {
        "string_too_long": f"at most {MODEL_NAME_MAX} characters",
        "": "Field required (a model name, e.g. from GET /v1/models)",
    },
    "messages": {"": "Field required (a non-empty array of messages)"},
    "stream": {"": "must be a boolean"},
    "temperature": {"": "must be a number from 0 to 2"},
    "messages:temperature": {"": "must be a number from 0 to 1"},
    "top_p": {"": "must be a number from 0 to 1"},
    "top_k": {"": "must be an integer ≥ 1"},
    "max_tokens": {"": "must be an integer ≥ 1"},
    "messages:max_tokens": {"": "Field required (an integer ≥ 1)"},
    "max_completion_tokens": {"": "must be an integer ≥ 1"},
    "max_output_tokens": {"": "must be an integer ≥ 1"},
    "stop_sequences": {"": "must be an array of non-empty strings"},
    "stop": {"": "must be a non-empty string or an array of them"},
    "input": {"": "must be a string or an array of input items"},
    "instructions": {"": "must be a string"},
    "store": {"": "must be a boolean"},
    "previous_response_id": {"": "must be a response id (resp_…) of at most 200 characters"},
    "parallel_tool_calls": {"": "must be a boolean"},
}
Api = Literal["messages", "chat", "responses"]


def problem_words(api: Api, field: str) -> dict[str, str] | None:
    """The words for ``field``'s problems in ``api`` (None: pydantic's own)."""
    return PROBLEMS.get(f"{api}:{field}") or PROBLEMS.get(field)


def validate(model: type[B], data: Any, api: Api) -> B:
    """``data`` validated by ``model``; the first problem as :func:`bad` words it:
    :data:`PROBLEMS` for ``api``'s field, else pydantic's words."""
    if not isinstance(data, dict):
        raise V1Error(400, "invalid_request", "the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = [str(part) for part in error["loc"]]
        field = loc[0] if loc else "body"
        words = problem_words(api, field)
        if words is None:
            raise bad(".".join(loc), error["msg"]) from None
        raise bad(field, words.get(error["type"]) or words.get("") or error["msg"]) from None


def provider_failure(exc: ProviderError) -> tuple[int, str, dict[str, str]]:
    """(status, message, headers) for a provider failure, in terms the SDK acts on."""
    message = f"the model provider failed: {exc}"
    if isinstance(exc, RateLimitedError):
        headers = {"retry-after": str(round(exc.retry_after))} if exc.retry_after else {}
        return 429, message, headers
    if isinstance(exc, CapabilityError) or exc.status in (400, 404, 413, 422):
        return 400, message, {}
    return 502, message, {}


async def read_body(request: web.Request) -> Any:
    """The JSON body (the sidecar's own reader and limits), its refusals in English."""
    try:
        return await read_json(request)
    except ApiError as exc:
        if exc.code != "invalid_request":
            message = v1_message(request.method, request.path, exc)
            raise V1Error(exc.status, exc.code, message) from None
    raw = await request.read()  # aiohttp keeps the body read above: no second read
    try:
        safejson.loads(raw)
    except safejson.LoneSurrogateError as exc:
        raise bad(exc.field, LONE_SURROGATE) from None
    except safejson.UnsafeJSONError:
        detail = f"{TOO_DEEP}, a number out of range, or NaN/Infinity"
    except json.JSONDecodeError as problem:
        detail = f"line {problem.lineno} column {problem.colno}: {problem.msg}"
    except UnicodeDecodeError:
        detail = "not UTF-8"
    else:
        detail = "standard JSON only"
    raise V1Error(400, "invalid_request", f"the request body is not valid JSON ({detail})")


# ---------------------------------------------------------------------- model names


def served_models(deps: GatewayDeps) -> dict[str, tuple[str, str]]:
    """Served name → (provider, model): each enabled provider's models and aliases (the
    active provider first, so it wins a name two providers share), then the aliases of
    ``[gateway.model_aliases]`` that are plain names rather than patterns."""
    enabled = deps.config.enabled_providers
    active = deps.agent.selection.provider_name
    served: dict[str, tuple[str, str]] = {}
    for name in [active, *(n for n in enabled if n != active)]:
        pcfg = enabled.get(name)
        if pcfg is None:
            continue
        for model in pcfg.models:
            served.setdefault(model, (name, model))
        for alias, model in pcfg.aliases.items():
            served.setdefault(alias, (name, model))
    for pattern, target in deps.config.gateway.model_aliases.items():
        if "*" not in pattern and (resolved := _target(deps, target)) is not None:
            served.setdefault(pattern, resolved)
    return served


def _target(deps: GatewayDeps, target: str) -> tuple[str, str] | None:
    """(provider, model) of an alias target, None while its provider is disabled."""
    provider, model = model_alias_target(target)
    if not provider:
        return deps.agent.selection.provider_name, deps.agent.selection.model
    pcfg = deps.config.enabled_providers.get(provider)
    if pcfg is None:
        return None
    return provider, pcfg.resolve(model) or model


def resolve_model(deps: GatewayDeps, requested: str) -> tuple[str, str]:
    """(provider, model) answering ``requested``; 404 naming what is served if none."""
    served = served_models(deps)
    if requested in served:
        return served[requested]
    for pattern, target in deps.config.gateway.model_aliases.items():
        if glob_match(pattern, requested) and (resolved := _target(deps, target)):
            return resolved
    raise not_found_model(requested, list(served))


def glob_match(pattern: str, name: str) -> bool:
    """``*`` matches any run of characters, everything else itself. The literal pieces
    are found left to right, each once: no backtracking, however the pattern reads."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return pattern == name
    first, *middle, last = pieces
    if not name.startswith(first) or len(name) < len(first) + len(last):
        return False
    at = len(first)
    end = len(name) - len(last)
    for piece in middle:
        found = name.find(piece, at, end)
        if found == -1:
            return False
        at = found + len(piece)
    return name.endswith(last)


def tool_input(arguments: str, where: str | None = None) -> dict[str, Any]:
    """A call's arguments as an object ({} when none can be recovered). JSON inside a
    string escapes the body's depth limit: nested too deep, the client's own (``where``
    names the field) is refused with a 400, a model's read as no arguments."""
    try:
        args = repair_arguments(arguments, {})
        safejson.check_depth(args)
    except ToolError:
        return {}
    except (RecursionError, safejson.UnsafeJSONError):
        if where is None:
            return {}
        raise bad(where, f"{TOO_DEEP}; send the arguments as a flatter JSON object") from None
    return args


# ---------------------------------------------------------------------- answers


@dataclass(frozen=True, slots=True)
class Answerer:
    """What answers a request: the provider (its name, settings, client) and model."""

    name: str
    model: str
    config: ProviderConfig
    provider: Provider


async def answerer(deps: GatewayDeps, requested: str) -> Answerer:
    name, model = resolve_model(deps, requested)
    provider = await deps.agent.selection.provider(name)
    return Answerer(name, model, deps.config.providers[name], provider)


def has_images(messages: list[Message]) -> bool:
    return any(isinstance(b, ImageBlock) for m in messages for b in m.content)


def output_tokens(served: Answerer, requested: int | None) -> int:
    """The answer's token limit: what the client asked for, within the provider's cap."""
    cap = served.config.max_tokens or requested
    return min(requested or cap or 4096, cap or 4096)


def refuse_missing(served: Answerer, *, tools: bool, messages: list[Message], where: str) -> None:
    """Tools for a provider without tool calls, images for one that takes none: 400
    naming the provider (the OpenAI-shaped routes; ``where``: the field of the input)."""
    caps = served.provider.capabilities
    if tools and not caps.tool_call:
        raise bad("tools", f"provider {served.name} lacks the tool_call capability: send no tools")
    if not caps.attachments and has_images(messages):
        raise bad(where, f"provider {served.name} takes no images: send text only")


def refuse_unanswerable(provider_name: str, provider: Provider, chat: ChatRequest) -> None:
    """The provider's own check of the request, as a 400 naming the model."""
    try:
        provider.check(chat)
    except CapabilityError as exc:
        if exc.code == "no_top_k":
            raise bad(
                "top_k",
                f"provider {provider_name} (an OpenAI-compatible API) has no top_k: omit it",
            ) from None
        raise bad("model", f"provider {provider_name} cannot answer this request: {exc}") from None
