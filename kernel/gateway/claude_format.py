"""Anthropic Messages API JSON ↔ Kernel's neutral messages, for ``/v1/messages``.

Plain JSON on both sides (no SDK): a request becomes a :class:`ChatRequest` any provider
type can answer; a :class:`Completion` (or a stream of deltas) becomes the Messages
API's response shape or its SSE events. Errors here are the API's own, in English
(:class:`V1Error`), never the catalogue's: clients of this API parse them.

What the request may hold, field by field:

- ``model``, ``max_tokens``, ``messages``, ``system`` (string or text blocks), ``tools``,
  ``stream``: used. ``role: "system"`` messages inside ``messages`` (sent by Claude Code
  2.1.x) are appended to the system prompt in their order.
- ``temperature``, ``top_p``, ``top_k``, ``stop_sequences``, ``tool_choice``: passed to
  the provider (an OpenAI-compatible one has no ``top_k``: refused; its stop sequences
  are enforced by Kernel, which then knows which one matched).
- ``thinking``: ``enabled`` (a budget) needs a provider with the ``reasoning``
  capability, else 400 naming it; ``adaptive`` leaves the choice to the model, so a
  provider without reasoning answers without thinking; ``disabled`` is no thinking.
  ``output_config.effort`` is the effort for an adaptive request.
- Accepted and ignored (:data:`IGNORED_FIELDS`, each with why it is safe); refused
  (:data:`REFUSED_FIELDS`: server-side features Kernel cannot provide). Other unknown
  top-level fields are ignored as the API ignores fields of betas it does not use; their
  names are logged at DEBUG.

In content: ``cache_control`` is ignored (Kernel's providers cache on their own terms);
``thinking``/``redacted_thinking`` blocks of assistant messages are handed back to a
Claude provider as they came (their signatures), and dropped for other providers;
images inside a ``tool_result`` travel as image blocks right after it; URL images and
documents are refused with a message; server tools (no ``input_schema``) are dropped.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from kernel.agent.context import Layer
from kernel.core.errors import ToolError
from kernel.core.messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kernel.core.provider import Completion, Sampling, Thinking, ThinkingPart
from kernel.gateway.api import IMAGE_MEDIA_TYPES, ApiError, image_block
from kernel.tools.repair import repair_arguments

log = logging.getLogger(__name__)

IMAGE_TOKENS = 1600  # a typical image's cost; the real one depends on its size
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
MODEL_NAME_MAX = 256
MIN_THINKING_BUDGET = 1024  # the Messages API's own minimum

# Top-level fields accepted and not used, and why that is safe.
IGNORED_FIELDS: dict[str, str] = {
    "metadata": "user_id is for Anthropic's abuse tracking; Kernel neither logs nor keeps it",
    "context_management": "server-side clearing of old tool results or thinking: an "
    "optimisation of context size; Kernel sends the history as given",
    "service_tier": "Anthropic's capacity tiers: no meaning for Kernel's providers",
    "cache_control": "top-level automatic prompt caching: Kernel's providers cache on their own",
    "inference_geo": "where Anthropic runs the model: no meaning for Kernel's providers",
}
# Top-level fields whose meaning Kernel cannot provide: refused by name, not dropped.
REFUSED_FIELDS: dict[str, str] = {
    "mcp_servers": "remote MCP servers are run by Anthropic's API itself; configure them "
    "in Kernel's [mcp] section or in the client instead",
    "container": "code-execution containers exist only on Anthropic's API",
}
_KNOWN_FIELDS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "tools",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "thinking",
        "tool_choice",
        "output_config",
    }
)
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


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


@dataclass(slots=True)
class MessagesRequest:
    model: str
    max_tokens: int
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    stream: bool = False
    sampling: Sampling = field(default_factory=Sampling)
    thinking: Thinking | None = None
    tool_choice: dict[str, Any] | None = None
    history_thinking: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


def parse_request(data: Any, *, count_only: bool = False) -> MessagesRequest:
    if not isinstance(data, dict):
        raise V1Error(400, "invalid_request", "the request body must be a JSON object")
    for name, why in REFUSED_FIELDS.items():
        if data.get(name):
            raise bad(name, f"not supported by Kernel ({why})")
    _log_unknown(data)
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model", "Field required (a model name, e.g. from GET /v1/models)")
    if len(model) > MODEL_NAME_MAX:
        raise bad("model", f"at most {MODEL_NAME_MAX} characters")
    max_tokens = data.get("max_tokens", 0 if count_only else None)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise bad("max_tokens", "Field required (an integer ≥ 1)")
    if max_tokens == 0 and not count_only:
        raise bad("max_tokens", "must be an integer ≥ 1")
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad("messages", "Field required (a non-empty array of messages)")
    system = _system(data.get("system"))
    messages: list[Message] = []
    history_thinking: dict[int, list[dict[str, Any]]] = {}
    for i, raw in enumerate(raw_messages):
        where = f"messages.{i}"
        if isinstance(raw, dict) and raw.get("role") == "system":
            system = _join(system, _system_message(raw.get("content"), where))
            continue
        message, thinking = _message(raw, where)
        if thinking:
            history_thinking[len(messages)] = thinking
        messages.append(message)
    if not messages:
        raise bad("messages", "at least one user or assistant message is required")
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("stream", "must be a boolean")
    return MessagesRequest(
        model=model,
        max_tokens=max_tokens,
        system=system,
        messages=messages,
        tools=_tools(data.get("tools")),
        stream=stream,
        sampling=_sampling(data),
        thinking=_thinking(data.get("thinking"), data.get("output_config")),
        tool_choice=_tool_choice(data.get("tool_choice")),
        history_thinking=history_thinking,
    )


def _log_unknown(data: dict[str, Any]) -> None:
    if not log.isEnabledFor(logging.DEBUG):
        return
    unknown = [k for k in data if k not in _KNOWN_FIELDS and k not in IGNORED_FIELDS]
    if unknown:
        # Names only, and only name-like ones: values and odd keys are outside input.
        names = [k if _FIELD_NAME.fullmatch(k) else "<odd name>" for k in unknown[:20]]
        log.debug("/v1/messages: ignoring unknown fields %s", ", ".join(names))


def _join(first: str, second: str) -> str:
    return f"{first}\n\n{second}" if first and second else first or second


def _system(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for i, block in enumerate(value):
            if not (isinstance(block, dict) and isinstance(block.get("text"), str)):
                raise bad(f"system.{i}", 'must be a text block ({"type": "text", "text": …})')
            texts.append(block["text"])
        return "\n\n".join(texts)
    raise bad("system", "must be a string or an array of text blocks")


def _system_message(content: Any, where: str) -> str:
    """The text of a ``role: "system"`` message (a string or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, block in enumerate(content):
            if not (_kind(block) == "text" and isinstance(block.get("text"), str)):
                raise bad(f"{where}.content.{j}", "a system message holds text blocks only")
            texts.append(block["text"])
        return "\n\n".join(texts)
    raise bad(f"{where}.content", "must be a string or an array of text blocks")


def _number(data: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise bad(name, f"must be a number from {low:g} to {high:g}")
    return float(value)


def _sampling(data: dict[str, Any]) -> Sampling:
    top_k = data.get("top_k")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
        raise bad("top_k", "must be an integer ≥ 1")
    stops = data.get("stop_sequences")
    if stops is not None and not (
        isinstance(stops, list) and all(isinstance(s, str) and s for s in stops)
    ):
        raise bad("stop_sequences", "must be an array of non-empty strings")
    return Sampling(
        temperature=_number(data, "temperature", 0, 1),
        top_p=_number(data, "top_p", 0, 1),
        top_k=top_k,
        stop_sequences=list(stops or []),
    )


def _thinking(value: Any, output_config: Any) -> Thinking | None:
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if isinstance(output_config, dict) and output_config.get("format") is not None:
        raise bad("output_config.format", "structured outputs are not supported by Kernel")
    effort = effort if isinstance(effort, str) else ""
    if value is None:
        return None
    kind = _kind(value)
    if kind == "disabled":
        return None
    if kind == "adaptive":
        return Thinking("adaptive", effort=effort)
    if kind == "enabled":
        assert isinstance(value, dict)
        budget = value.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < MIN_THINKING_BUDGET:
            raise bad("thinking.budget_tokens", f"must be an integer ≥ {MIN_THINKING_BUDGET}")
        return Thinking("enabled", budget_tokens=budget, effort=effort)
    raise bad("thinking.type", "must be one of 'enabled', 'adaptive', 'disabled'")


def _tool_choice(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    kind = _kind(value)
    if kind not in ("auto", "any", "tool", "none"):
        raise bad("tool_choice.type", "must be one of 'auto', 'any', 'tool', 'none'")
    assert isinstance(value, dict)
    if kind == "tool" and not isinstance(value.get("name"), str):
        raise bad("tool_choice.name", "Field required when type is 'tool'")
    choice: dict[str, Any] = {"type": kind}
    if kind == "tool":
        choice["name"] = value["name"]
    if value.get("disable_parallel_tool_use") is True:
        choice["disable_parallel_tool_use"] = True
    return choice


def _tools(value: Any) -> list[ToolSpec]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad("tools", "must be an array")
    specs = []
    for i, tool in enumerate(value):
        where = f"tools.{i}"
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise bad(where, "must be a tool object with a name")
        schema = tool.get("input_schema")
        if schema is None:
            continue  # a server tool (web search…): only Anthropic itself runs those
        if not isinstance(schema, dict):
            raise bad(f"{where}.input_schema", "must be an object (a JSON schema)")
        description = tool.get("description")
        specs.append(
            ToolSpec(tool["name"], description if isinstance(description, str) else "", schema)
        )
    return specs


def _kind(raw: Any) -> str | None:
    kind = raw.get("type") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) else None


def _message(value: Any, where: str) -> tuple[Message, list[dict[str, Any]]]:
    """The message and, for an assistant message, its thinking blocks as sent."""
    if not isinstance(value, dict) or value.get("role") not in ("user", "assistant"):
        raise bad(f"{where}.role", "must be 'user', 'assistant' or 'system'")
    role = value["role"]
    content = value.get("content")
    if isinstance(content, str):
        return Message(role, [TextBlock(content)]), []
    if not isinstance(content, list):
        raise bad(f"{where}.content", "must be a string or an array of content blocks")
    blocks: list[Block] = []
    trailing_images: list[Block] = []
    thinking: list[dict[str, Any]] = []
    for j, raw in enumerate(content):
        at = f"{where}.content.{j}"
        kind = _kind(raw)
        if kind == "text" and isinstance(raw.get("text"), str):
            blocks.append(TextBlock(raw["text"]))
        elif kind == "image":
            blocks.append(_image(raw, at))
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
            text, images = _tool_result_content(raw.get("content"), at)
            blocks.append(ToolResultBlock(raw["tool_use_id"], text, bool(raw.get("is_error"))))
            trailing_images.extend(images)
        elif kind in THINKING_BLOCKS:
            if role == "assistant":
                thinking.append(_thinking_block(raw))
        else:
            raise bad(
                at,
                f"content block type {kind!r} is not supported here "
                "(text, image, tool_use, tool_result, thinking are)",
            )
    return Message(role, [*blocks, *trailing_images]), thinking


def _thinking_block(raw: dict[str, Any]) -> dict[str, Any]:
    """The block as the API takes it back: its own fields only."""
    if raw.get("type") == "redacted_thinking":
        return {"type": "redacted_thinking", "data": str(raw.get("data", ""))}
    return {
        "type": "thinking",
        "thinking": str(raw.get("thinking", "")),
        "signature": str(raw.get("signature", "")),
    }


def _image(raw: dict[str, Any], at: str) -> ImageBlock:
    source = raw.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        raise bad(f"{at}.source", "images must be base64 (source.type 'base64'), not URLs")
    media_type, data = source.get("media_type"), source.get("data")
    if media_type not in IMAGE_MEDIA_TYPES:
        raise bad(f"{at}.source.media_type", f"must be one of {', '.join(IMAGE_MEDIA_TYPES)}")
    if not isinstance(data, str) or not data:
        raise bad(f"{at}.source.data", "must be non-empty base64")
    try:
        return image_block(media_type, data, at)
    except ApiError:
        raise bad(f"{at}.source.data", "is not valid base64") from None


def _tool_result_content(value: Any, at: str) -> tuple[str, list[Block]]:
    if value is None:
        return "", []
    if isinstance(value, str):
        return value, []
    if not isinstance(value, list):
        raise bad(f"{at}.content", "must be a string or an array of content blocks")
    texts: list[str] = []
    images: list[Block] = []
    for k, part in enumerate(value):
        kind = _kind(part)
        inner = f"{at}.content.{k}"
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image":
            images.append(_image(part, inner))
            texts.append("[image: attached after the tool results]")
        else:
            raise bad(
                inner,
                f"content block type {kind!r} is not supported in a tool_result "
                "(text and image are)",
            )
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
    if completion.stop_sequence is not None:
        return "stop_sequence"
    return _STOP_REASONS.get(completion.stop_reason, "end_turn")


def tool_input(arguments: str) -> dict[str, Any]:
    try:
        return repair_arguments(arguments, {})
    except ToolError:
        return {}


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def thinking_json(part: ThinkingPart) -> dict[str, Any]:
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.redacted}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def usage_json(completion: Completion, input_estimate: int) -> dict[str, int]:
    """Tokens as the provider reported them; the local estimate for input it did not."""
    return {
        "input_tokens": completion.input_tokens or input_estimate,
        "output_tokens": completion.output_tokens,
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
            "delta": {
                "stop_reason": stop_reason(completion),
                "stop_sequence": completion.stop_sequence,
            },
            "usage": usage_json(completion, input_estimate),
        },
        {"type": "message_stop"},
    ]


# ---------------------------------------------------------------------- model names


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


# ---------------------------------------------------------------------- errors

_V1_MESSAGES: dict[str, str] = {
    "unauthorized": "invalid x-api-key: send Kernel's gateway.api_key as the x-api-key header "
    "(ANTHROPIC_API_KEY) or as Authorization: Bearer",
    "forbidden_origin": "requests from web pages are refused: list your page's origin in "
    "gateway.allowed_origins",
    "forbidden_host": "the Host header is not a loopback name: use 127.0.0.1 or localhost, "
    "or set gateway.api_key",
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
            "POST /v1/messages/count_tokens, POST /v1/chat/completions, GET /v1/models, "
            "GET /v1/models/{model_id})"
        )
    if exc.code == "method_not_allowed":
        allowed = ", ".join(exc.details.get("allowed") or []) or "-"
        return f"method {method} not allowed for {path[:200]}; allowed: {allowed}"
    return _V1_MESSAGES.get(exc.code, f"request failed ({exc.status})")
