"""``POST /v1/chat/completions``: Kernel as an OpenAI-compatible endpoint (JSON, or SSE
ending ``data: [DONE]``), answered by the same providers and model names as
``/v1/messages`` (:func:`kernel.gateway.routes.messages.resolve_model`). The client's
tools are passed through; Kernel never runs them. What each field becomes:
:mod:`kernel.gateway.openai_format`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from kernel.core.errors import CapabilityError, ProviderError
from kernel.core.messages import ImageBlock
from kernel.core.provider import (
    ChatRequest,
    Completion,
    Provider,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)
from kernel.gateway.api import Router, json_response, kernel_of, openai_error, sse_frame
from kernel.gateway.claude_format import bad
from kernel.gateway.openai_format import (
    ChatCompletionRequest,
    chunk_json,
    completion_json,
    finish_reason,
    new_completion_id,
    parse_chat_request,
    tool_calls_json,
    usage_json,
)
from kernel.gateway.routes.messages import provider_failure, read_body, resolve_model

log = logging.getLogger(__name__)

router = Router("openai", "OpenAI-compatible Chat Completions API")

_OBJECT: dict[str, Any] = {"type": "object"}
CHAT_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role"],
                "properties": {
                    "role": {
                        "type": "string",
                        "enum": ["system", "developer", "user", "assistant", "tool"],
                    },
                    "content": {"oneOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}]},
                    "tool_calls": {"type": "array", "items": _OBJECT},
                    "tool_call_id": {"type": "string"},
                },
            },
        },
        "tools": {"type": "array", "items": _OBJECT},
        "tool_choice": {"oneOf": [{"type": "string"}, _OBJECT]},
        "max_tokens": {"type": "integer", "minimum": 1},
        "max_completion_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "minimum": 0, "maximum": 1},
        "stop": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "reasoning_effort": {"type": "string"},
        "stream": {"type": "boolean"},
        "stream_options": _OBJECT,
    },
}
CHAT_RESPONSE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "object", "created", "model", "choices"],
    "properties": {
        "id": {"type": "string"},
        "object": {"type": "string", "enum": ["chat.completion"]},
        "created": {"type": "integer"},
        "model": {"type": "string"},
        "choices": {"type": "array", "items": _OBJECT},
        "usage": _OBJECT,
    },
}


def _check(provider: Provider, name: str, parsed: ChatCompletionRequest) -> None:
    caps = provider.capabilities
    if parsed.tools and not caps.tool_call:
        raise bad("tools", f"provider {name} lacks the tool_call capability: send no tools")
    if not caps.attachments and any(
        isinstance(b, ImageBlock) for m in parsed.messages for b in m.content
    ):
        raise bad("messages", f"provider {name} takes no images: send text only")
    if parsed.thinking is not None and not caps.reasoning:
        raise bad(
            "reasoning_effort",
            f"provider {name} has no reasoning capability: omit reasoning_effort, "
            'or declare "reasoning" in its capabilities if the model reasons',
        )


@router.post(
    "/v1/chat/completions",
    summary="OpenAI Chat Completions API, answered by Kernel's configured providers",
    body=CHAT_BODY,
    response=CHAT_RESPONSE,
    sse=True,
    anthropic=True,  # English /v1 errors; in OpenAI's shape on this path (api.v1_error)
    errors=(404, 429, 502),
)
async def chat_completions(request: web.Request) -> web.StreamResponse:
    kernel = kernel_of(request)
    parsed = parse_chat_request(await read_body(request))
    provider_name, model = resolve_model(kernel, parsed.model)
    pcfg = kernel.config.providers[provider_name]
    provider = await kernel.agent.provider(provider_name)
    _check(provider, provider_name, parsed)
    cap = pcfg.max_tokens or parsed.max_tokens
    max_tokens = min(parsed.max_tokens or cap or 4096, cap or 4096)
    chat = ChatRequest(
        model,
        parsed.system,
        parsed.messages,
        parsed.tools,
        max_tokens,
        sampling=parsed.sampling,
        thinking=parsed.thinking,
        tool_choice=parsed.tool_choice,
    )
    try:
        provider.check(chat)
    except CapabilityError as exc:
        raise bad("model", f"provider {provider_name} cannot answer this request: {exc}") from None
    estimate = 0  # prompt tokens: what the provider reports
    completion_id = new_completion_id()
    async with contextlib.aclosing(kernel.agent.stream_request(provider_name, chat)) as events:
        try:
            first = await anext(events)
        except StopAsyncIteration:
            return openai_error(502, f"provider {provider_name} returned nothing: retry later")
        except ProviderError as exc:
            status, message, headers = provider_failure(exc)
            return openai_error(status, message, headers)
        if not parsed.stream:
            try:
                completion = first if isinstance(first, Completion) else await _last(events)
            except ProviderError as exc:
                status, message, headers = provider_failure(exc)
                return openai_error(status, message, headers)
            return json_response(completion_json(completion, model, completion_id, estimate))
        return await _stream(request, first, events, model, completion_id, parsed.include_usage)


async def _last(events: AsyncIterator[StreamEvent]) -> Completion:
    async for event in events:
        if isinstance(event, Completion):
            return event
    raise ProviderError("stream ended without a result", code="bad_response")


async def _stream(
    request: web.Request,
    first: StreamEvent,
    events: AsyncIterator[StreamEvent],
    model: str,
    completion_id: str,
    include_usage: bool,
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Cache-Control": "no-cache"})
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)

    async def send(delta: dict[str, Any] | None, **kw: Any) -> None:
        await response.write(sse_frame(chunk_json(completion_id, model, delta, **kw)))

    await send({"role": "assistant", "content": ""})

    async def handle(event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            await send({"content": event.text})
        elif isinstance(event, ThinkingDelta) and event.text:
            await send({"reasoning_content": event.text})
        elif isinstance(event, Completion):
            calls = tool_calls_json(event)
            if calls:
                await send({"tool_calls": [c | {"index": i} for i, c in enumerate(calls)]})
            await send({}, finish=finish_reason(event))
            if include_usage:
                await send(None, usage=usage_json(event, 0))

    try:
        await handle(first)
        async for event in events:
            await handle(event)
    except ProviderError as exc:
        status, message, _ = provider_failure(exc)
        kind = "overloaded_error" if status in (429, 502) else "api_error"
        await response.write(sse_frame({"error": {"type": kind, "message": message}}))
    except ConnectionError:
        return response
    except Exception as exc:  # the stream has begun: end it with an error, not a cut
        log.exception("stream failed after it began")
        message = f"internal error in Kernel ({type(exc).__name__}): see its log"
        with contextlib.suppress(ConnectionError):
            await response.write(sse_frame({"error": {"type": "api_error", "message": message}}))
    with contextlib.suppress(ConnectionError):
        await response.write(sse_frame("[DONE]"))
        await response.write_eof()
    return response
