"""The ``claude`` provider type: Anthropic Messages API through the ``anthropic`` SDK.

Every request carries prompt-cache breakpoints (``cache_control``, :func:`_mark_cache`):
on the system prompt (the stable prefix: tools, then system), on the turn's own words
(the conversation so far, found again by the next turn's lookback) and on the last block
of a tool-loop step; never on the volatile context block, never more than the API's 4.

Thinking (:func:`_think`), when the provider declares reasoning: a level is adaptive
thinking with ``output_config.effort``, a budget is ``enabled`` thinking with
``max_tokens`` kept above it. Thinking blocks handed back (``history_thinking``) open
their assistant message, unchanged, as a tool loop under thinking requires.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anthropic

from kernel.config import ProviderConfig
from kernel.core.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from kernel.core.provider import (
    DEFAULT_MAX_TOKENS,
    ChatRequest,
    Completion,
    RawToolCall,
    StreamEvent,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ThinkingPart,
    ToolCallStarted,
    UsageSeen,
    output_ceiling,
    thinking_budget,
)
from kernel.core.usage import Usage
from kernel.providers.sdk import SDKProvider, sent


class ClaudeProvider(SDKProvider):
    sdk = anthropic
    resources = ("messages",)
    reports_usage_early = True  # message_start's usage, as UsageSeen
    # No OpenTelemetry span per call: Kernel sets up no tracer provider, so the SDK's
    # spans were non-recording and sent no trace context, yet cost ~3 % of a call's CPU
    # (start_api_call_span reads the request's attributes). Copies of the client
    # (other keys, ``limit_time``) keep the option.
    client_options = {"open_telemetry": False}

    def __init__(self, cfg: ProviderConfig) -> None:
        super().__init__(cfg, anthropic.AsyncAnthropic)
        self.max_tokens = cfg.max_tokens or DEFAULT_MAX_TOKENS  # required by the Messages API

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        asked = request.thinking if self.capabilities.reasoning else None
        params = _params(request, self.max_tokens or DEFAULT_MAX_TOKENS, asked)
        text: list[str] = []
        calls: dict[int, RawToolCall] = {}
        thinking: dict[int, ThinkingPart] = {}
        stop_reason = ""
        stop_sequence: str | None = None
        usage = _Usage()
        key = self._key  # the key this attempt uses, whatever other calls do meanwhile
        try:
            stream = await sent(functools.partial(_post, self._clients[key]), **params)
            async with stream:
                async for event in stream:
                    kind = event["type"]
                    if kind == "content_block_delta":
                        delta, index = event["delta"], event["index"]
                        part = delta["type"]
                        if part == "text_delta":
                            text.append(delta["text"])
                            yield TextDelta(delta["text"])
                        elif part == "input_json_delta" and index in calls:
                            calls[index].arguments += delta["partial_json"]
                        elif part == "thinking_delta" and index in thinking:
                            thinking[index].text += delta["thinking"]
                            yield ThinkingDelta(text=delta["thinking"])
                        elif part == "signature_delta" and index in thinking:
                            thinking[index].signature += delta["signature"]
                            yield ThinkingDelta(signature=delta["signature"])
                    elif kind == "content_block_start":
                        block, index = event["content_block"], event["index"]
                        if block["type"] == "tool_use":
                            calls[index] = RawToolCall(block["id"], block["name"], "")
                            yield ToolCallStarted(block["id"], block["name"])
                        elif block["type"] == "thinking":
                            thinking[index] = ThinkingPart()
                        elif block["type"] == "redacted_thinking":
                            thinking[index] = ThinkingPart(redacted=block["data"])
                    elif kind == "message_start":
                        usage.read(event["message"]["usage"])
                        if usage.reported:  # priced if the call is cancelled before its end
                            yield UsageSeen(usage.seen())
                    elif kind == "message_delta":
                        stop_reason = event["delta"].get("stop_reason") or ""
                        stop_sequence = event["delta"].get("stop_sequence")
                        usage.read(event["usage"])
        except Exception as exc:  # SDK, transport and malformed-stream errors alike
            raise self._translate(exc, key) from None
        if stop_reason == "":
            raise self._translate(ValueError("stream ended without message_delta"), key)
        yield Completion(
            text="".join(text),
            tool_calls=[calls[i] for i in sorted(calls)],
            stop_reason=stop_reason,
            input_tokens=usage.input,
            output_tokens=usage.output,
            stop_sequence=stop_sequence,
            thinking=[thinking[i] for i in sorted(thinking)],
            cache_read_tokens=usage.cache_read,
            cache_write_tokens=usage.cache_write,
            usage_reported=usage.reported,
        )


# The stream's events as the JSON objects they arrive as: the SDK's own stream reads
# them, so ``error`` events, pings, a cut or garbled stream and closing are as before,
# without a pydantic model built per event (~11 % of a call's CPU).
_Events = anthropic.AsyncStream[object]

# The body as ``messages.create`` sends it: its keys in that method's order (then
# ``extra_body``'s), JSON as the SDK encodes it (compact, UTF-8, no NaN).
_FIELDS = (
    "max_tokens",
    "messages",
    "model",
    "cache_control",
    "container",
    "diagnostics",
    "inference_geo",
    "metadata",
    "output_config",
    "service_tier",
    "speed",
    "stop_sequences",
    "stream",
    "system",
    "thinking",
    "tool_choice",
    "tools",
)
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _body(params: dict[str, Any]) -> dict[str, Any]:
    if unknown := params.keys() - {*_FIELDS, "extra_body"}:
        raise TypeError(f"not a Messages API field: {sorted(unknown)}")  # as create() would
    body = {name: params[name] for name in _FIELDS if name in params}
    body.update(params.get("extra_body") or {})
    return body


async def _post(client: anthropic.AsyncAnthropic, **params: Any) -> anthropic.AsyncStream[Any]:
    """``client.messages.create(**params, stream=True)`` through the SDK's public
    ``client.post``, the same bytes sent: the body encoded here, once, instead of the SDK
    first deep-copying every message and tool schema (``copy_tree``) to guard against a
    caller changing them during a retry it never makes (Kernel retries itself, with a new
    body): 6.2 -> 4.4 M instructions per call of a 20-round conversation (issue 37). A
    value plain JSON cannot hold is the SDK's to convert, as before; a lone surrogate
    fails here (UnicodeEncodeError, for :func:`sent`), before anything is sent."""
    body = _body({**params, "stream": True})
    try:
        content: bytes | None = _JSON.encode(body).encode()
    except TypeError:
        content = None
    return await client.post(
        "/v1/messages",
        cast_to=object,
        body=body if content is None else None,
        content=content,
        stream=True,
        stream_cls=_Events,
    )


class _Usage:
    """The usage of a streamed message: ``message_start`` carries the input counts,
    ``message_delta`` the output (and, in current API versions, the final input counts
    again, which win)."""

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_write = 0
        self.reported = False

    def read(self, usage: dict[str, Any] | None) -> None:
        self.reported = self.reported or usage is not None
        if usage is None:
            return
        for name, field in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
        ):
            value = usage.get(field)
            if isinstance(value, int):
                setattr(self, name, value)

    def seen(self) -> Usage:
        return Usage(self.input, self.output, self.cache_read, self.cache_write)


def _params(
    request: ChatRequest, default_max_tokens: int, thinking: Thinking | None = None
) -> dict[str, Any]:
    """The Messages API request: sampling options, ``thinking`` (the request's, when the
    provider reasons) and tool_choice as given."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens or default_max_tokens,
        "messages": [
            _to_wire(m, request.history_thinking.get(i)) for i, m in enumerate(request.messages)
        ],
    }
    if request.context and request.context_at is not None:
        # After the turn's own words: what precedes it stays a cacheable prefix.
        params["messages"][request.context_at]["content"].append(
            {"type": "text", "text": request.context}
        )
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    sampling = request.sampling
    # anthropic 2.x dropped these from create()'s signature; the API still takes them.
    extra = {
        name: value
        for name in ("temperature", "top_p", "top_k")
        if (value := getattr(sampling, name)) is not None
    }
    if extra:
        params["extra_body"] = extra
    if sampling.stop_sequences:
        params["stop_sequences"] = list(sampling.stop_sequences)
    if thinking is not None:
        _think(params, thinking)
    if request.tool_choice is not None and request.tools:
        params["tool_choice"] = request.tool_choice
    _mark_cache(params, request)
    return params


