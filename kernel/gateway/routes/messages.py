"""The Claude-compatible API: ``/v1/messages``, ``/v1/messages/count_tokens`` and
``/v1/models``: Kernel as the endpoint of the official SDK and of Claude Code (via
``ANTHROPIC_BASE_URL``), unchanged and with its default settings.

The request's ``model`` is a configured model or alias of an enabled provider (the
active provider first), else the first ``[gateway.model_aliases]`` pattern it matches
(by default every ``claude-*`` name is answered by the active model), else refused with
404 listing what is served. The answer comes from that provider through Kernel's
neutral interface, whatever its type. The client's tools are passed through: the model
may call them, Kernel never runs them. Errors are the API's own, in English, with a
``request-id`` header. What each request field becomes: :mod:`kernel.gateway.claude_format`.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from aiohttp import web

from kernel.core.provider import (
    ChatRequest,
    Completion,
    Provider,
)
from kernel.gateway.api import (
    Router,
    anthropic_error,
    bounded,
    deps_of,
    json_response,
    path_param,
    query_param,
)
from kernel.gateway.claude_format import (
    CountBody,
    MessagesBody,
    MessagesRequest,
    estimate_tokens,
    parse_request,
)
from kernel.gateway.claude_reply import (
    MessageOut,
    ModelInfo,
    ModelList,
    TokenCount,
    end_events,
    message_json,
    new_message_id,
    start_event,
    thinking_json,
    tool_block_events,
)
from kernel.gateway.model_api import StreamCodec, run
from kernel.gateway.v1 import (
    answerer,
    bad,
    has_images,
    not_found_model,
    read_body,
    resolve_model,
    served_models,
)

log = logging.getLogger(__name__)

router = Router("messages", "Claude-compatible Messages API")


def _check(provider: Provider, name: str, parsed: MessagesRequest) -> None:
    """Refuse by name what the provider cannot do (400), before anything is sent."""
    caps = provider.capabilities
    if parsed.tools and not caps.tool_call:
        raise bad(
            "tools",
            f"provider {name} lacks the tool_call capability: use a model "
            "that supports tool calls, or send no tools",
        )
    if not caps.attachments and has_images(parsed.messages):
        raise bad(
            "messages",
            f"provider {name} takes no images (its capabilities lack "
            "attachments): send text only, or use a model that reads images",
        )
    if parsed.thinking is not None and parsed.thinking.mode == "enabled" and not caps.reasoning:
        raise bad(
            "thinking",
            f"provider {name} has no reasoning capability, so thinking "
            "cannot be enabled: omit thinking (or use type 'adaptive' or 'disabled'), "
            'or declare "reasoning" in its capabilities if the model reasons',
        )


def _chat_request(
    parsed: MessagesRequest, model: str, max_tokens: int, provider: Provider
) -> ChatRequest:
    thinking = parsed.thinking
    if thinking is not None and not provider.capabilities.reasoning:
        thinking = None  # adaptive: the model may answer without thinking, and this one does
    if thinking is not None and thinking.mode == "enabled":
        if thinking.budget_tokens >= parsed.max_tokens:
            raise bad("thinking.budget_tokens", "must be less than max_tokens")
        if thinking.budget_tokens >= max_tokens:  # the provider's cap on max_tokens
            thinking = replace(thinking, budget_tokens=max_tokens - 1)
    return ChatRequest(
        model,
        parsed.system,
        parsed.messages,
        parsed.tools,
        max_tokens,
        sampling=parsed.sampling,
        thinking=thinking,
        tool_choice=parsed.tool_choice,
        history_thinking=parsed.history_thinking,
    )


@router.post(
    "/v1/messages",
    summary="Anthropic Messages API, answered by Kernel's configured providers",
    body=MessagesBody,
    response=MessageOut,
    sse=True,
    anthropic=True,
    errors=(404, 429, 502),
)
async def messages(request: web.Request) -> web.StreamResponse:
    deps = deps_of(request)
    parsed = parse_request(await read_body(request))
    served = await answerer(deps, parsed.model)
    provider_name, model, provider = served.name, served.model, served.provider
    _check(provider, provider_name, parsed)
    max_tokens = min(parsed.max_tokens, served.config.max_tokens or parsed.max_tokens)
    chat = _chat_request(parsed, model, max_tokens, provider)
    codec = _Codec(model, new_message_id(), estimate_tokens(parsed))
    return await run(request, served, chat, codec, stream=parsed.stream)


class _Blocks:
    """The content blocks of a streamed answer, opened and closed as deltas of another
    kind arrive (thinking, then text, then tool calls; thinking may come again)."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.index = 0
        self.open: str | None = None

    async def enter(self, kind: str) -> None:
        if self.open == kind:
            return
        await self.close()
        block: dict[str, Any] = (
            {"type": "text", "text": ""}
            if kind == "text"
            else {"type": "thinking", "thinking": "", "signature": ""}
        )
        await self.send(
            {"type": "content_block_start", "index": self.index, "content_block": block}
        )
        self.open = kind

    async def delta(self, delta: dict[str, Any]) -> None:
        await self.send({"type": "content_block_delta", "index": self.index, "delta": delta})

    async def close(self) -> None:
        if self.open is not None:
            await self.send({"type": "content_block_stop", "index": self.index})
            self.index += 1
            self.open = None

    async def whole(self, frames: list[dict[str, Any]]) -> None:
        await self.close()
        for frame in frames:
            await self.send(frame)
        self.index += 1


