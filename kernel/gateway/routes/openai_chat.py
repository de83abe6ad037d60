"""``POST /v1/chat/completions``: Kernel as an OpenAI-compatible endpoint (JSON, or SSE
ending ``data: [DONE]``), answered by the same providers and model names as
``/v1/messages`` (:func:`kernel.gateway.v1.resolve_model`). The client's
tools are passed through; Kernel never runs them. What each field becomes:
:mod:`kernel.gateway.openai_format`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from kernel.core.provider import (
    ChatRequest,
    Completion,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)
from kernel.gateway.api import Router, deps_of, openai_error, sse_frame
from kernel.gateway.openai_format import (
    ChatBody,
    ChatCompletionOut,
    ChatCompletionRequest,
    chunk_json,
    completion_json,
    finish_reason,
    new_completion_id,
    parse_chat_request,
    tool_calls_json,
    usage_json,
)
from kernel.gateway.v1 import (
    Answerer,
    answer,
    answerer,
    bad,
    open_stream,
    output_tokens,
    pump,
    read_body,
    refuse_missing,
    refuse_unanswerable,
)

log = logging.getLogger(__name__)

router = Router("openai", "OpenAI-compatible Chat Completions API")


def _check(served: Answerer, parsed: ChatCompletionRequest) -> None:
    refuse_missing(served, tools=bool(parsed.tools), messages=parsed.messages, where="messages")
    if parsed.thinking is not None and not served.provider.capabilities.reasoning:
        raise bad(
            "reasoning_effort",
            f"provider {served.name} has no reasoning capability: omit reasoning_effort, "
            'or declare "reasoning" in its capabilities if the model reasons',
        )


@router.post(
    "/v1/chat/completions",
    summary="OpenAI Chat Completions API, answered by Kernel's configured providers",
    body=ChatBody,
    response=ChatCompletionOut,
    sse=True,
    anthropic=True,  # English /v1 errors; in OpenAI's shape on this path (api.v1_error)
    errors=(404, 429, 502),
)
async def chat_completions(request: web.Request) -> web.StreamResponse:
    deps = deps_of(request)
    parsed = parse_chat_request(await read_body(request))
    served = await answerer(deps, parsed.model)
    provider_name, model, provider = served.name, served.model, served.provider
    _check(served, parsed)
    chat = ChatRequest(
        model,
        parsed.system,
        parsed.messages,
        parsed.tools,
        output_tokens(served, parsed.max_tokens),
        sampling=parsed.sampling,
        thinking=parsed.thinking,
        tool_choice=parsed.tool_choice,
    )
    refuse_unanswerable(provider_name, provider, chat)
    estimate = 0  # prompt tokens: what the provider reports
    completion_id = new_completion_id()

    async def streamer(
        first: StreamEvent, events: AsyncIterator[StreamEvent]
    ) -> web.StreamResponse:
        return await _stream(request, first, events, model, completion_id, parsed.include_usage)

    return await answer(
        request,
        provider_name,
        chat,
        stream=parsed.stream,
        error=openai_error,
        render=lambda completion: completion_json(completion, model, completion_id, estimate),
        streamer=streamer,
    )


async def _stream(
    request: web.Request,
    first: StreamEvent,
    events: AsyncIterator[StreamEvent],
    model: str,
    completion_id: str,
    include_usage: bool,
) -> web.StreamResponse:
    response = await open_stream(request)

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

    async def fail(error: dict[str, Any]) -> None:
        await response.write(sse_frame({"error": error}))

    if not await pump(response, first, events, handle, fail):
        return response
    with contextlib.suppress(ConnectionError):
        await response.write(sse_frame("[DONE]"))
        await response.write_eof()
    return response