def _think(params: dict[str, Any], thinking: Thinking) -> None:
    """Thinking as the Messages API takes it: a level is adaptive thinking at that
    ``output_config.effort``; a budget is at least the API's minimum, and ``max_tokens``
    stays above it (the answer keeps its own room on top of the thinking). Sampling a
    client set is sent as set: the API's refusal of it with thinking is the client's to
    read (a turn sets none)."""
    if thinking.mode == "enabled":
        params["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget(thinking)}
        params["max_tokens"] = output_ceiling(params["max_tokens"], thinking)
        return
    params["thinking"] = {"type": "adaptive"}
    if thinking.effort:
        params["output_config"] = {**params.get("output_config", {}), "effort": thinking.effort}


# Blocks that may not carry cache_control (they are cached as part of a prefix only).
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def _mark_cache(params: dict[str, Any], request: ChatRequest) -> None:
    """Up to three ``cache_control`` breakpoints (the API allows four):

    1. the stable prefix: the system prompt, sent as one text block (or the last tool
       when there is no system prompt);
    2. the conversation so far: the last block of ``messages[context_at]`` before the
       volatile context block, so the next turn reads everything up to the owner's
       previous words from the cache (its lookback finds this breakpoint);
    3. the request's very last block, when it is another block and not the context
       (a tool-loop step: the next step reads this one's prefix).
    """
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": _ephemeral()}]
    elif params.get("tools"):
        params["tools"][-1]["cache_control"] = _ephemeral()
    messages: list[dict[str, Any]] = params["messages"]
    context = None
    marked: list[dict[str, Any]] = []
    if request.context_at is not None and 0 <= request.context_at < len(messages):
        blocks = messages[request.context_at]["content"]
        if request.context:
            context, blocks = blocks[-1], blocks[:-1]
        if (conversation := _markable(blocks)) is not None:
            marked.append(conversation)
    last = _markable(messages[-1]["content"][-1:]) if messages else None
    if last is not None and last is not context and all(last is not b for b in marked):
        marked.append(last)
    for block in marked:
        block["cache_control"] = _ephemeral()


def _markable(blocks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last of ``blocks`` that may carry ``cache_control``, if any."""
    for block in reversed(blocks):
        if block.get("type") not in _UNMARKABLE and (block.get("type") != "text" or block["text"]):
            return block
    return None


def _ephemeral() -> dict[str, str]:
    return {"type": "ephemeral"}


def _safe(identifier: str) -> str:
    """Anthropic requires ``^[a-zA-Z0-9_-]+$`` for tool ids and names; history may hold
    ones another provider made (``functions.x:0``) after a /provider switch."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", identifier)[:64] or "_"


def _to_wire(message: Message, thinking: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = list(thinking or []) if message.role == "assistant" else []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                content.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
            content.append({"type": "image", "source": source})
        elif isinstance(block, ToolUseBlock):
            name, ident = _safe(block.name), _safe(block.id)
            content.append({"type": "tool_use", "id": ident, "name": name, "input": block.input})
        elif isinstance(block, ToolResultBlock):
            content.append(
                {
                    "type": "tool_result",
                    "tool_use_id": _safe(block.tool_use_id),
                    "content": block.content,
                    "is_error": block.is_error,
                }
            )
    if not content:
        content.append({"type": "text", "text": "…"})
    return {"role": message.role, "content": content}
