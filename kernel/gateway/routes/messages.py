"""``/v1/messages`` and ``/v1/messages/count_tokens``: Kernel as a Claude-compatible
endpoint (the official SDK, Claude Code via ``ANTHROPIC_BASE_URL``).

The request's ``model`` picks a configured model or alias of an enabled provider, else
the active model; the answer comes from that provider through Kernel's neutral
interface, whatever its type. The client's tools are passed through: the model may
call them, Kernel never runs them. Errors are in the Anthropic format.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from kernel.errors import CapabilityError, ProviderError, RateLimitedError
from kernel.gateway.api import (
    ApiError,
    Router,
    anthropic_error,
    json_response,
    kernel_of,
    read_json,
    sse_frame,
)
from kernel.gateway.claude_format import (
    end_events,
    estimate_tokens,
    message_json,
    new_message_id,
    parse_request,
    start_event,
    tool_block_events,
)
from kernel.i18n import t
from kernel.providers.base import ChatRequest, Completion, StreamEvent, TextDelta

log = logging.getLogger(__name__)

router = Router("messages", "Claude-compatible Messages API")

_BLOCK: dict[str, Any] = {"type": "object", "required": ["type"]}
MESSAGES_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["model", "max_tokens", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "system": {"oneOf": [{"type": "string"}, {"type": "array", "items": _BLOCK}]},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "properties": {
                    "role": {"type": "string", "enum": ["user", "assistant"]},
                    "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": _BLOCK}]},
                },
            },
        },
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "input_schema": {"type": "object"},
                },
            },
        },
        "stream": {"type": "boolean"},
    },
}
MESSAGE_RESPONSE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "type", "role", "model", "content", "stop_reason", "usage"],
    "properties": {
        "id": {"type": "string"},
        "type": {"type": "string", "enum": ["message"]},
        "role": {"type": "string", "enum": ["assistant"]},
        "model": {"type": "string"},
        "content": {"type": "array", "items": _BLOCK},
        "stop_reason": {"type": "string"},
        "usage": {"type": "object"},
    },
}


def _failure(exc: ProviderError) -> tuple[int, str, dict[str, str]]:
    """(status, message, headers) for a provider failure, in terms the SDK acts on."""
    message = t("provider.error", detail=str(exc))
    if isinstance(exc, RateLimitedError):
        headers = {"retry-after": str(round(exc.retry_after))} if exc.retry_after else {}
        return 429, message, headers
    if isinstance(exc, CapabilityError) or exc.status in (400, 404, 413, 422):
        return 400, message, {}
    return 502, message, {}


@router.post(
    "/v1/messages",
    summary="Anthropic Messages API, answered by Kernel's configured providers",
    body=MESSAGES_BODY,
    response=MESSAGE_RESPONSE,
    sse=True,
    anthropic=True,
    errors=(429, 502),
)
async def messages(request: web.Request) -> web.StreamResponse:
    kernel = kernel_of(request)
    parsed = parse_request(await read_json(request))
    provider_name, model = kernel.agent.resolve_model(parsed.model)
    pcfg = kernel.config.providers[provider_name]
    if parsed.tools:
        provider = await kernel.agent.provider(provider_name)
        if not provider.capabilities.tool_call:
            raise ApiError(
                400, "provider_not_supported", t("gw.claude_no_tools", name=provider_name)
            )
    max_tokens = min(parsed.max_tokens, pcfg.max_tokens or parsed.max_tokens)
    chat = ChatRequest(model, parsed.system, parsed.messages, parsed.tools, max_tokens)
    estimate = estimate_tokens(parsed)
    message_id = new_message_id()
    async with contextlib.aclosing(kernel.agent.stream_request(provider_name, chat)) as events:
        try:
            # The first event decides between an HTTP error and a 200 stream.
            first = await anext(events)
        except StopAsyncIteration:
            return anthropic_error(502, t("gw.claude_no_answer", name=provider_name))
        except ProviderError as exc:
            status, message, headers = _failure(exc)
            return anthropic_error(status, message, headers)
        if not parsed.stream:
            try:
                completion = await _finish(first, events)
            except ProviderError as exc:
                status, message, headers = _failure(exc)
                return anthropic_error(status, message, headers)
            return json_response(message_json(completion, model, message_id, estimate))
        return await _stream(request, first, events, model, message_id, estimate)


async def _finish(first: StreamEvent, events: AsyncIterator[StreamEvent]) -> Completion:
    if isinstance(first, Completion):
        return first
    async for event in events:
        if isinstance(event, Completion):
            return event
    raise ProviderError("stream ended without a result", code="bad_response")


async def _stream(
    request: web.Request,
    first: StreamEvent,
    events: AsyncIterator[StreamEvent],
    model: str,
    message_id: str,
    estimate: int,
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Cache-Control": "no-cache"})
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)

    async def send(data: dict[str, Any]) -> None:
        await response.write(sse_frame(data, data["type"]))

    await send(start_event(model, message_id, estimate))
    await send({"type": "ping"})
    index = 0
    text_open = False

    async def handle(event: StreamEvent) -> None:
        nonlocal index, text_open
        if isinstance(event, TextDelta):
            if not text_open:
                block = {"type": "text", "text": ""}
                await send({"type": "content_block_start", "index": index, "content_block": block})
                text_open = True
            delta = {"type": "text_delta", "text": event.text}
            await send({"type": "content_block_delta", "index": index, "delta": delta})
        elif isinstance(event, Completion):
            if text_open:
                await send({"type": "content_block_stop", "index": index})
                index += 1
                text_open = False
            for call in event.tool_calls:
                for frame in tool_block_events(index, call.id, call.name, call.arguments):
                    await send(frame)
                index += 1
            for frame in end_events(event, estimate):
                await send(frame)

    try:
        await handle(first)
        async for event in events:
            await handle(event)
    except ProviderError as exc:
        status, message, _ = _failure(exc)
        kind = "overloaded_error" if status in (429, 502) else "api_error"
        await send({"type": "error", "error": {"type": kind, "message": message}})
    except ConnectionError:
        return response
    except Exception as exc:  # the stream has begun: end it with an error event, not a cut
        log.exception("stream failed after it began")
        message = t("gw.internal", kind=type(exc).__name__)
        with contextlib.suppress(ConnectionError):
            await send({"type": "error", "error": {"type": "api_error", "message": message}})
    await response.write_eof()
    return response


@router.post(
    "/v1/messages/count_tokens",
    summary="Estimate the input tokens of a Messages request",
    body={**MESSAGES_BODY, "required": ["model", "messages"]},
    response={
        "type": "object",
        "required": ["input_tokens"],
        "properties": {"input_tokens": {"type": "integer"}},
    },
    anthropic=True,
)
async def count_tokens(request: web.Request) -> web.Response:
    parsed = parse_request(await read_json(request), count_only=True)
    return json_response({"input_tokens": estimate_tokens(parsed)})
