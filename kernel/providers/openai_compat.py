"""The ``openai_compat`` provider type: ``/v1/chat/completions`` through the ``openai`` SDK.

Kernel's messages are Anthropic-shaped; this module is the one place they are
converted to and from OpenAI's shape (system message, ``tool`` role messages,
``tool_calls`` with JSON-string arguments, ``image_url`` data URLs).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import openai

from kernel.config import ProviderConfig
from kernel.core.errors import CapabilityError
from kernel.core.messages import ImageBlock, Message, TextBlock, ToolResultBlock
from kernel.core.provider import (
    ChatRequest,
    Completion,
    RawToolCall,
    StopScanner,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingPart,
    ToolCallStarted,
)
from kernel.providers.sdk import SDKProvider, sent


class OpenAICompatProvider(SDKProvider):
    sdk = openai
    aiohttp = False  # its transport calls a refused connection a timeout (sdk.py)
    resources = ("chat",)

    def __init__(self, cfg: ProviderConfig) -> None:
        super().__init__(cfg, openai.AsyncOpenAI)

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        # messages and tools go in extra_body: they are plain JSON already, and the SDK's
        # type-driven transform of them costs ~16 ms per request at 50 rounds (measured,
        # bench/README.md) on the event loop. The SDK merges extra_body into the body as is.
        body: dict[str, Any] = {
            "messages": to_wire(
                request.system, request.messages, request.context, request.context_at
            )
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        params: dict[str, Any] = {
            "model": request.model,
            "messages": [],
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_body": body,
        }
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            params["max_tokens"] = max_tokens
        params.update(_options(request, reasoning=self.capabilities.reasoning))
        # Stop sequences are enforced here rather than sent as ``stop``: the API would end
        # the text without saying which one matched (and takes at most four).
        scanner = StopScanner(request.sampling.stop_sequences)
        reasoning = ThinkingPart() if request.thinking is not None else None
        text: list[str] = []
        calls: dict[int, RawToolCall] = {}
        finish = ""
        usage = [0, 0, 0]  # prompt tokens (cached included), completion tokens, cached
        reported = False
        key = self._key  # the key this attempt uses, whatever other calls do meanwhile
        try:
            stream = await sent(self._clients[key].chat.completions.create, **params)
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        reported = True
                        details = chunk.usage.prompt_tokens_details
                        cached = getattr(details, "cached_tokens", None) or 0
                        usage = [
                            chunk.usage.prompt_tokens or 0,
                            chunk.usage.completion_tokens or 0,
                            cached,
                        ]
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    delta = choice.delta
                    thought = _reasoning_text(delta) if reasoning is not None else ""
                    if thought and reasoning is not None:
                        reasoning.text += thought
                        yield ThinkingDelta(text=thought)
                    if delta.content:
                        shown = scanner.feed(delta.content)
                        if shown:
                            text.append(shown)
                            yield TextDelta(shown)
                        if scanner.matched is not None:
                            finish = "stop_sequence"
                            break  # leaving the block closes the stream: no more tokens
                    for tc in delta.tool_calls or []:
                        call = calls.get(tc.index)
                        if call is None:
                            name = tc.function.name if tc.function else ""
                            call = calls[tc.index] = RawToolCall(tc.id or "", name or "", "")
                            yield ToolCallStarted(call.id, call.name)
                        elif tc.function and tc.function.name and not call.name:
                            call.name = tc.function.name
                        if tc.function and tc.function.arguments:
                            call.arguments += tc.function.arguments
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except Exception as exc:  # SDK, transport and malformed-stream errors alike
            raise self._translate(exc, key) from None
        if not finish:
            raise self._translate(ValueError("stream ended without finish_reason"), key)
        if rest := scanner.flush():
            text.append(rest)
            yield TextDelta(rest)
        for i, call in calls.items():
            # Unique, not call_{i}: ids repeat across steps and turns otherwise.
            call.id = call.id or f"call_{i}_{uuid.uuid4().hex[:12]}"
        yield Completion(
            text="".join(text),
            tool_calls=[calls[i] for i in sorted(calls)],
            stop_reason="tool_use" if finish == "tool_calls" else finish,
            # OpenAI counts cached tokens inside prompt_tokens: split them out.
            input_tokens=max(usage[0] - usage[2], 0),
            output_tokens=usage[1],
            stop_sequence=scanner.matched,
            thinking=[reasoning] if reasoning is not None and reasoning.text else [],
            cache_read_tokens=usage[2],
            usage_reported=reported,
        )

    def check(self, request: ChatRequest) -> None:
        super().check(request)
        if request.sampling.top_k is not None:
            raise CapabilityError(
                "top_k is not part of the OpenAI chat completions API",
                provider=self.name,
                code="no_top_k",
            )


def _effort(budget_tokens: int) -> str:
    """An OpenAI ``reasoning_effort`` for an Anthropic thinking budget."""
    if budget_tokens < 4096:
        return "low"
    return "medium" if budget_tokens < 16384 else "high"


def _options(request: ChatRequest, *, reasoning: bool = True) -> dict[str, Any]:
    """Sampling options, reasoning effort (only for an endpoint declared to reason: others
    refuse the field) and tool_choice in the OpenAI form."""
    options: dict[str, Any] = {}
    if request.sampling.temperature is not None:
        options["temperature"] = request.sampling.temperature
    if request.sampling.top_p is not None:
        options["top_p"] = request.sampling.top_p
    thinking = request.thinking
    if thinking is not None and reasoning:
        effort = thinking.effort or (
            _effort(thinking.budget_tokens) if thinking.mode == "enabled" else ""
        )
        if effort:
            options["reasoning_effort"] = effort
    choice = request.tool_choice
    if choice is not None and request.tools:
        kind = choice.get("type")
        if kind == "any":
            options["tool_choice"] = "required"
        elif kind == "tool":
            options["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
        elif kind in ("auto", "none"):
            options["tool_choice"] = kind
        if choice.get("disable_parallel_tool_use"):
            options["parallel_tool_calls"] = False
    return options


def _reasoning_text(delta: Any) -> str:
    """The reasoning some OpenAI-compatible servers stream beside the content
    (``reasoning_content``: DeepSeek, vLLM; ``reasoning``: OpenRouter)."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def to_wire(
    system: str, messages: list[Message], context: str = "", context_at: int | None = None
) -> list[dict[str, Any]]:
    """The OpenAI messages; ``context`` is appended to the user message at index
    ``context_at`` (after its own words: what precedes it stays a cacheable prefix)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for index, message in enumerate(messages):
        if message.role == "assistant":
            out.append(_assistant(message))
            continue
        # Tool results become ``tool`` messages, which must directly follow the call.
        for result in message.tool_results:
            content = f"[error] {result.content}" if result.is_error else result.content
            out.append({"role": "tool", "tool_call_id": result.tool_use_id, "content": content})
        parts = [
            part
            for b in message.content
            if not isinstance(b, ToolResultBlock) and (part := _user_part(b)) is not None
        ]
        if context and index == context_at:
            parts.append({"type": "text", "text": context})
        if not parts:
            continue
        if all(p["type"] == "text" for p in parts):
            out.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def _user_part(block: Any) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ImageBlock):
        url = f"data:{block.media_type};base64,{block.data}"
        return {"type": "image_url", "image_url": {"url": url}}
    return None


def _assistant(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_uses:
        wire["tool_calls"] = [
            {
                "id": u.id,
                "type": "function",
                "function": {"name": u.name, "arguments": json.dumps(u.input, ensure_ascii=False)},
            }
            for u in message.tool_uses
        ]
    elif wire["content"] is None:
        wire["content"] = ""
    return wire