class _Codec(StreamCodec):
    """The Messages API's errors, message JSON and stream (content blocks opened and
    closed as deltas of another kind arrive)."""

    def __init__(self, model: str, message_id: str, estimate: int) -> None:
        self.model, self.message_id, self.estimate = model, message_id, estimate
        self.blocks = _Blocks(self.send)

    def error(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        code: str | None = None,  # the shape has no place for it (402 says billing_error)
    ) -> web.Response:
        return anthropic_error(status, message, headers)

    def render(self, completion: Completion) -> dict[str, Any]:
        return message_json(completion, self.model, self.message_id, self.estimate)

    async def send(self, data: dict[str, Any]) -> None:
        await self.frame(data, data["type"])

    async def head(self) -> None:
        await self.send(start_event(self.model, self.message_id, self.estimate))
        await self.send({"type": "ping"})

    async def text(self, text: str) -> None:
        await self.blocks.enter("text")
        await self.blocks.delta({"type": "text_delta", "text": text})

    async def thinking(self, text: str, signature: str) -> None:
        await self.blocks.enter("thinking")
        if text:
            await self.blocks.delta({"type": "thinking_delta", "thinking": text})
        if signature:
            await self.blocks.delta({"type": "signature_delta", "signature": signature})

    async def finish(self, completion: Completion) -> None:
        blocks = self.blocks
        await blocks.close()
        for part in completion.thinking:
            if part.redacted:  # opaque: it came whole, it goes whole
                block = thinking_json(part)
                start = {"type": "content_block_start", "index": blocks.index}
                stop = {"type": "content_block_stop", "index": blocks.index}
                await blocks.whole([start | {"content_block": block}, stop])
        for call in completion.tool_calls:
            await blocks.whole(tool_block_events(blocks.index, call.id, call.name, call.arguments))
        for frame in end_events(completion, self.estimate):
            await self.send(frame)

    async def fail(self, kind: str, message: str) -> None:
        await self.send({"type": "error", "error": {"type": kind, "message": message}})


@router.post(
    "/v1/messages/count_tokens",
    summary="Estimate the input tokens of a Messages request",
    body=CountBody,
    response=TokenCount,
    anthropic=True,
)
async def count_tokens(request: web.Request) -> web.Response:
    parsed = parse_request(await read_body(request), count_only=True)
    return json_response({"input_tokens": estimate_tokens(parsed)})


# ---------------------------------------------------------------------- models

# Kernel does not know when a provider's model was released: the epoch says "unknown".
CREATED_AT = "1970-01-01T00:00:00Z"


def _model_info(model_id: str, provider: str, model: str) -> dict[str, Any]:
    shown = model_id if model_id == model else f"{model_id} → {model}"
    return {
        "type": "model",
        "id": model_id,
        "display_name": f"{shown} ({provider})",
        "created_at": CREATED_AT,
        # The OpenAI SDK's fields too: each SDK reads its own, so one shape serves both.
        "object": "model",
        "created": 0,
        "owned_by": provider,
    }


def _page_bound(request: web.Request) -> int:
    # The anthropic SDK pages (20 a page by default); the OpenAI SDK does not page at all.
    default = "20" if "anthropic-version" in request.headers else "1000"
    raw = request.query.get("limit", default)
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= 1000:
        raise bad("limit", "must be an integer from 1 to 1000")
    return limit


@router.get(
    "/v1/models",
    summary="The models Kernel serves on /v1/messages, /v1/chat/completions and /v1/responses "
    "(Anthropic's list shape, with OpenAI's fields too)",
    response=ModelList,
    params=(
        query_param("limit", bounded(1, 1000), "page size"),
        query_param("after_id", str, "the page after this id"),
        query_param("before_id", str, "the page before this id"),
    ),
    errors=(404,),  # an after_id / before_id that is no served model
    anthropic=True,
)
async def list_models(request: web.Request) -> web.Response:
    """Each enabled provider's models and aliases (the active provider first), and the
    plain names of ``[gateway.model_aliases]``; its patterns are listed by what they
    match when asked (GET /v1/models/{model_id})."""
    deps = deps_of(request)
    limit = _page_bound(request)
    entries = [_model_info(i, p, m) for i, (p, m) in served_models(deps).items()]
    ids = [e["id"] for e in entries]
    # An empty id is no id (as a client that always sends both parameters means it).
    after = request.query.get("after_id") or None
    before = request.query.get("before_id") or None
    start, end = 0, len(entries)
    if after is not None:
        if after not in ids:
            raise not_found_model(after, ids)
        start = ids.index(after) + 1
    if before is not None:
        if before not in ids:
            raise not_found_model(before, ids)
        end = ids.index(before)
    if before is not None and after is None:
        start = max(start, end - limit)
    page = entries[start:end][:limit]
    has_more = (start + len(page) < end) if before is None else start > 0
    return json_response(
        {
            "object": "list",
            "data": page,
            "has_more": has_more,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        }
    )


@router.get(
    "/v1/models/{model_id}",
    summary="One model name Kernel serves, and what answers it",
    response=ModelInfo,
    params=(
        path_param("model_id", "a model id, alias, or a name a model_aliases pattern matches"),
    ),
    errors=(404,),
    anthropic=True,
)
async def get_model(request: web.Request) -> web.Response:
    deps = deps_of(request)
    model_id = request.match_info["model_id"]
    if len(model_id) > 256:
        raise bad("model_id", "at most 256 characters")
    provider, model = resolve_model(deps, model_id)
    return json_response(_model_info(model_id, provider, model))
