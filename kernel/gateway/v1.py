"""What the model APIs of the sidecar share (``/v1/messages``: Anthropic's shape,
``/v1/chat/completions`` and ``/v1/responses``: OpenAI's): their errors (:class:`V1Error`,
in English, never the catalogue's), the body reader, validation of a body's top-level
fields by a pydantic model (:func:`validate`), the model names served
(:func:`resolve_model`), a provider's failure in terms the SDKs act on, and the answer's
flow (:func:`answer`: first event, then JSON or a stream)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from kernel.config import ProviderConfig, model_alias_target
from kernel.core import safejson
from kernel.core.errors import (
    BudgetExceededError,
    CapabilityError,
    ProviderError,
    RateLimitedError,
    ToolError,
    http_status,
)
from kernel.core.messages import ImageBlock, Message
from kernel.core.provider import ChatRequest, Completion, Provider, StreamEvent
from kernel.gateway.api import ApiError, json_response, kernel_of, openai_error, read_json
from kernel.gateway.schema import BodyModel
from kernel.tools.repair import repair_arguments

if TYPE_CHECKING:
    from kernel.app import Kernel

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


# The words for the fields the OpenAI-shaped bodies share (/v1/chat/completions,
# /v1/responses); each adds its own.
OPENAI_PROBLEMS: dict[str, dict[str, str]] = {
    "model": {"": f"Field required (a model name of at most {MODEL_NAME_MAX} characters)"},
    "stream": {"": "must be a boolean"},
    "temperature": {"": "must be a number from 0 to 2"},
    "top_p": {"": "must be a number from 0 to 1"},
}


def validate(model: type[B], data: Any, problems: dict[str, dict[str, str]]) -> B:
    """``data`` validated by ``model``; the first problem as :func:`bad` words it:
    ``problems[field][error type]`` (``""``: any other type), else pydantic's words."""
    if not isinstance(data, dict):
        raise V1Error(400, "invalid_request", "the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = [str(part) for part in error["loc"]]
        field = loc[0] if loc else "body"
        words = problems.get(field, {})
        problem = words.get(error["type"]) or words.get("") or error["msg"]
        raise bad(field if field in problems else ".".join(loc), problem) from None


def provider_failure(exc: ProviderError) -> tuple[int, str, dict[str, str]]:
    """(status, message, headers) for a provider failure, in terms the SDK acts on."""
    message = f"the model provider failed: {exc}"
    if isinstance(exc, RateLimitedError):
        headers = {"retry-after": str(round(exc.retry_after))} if exc.retry_after else {}
        return 429, message, headers
    if isinstance(exc, CapabilityError) or exc.status in (400, 404, 413, 422):
        return 400, message, {}
    return 502, message, {}


def budget_refusal(exc: BudgetExceededError, error: ErrorShape) -> web.Response:
    """402 in the API's shape: the owner's spend limit, in English like every /v1 error.
    OpenAI's shape also names the code (``budget_exceeded``); Anthropic's says
    ``billing_error``, its own type for a 402."""
    d = exc.details
    currency = d.get("currency", "")
    message = (
        f"budget_exceeded: Kernel's {d.get('scope', '')} spend limit would be passed "
        f"(spent {d.get('spent')} {currency} of {d.get('limit')} {currency}; this request "
        f"could cost up to {d.get('worst_case')} {currency}), so it was not sent to the "
        f"model. The owner can raise {_LIMIT_KEYS.get(str(d.get('scope')), '[budget]')} or "
        "wait for the next period"
    )
    status = http_status(BudgetExceededError.CODE, 402)
    if error is openai_error:
        return openai_error(status, message, code=BudgetExceededError.CODE)
    return error(status, message)


_LIMIT_KEYS = {
    "day": "[budget] daily",
    "month": "[budget] monthly",
    "job": "the cron job's runtime.budget_daily (or [budget] cron_job_daily)",
}


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


def served_models(kernel: Kernel) -> dict[str, tuple[str, str]]:
    """Served name → (provider, model): each enabled provider's models and aliases (the
    active provider first, so it wins a name two providers share), then the aliases of
    ``[gateway.model_aliases]`` that are plain names rather than patterns."""
    enabled = kernel.config.enabled_providers
    active = kernel.agent.selection.provider_name
    served: dict[str, tuple[str, str]] = {}
    for name in [active, *(n for n in enabled if n != active)]:
        pcfg = enabled.get(name)
        if pcfg is None:
            continue
        for model in pcfg.models:
            served.setdefault(model, (name, model))
        for alias, model in pcfg.aliases.items():
            served.setdefault(alias, (name, model))
    for pattern, target in kernel.config.gateway.model_aliases.items():
        if "*" not in pattern and (resolved := _target(kernel, target)) is not None:
            served.setdefault(pattern, resolved)
    return served


def _target(kernel: Kernel, target: str) -> tuple[str, str] | None:
    """(provider, model) of an alias target, None while its provider is disabled."""
    provider, model = model_alias_target(target)
    if not provider:
        return kernel.agent.selection.provider_name, kernel.agent.selection.model
    pcfg = kernel.config.enabled_providers.get(provider)
    if pcfg is None:
        return None
    return provider, pcfg.resolve(model) or model


def resolve_model(kernel: Kernel, requested: str) -> tuple[str, str]:
    """(provider, model) answering ``requested``; 404 naming what is served if none."""
    served = served_models(kernel)
    if requested in served:
        return served[requested]
    for pattern, target in kernel.config.gateway.model_aliases.items():
        if glob_match(pattern, requested) and (resolved := _target(kernel, target)):
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


async def answerer(kernel: Kernel, requested: str) -> Answerer:
    name, model = resolve_model(kernel, requested)
    provider = await kernel.agent.selection.provider(name)
    return Answerer(name, model, kernel.config.providers[name], provider)


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


async def open_stream(request: web.Request) -> web.StreamResponse:
    """A server-sent events answer, its head sent."""
    response = web.StreamResponse(headers={"Cache-Control": "no-cache"})
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)
    return response


