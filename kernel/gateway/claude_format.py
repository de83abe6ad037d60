"""Anthropic Messages API JSON ↔ Kernel's neutral messages, for ``/v1/messages``.

Plain JSON on both sides (no SDK): a request becomes a :class:`ChatRequest` any provider
type can answer; a :class:`Completion` (or a stream of deltas) becomes the Messages
API's response shape or its SSE events.

What the neutral interface cannot carry is dropped or refused here, explicitly:
``thinking`` blocks in the history are dropped (no provider gets them back); images
inside a ``tool_result`` travel as image blocks right after it; URL images and
documents are refused with a message; server tools (no ``input_schema``) are dropped.
Sampling options (temperature, stop sequences, tool_choice…) are not passed on.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from kernel.agent.context import Layer
from kernel.agent.messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kernel.errors import ToolError
from kernel.gateway.api import image_block, invalid
from kernel.i18n import t
from kernel.providers.base import Completion
from kernel.tools.repair import repair_arguments

IMAGE_TOKENS = 1600  # a typical image's cost; the real one depends on its size
DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})


@dataclass(slots=True)
class MessagesRequest:
    model: str
    max_tokens: int
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    stream: bool = False


def parse_request(data: Any, *, count_only: bool = False) -> MessagesRequest:
    if not isinstance(data, dict):
        raise invalid(t("gw.body_not_object"))
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise invalid(t("gw.field_required", field="model"), field="model")
    max_tokens = data.get("max_tokens", 0 if count_only else None)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise invalid(t("gw.field_min", field="max_tokens", minimum=1), field="max_tokens")
    if max_tokens == 0 and not count_only:
        raise invalid(t("gw.field_min", field="max_tokens", minimum=1), field="max_tokens")
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise invalid(t("gw.field_required", field="messages"), field="messages")
    messages = [_message(m, f"messages[{i}]") for i, m in enumerate(raw_messages)]
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid(t("gw.bad_field", field="stream", expected="boolean"), field="stream")
    return MessagesRequest(
        model=model,
        max_tokens=max_tokens,
        system=_system(data.get("system")),
        messages=messages,
        tools=_tools(data.get("tools")),
        stream=stream,
    )


def _system(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for i, block in enumerate(value):
            if not (isinstance(block, dict) and isinstance(block.get("text"), str)):
                field = f"system[{i}]"
                raise invalid(t("gw.bad_field", field=field, expected="text block"), field=field)
            texts.append(block["text"])
        return "\n\n".join(texts)
    raise invalid(t("gw.bad_field", field="system", expected="string or array"), field="system")


def _tools(value: Any) -> list[ToolSpec]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(t("gw.bad_field", field="tools", expected="array"), field="tools")
    specs = []
    for i, tool in enumerate(value):
        field = f"tools[{i}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise invalid(t("gw.bad_field", field=field, expected="tool object"), field=field)
        schema = tool.get("input_schema")
        if schema is None:
            continue  # a server tool (web search…): only Anthropic itself runs those
        if not isinstance(schema, dict):
            raise invalid(t("gw.bad_field", field=f"{field}.input_schema", expected="object"))
        description = tool.get("description")
        specs.append(
            ToolSpec(tool["name"], description if isinstance(description, str) else "", schema)
        )
    return specs


def _kind(raw: Any) -> str | None:
    kind = raw.get("type") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) else None


def _message(value: Any, where: str) -> Message:
    if not isinstance(value, dict) or value.get("role") not in ("user", "assistant"):
        raise invalid(t("gw.bad_field", field=f"{where}.role", expected="user or assistant"))
    content = value.get("content")
    if isinstance(content, str):
        return Message(value["role"], [TextBlock(content)])
    if not isinstance(content, list):
        field = f"{where}.content"
        raise invalid(t("gw.bad_field", field=field, expected="string or array"), field=field)
    blocks: list[Block] = []
    trailing_images: list[Block] = []
    for j, raw in enumerate(content):
        field = f"{where}.content[{j}]"
        kind = _kind(raw)
        if kind == "text" and isinstance(raw.get("text"), str):
            blocks.append(TextBlock(raw["text"]))
        elif kind == "image":
            blocks.append(_image(raw, field))
        elif (
            kind == "tool_use"
            and isinstance(raw.get("id"), str)
            and isinstance(raw.get("name"), str)
        ):
            arguments = raw.get("input")
            blocks.append(
                ToolUseBlock(
                    raw["id"], raw["name"], arguments if isinstance(arguments, dict) else {}
                )
            )
        elif kind == "tool_result" and isinstance(raw.get("tool_use_id"), str):
            text, images = _tool_result_content(raw.get("content"), field)
            blocks.append(ToolResultBlock(raw["tool_use_id"], text, bool(raw.get("is_error"))))
            trailing_images.extend(images)
        elif kind in DROPPED_BLOCKS:
            continue
        else:
            raise invalid(t("gw.claude_block", field=field, kind=kind), field=field)
    return Message(value["role"], [*blocks, *trailing_images])


def _image(raw: dict[str, Any], field: str) -> ImageBlock:
    source = raw.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        raise invalid(t("gw.claude_image_source", field=field), field=field)
    return image_block(source.get("media_type"), source.get("data"), field)


def _tool_result_content(value: Any, field: str) -> tuple[str, list[Block]]:
    if value is None:
        return "", []
    if isinstance(value, str):
        return value, []
    if not isinstance(value, list):
        raise invalid(t("gw.bad_field", field=f"{field}.content", expected="string or array"))
    texts: list[str] = []
    images: list[Block] = []
    for k, part in enumerate(value):
        kind = _kind(part)
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image":
            images.append(_image(part, f"{field}.content[{k}]"))
            texts.append("[image: attached after the tool results]")
        else:
            inner = f"{field}.content[{k}]"
            raise invalid(t("gw.claude_block", field=inner, kind=kind), field=inner)
    return "\n".join(texts), images


def estimate_tokens(request: MessagesRequest) -> int:
    """A local estimate (Kernel's ~4-characters-a-token rule, CJK one each)."""
    parts = [request.system]
    images = 0
    for message in request.messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ImageBlock):
                images += 1
            elif isinstance(block, ToolUseBlock):
                parts.append(block.name + json.dumps(block.input, ensure_ascii=False))
            else:
                parts.append(block.content)
    for tool in request.tools:
        parts.append(tool.name + tool.description + json.dumps(tool.parameters))
    return Layer("all", "\n".join(parts)).token_estimate + images * IMAGE_TOKENS


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
    return _STOP_REASONS.get(completion.stop_reason, "end_turn")


def tool_input(arguments: str) -> dict[str, Any]:
    try:
        return repair_arguments(arguments, {})
    except ToolError:
        return {}


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def message_json(
    completion: Completion, model: str, message_id: str, input_estimate: int
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
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
        "stop_sequence": None,
        "usage": {
            "input_tokens": completion.input_tokens or input_estimate,
            "output_tokens": completion.output_tokens,
        },
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
            "usage": {"input_tokens": input_estimate, "output_tokens": 0},
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
            "delta": {"stop_reason": stop_reason(completion), "stop_sequence": None},
            "usage": {
                "input_tokens": completion.input_tokens or input_estimate,
                "output_tokens": completion.output_tokens,
            },
        },
        {"type": "message_stop"},
    ]
