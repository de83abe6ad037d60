"""The answer side of the Messages API (``/v1/messages``): a :class:`Completion` as the
API's response JSON or its SSE events, and the models that describe them in
/openapi.json. The request side is :mod:`kernel.gateway.claude_format`."""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import Field

from kernel.core.provider import Completion, ThinkingPart
from kernel.gateway.schema import OpenShape, Shape
from kernel.gateway.v1 import tool_input


class ContentOut(OpenShape):
    type: str


class UsageOut(Shape):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class MessageOut(Shape):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ContentOut]
    stop_reason: str
    stop_sequence: str | None = None
    usage: UsageOut


class TokenCount(Shape):
    input_tokens: int


class ModelInfo(Shape):
    """One served model, in Anthropic's shape with OpenAI's fields too."""

    type: Literal["model"]
    id: str
    display_name: str
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    object: Literal["model"] | None = None
    created: int | None = None
    owned_by: str | None = None


class ModelList(Shape):
    data: list[ModelInfo]
    has_more: bool
    first_id: str | None
    last_id: str | None
    object: Literal["list"] | None = None


_STOP_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "pause_turn": "pause_turn",
    "refusal": "refusal",
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}


def stop_reason(completion: Completion) -> str:
    if completion.tool_calls:
        return "tool_use"
    if completion.stop_sequence is not None:
        return "stop_sequence"
    return _STOP_REASONS.get(completion.stop_reason, "end_turn")


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def thinking_json(part: ThinkingPart) -> dict[str, Any]:
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.redacted}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def usage_json(completion: Completion, input_estimate: int) -> dict[str, int]:
    """Tokens as the provider reported them (``input_tokens`` fresh, the cache's reads
    and writes beside it); the local estimate for input when it reported none."""
    usage = completion.usage
    return {
        "input_tokens": usage.input if usage.prompt else input_estimate,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
        "output_tokens": usage.output,
    }


def message_json(
    completion: Completion, model: str, message_id: str, input_estimate: int
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [thinking_json(p) for p in completion.thinking]
    if completion.text:
        content.append({"type": "text", "text": completion.text})
    for call in completion.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": tool_input(call.arguments),
            }
        )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(completion),
        "stop_sequence": completion.stop_sequence,
        "usage": usage_json(completion, input_estimate),
    }


def start_event(model: str, message_id: str, input_estimate: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # The provider's counts come with the answer: message_delta repeats them all.
            "usage": {
                "input_tokens": input_estimate,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 0,
            },
        },
    }


def tool_block_events(index: int, call_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {
                "type": "input_json_delta",
                "partial_json": json.dumps(tool_input(arguments)),
            },
        },
        {"type": "content_block_stop", "index": index},
    ]


def end_events(completion: Completion, input_estimate: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": stop_reason(completion),
                "stop_sequence": completion.stop_sequence,
            },
            "usage": usage_json(completion, input_estimate),
        },
        {"type": "message_stop"},
    ]