async def finish(first: StreamEvent, events: AsyncIterator[StreamEvent]) -> Completion:
    if isinstance(first, Completion):
        return first
    async for event in events:
        if isinstance(event, Completion):
            return event
    raise ProviderError("stream ended without a result", code="bad_response")


ErrorShape = Callable[..., web.Response]


async def answer(
    request: web.Request,
    provider_name: str,
    chat: ChatRequest,
    *,
    stream: bool,
    error: ErrorShape,
    render: Callable[[Completion], dict[str, Any]],
    streamer: Callable[[StreamEvent, AsyncIterator[StreamEvent]], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    """The provider's answer to ``chat``: its first event decides between an HTTP error
    (``error``: the API's shape) and a 200, JSON (``render``) or a stream (``streamer``)."""
    kernel = kernel_of(request)
    async with contextlib.aclosing(kernel.agent.stream_request(provider_name, chat)) as events:
        try:
            first = await anext(events)
        except StopAsyncIteration:
            return error(502, f"provider {provider_name} returned nothing: retry later")
        except ProviderError as exc:
            status, message, headers = provider_failure(exc)
            return error(status, message, headers)
        except BudgetExceededError as exc:  # refused before anything was sent
            return budget_refusal(exc, error)
        if not stream:
            try:
                completion = await finish(first, events)
            except ProviderError as exc:
                status, message, headers = provider_failure(exc)
                return error(status, message, headers)
            return json_response(render(completion))
        return await streamer(first, events)


async def pump(
    response: web.StreamResponse,
    first: StreamEvent,
    events: AsyncIterator[StreamEvent],
    handle: Callable[[StreamEvent], Awaitable[None]],
    fail: Callable[[dict[str, Any]], Awaitable[None]],
) -> bool:
    """Every event through ``handle``; a failure after the stream began ends it with an
    error (``fail`` writes ``{"type", "message"}`` in the API's shape), never a cut.
    False when the client went away."""
    try:
        await handle(first)
        async for event in events:
            await handle(event)
    except ProviderError as exc:
        status, message, _ = provider_failure(exc)
        kind = "overloaded_error" if status in (429, 502) else "api_error"
        await fail({"type": kind, "message": message})
    except ConnectionError:
        return False
    except Exception as exc:
        log.exception("stream failed after it began")
        message = f"internal error in Kernel ({type(exc).__name__}): see its log"
        with contextlib.suppress(ConnectionError):
            await fail({"type": "api_error", "message": message})
    return True


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
