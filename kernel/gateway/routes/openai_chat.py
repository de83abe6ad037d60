"""``POST /v1/chat/completions``: Kernel as an OpenAI-compatible endpoint (JSON, or SSE
ending ``data: [DONE]``), answered by the same providers and model names as
``/v1/messages`` (:func:`kernel.gateway.v1.resolve_model`). The client's
tools are passed through; Kernel never runs them. What each field becomes:
:mod:`kernel.gateway.openai_format`."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from kernel.core.provider import (
    ChatRequest,
    Completion,
)
from kernel.gateway.api import Router, deps_of
from kernel.gateway.model_api import OpenAIErrors, StreamCodec, run
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
    answerer,
    bad,
    output_tokens,
    read_body,
    refuse_missing,
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
    model = served.model
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
    codec = _Codec(model, new_completion_id(), parsed.include_usage)
    return await run(request, served, chat, codec, stream=parsed.stream)


class _Codec(OpenAIErrors, StreamCodec):
    """Chat Completions' errors, completion JSON and chunks (``data: [DONE]`` last)."""

    def __init__(self, model: str, completion_id: str, include_usage: bool) -> None:
        self.model, self.completion_id, self.include_usage = model, completion_id, include_usage

    def render(self, completion: Completion) -> dict[str, Any]:
        # prompt tokens: what the provider reports (no estimate)
        return completion_json(completion, self.model, self.completion_id, 0)

    async def send(self, delta: dict[str, Any] | None, **kw: Any) -> None:
        await self.frame(chunk_json(self.completion_id, self.model, delta, **kw))

    async def head(self) -> None:
        await self.send({"role": "assistant", "content": ""})

    async def text(self, text: str) -> None:
        await self.send({"content": text})

    async def thinking(self, text: str, signature: str) -> None:
        if text:
            await self.send({"reasoning_content": text})

    async def finish(self, completion: Completion) -> None:
        calls = tool_calls_json(completion)
        if calls:
            await self.send({"tool_calls": [c | {"index": i} for i, c in enumerate(calls)]})
        await self.send({}, finish=finish_reason(completion))
        if self.include_usage:
            await self.send(None, usage=usage_json(completion, 0))

    async def fail(self, kind: str, message: str) -> None:
        await self.frame({"error": {"type": kind, "message": message}})

    async def end(self) -> None:
        await self.frame("[DONE]")
