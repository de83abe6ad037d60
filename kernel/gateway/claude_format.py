"""Anthropic Messages API request JSON → Kernel's neutral messages, for ``/v1/messages``.

Plain JSON (no SDK): a request, validated by :class:`MessagesBody`, becomes a
:class:`MessagesRequest` (then a ``ChatRequest`` any provider type can answer); the
answer's side is :mod:`kernel.gateway.claude_reply`. Errors here are the API's own, in
English (:class:`~kernel.gateway.v1.V1Error`), never the catalogue's: clients of this
API parse them.

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
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from kernel.agent.context import Layer
from kernel.core.messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kernel.core.provider import Sampling, Thinking
from kernel.gateway.api import IMAGE_MEDIA_TYPES, ApiError, image_block
from kernel.gateway.schema import documented
from kernel.gateway.v1 import MODEL_NAME_MAX, V1Body, V1Error, bad, validate

log = logging.getLogger(__name__)

IMAGE_TOKENS = 1600  # a typical image's cost; the real one depends on its size
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
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


# ---------------------------------------------------------------------- the body


class TextIn(V1Body):
    type: Literal["text"]
    text: str


class ImageSourceIn(V1Body):
    type: Literal["base64"]
    media_type: Literal[IMAGE_MEDIA_TYPES]  # type: ignore[valid-type]
    data: str


class ImageIn(V1Body):
    type: Literal["image"]
    source: ImageSourceIn


class ToolUseIn(V1Body):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultIn(V1Body):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextIn | ImageIn] | None = None
    is_error: bool | None = None


class ThinkingIn(V1Body):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingIn(V1Body):
    type: Literal["redacted_thinking"]
    data: str


ContentIn = Annotated[
    TextIn | ImageIn | ToolUseIn | ToolResultIn | ThinkingIn | RedactedThinkingIn,
    Field(discriminator="type"),
]


class MessageIn(V1Body):
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentIn]


class ToolIn(V1Body):
    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = Field(
        default=None, description="absent for a server tool (dropped: only Anthropic runs those)"
    )


class ThinkingConfigIn(V1Body):
    type: Literal["enabled", "adaptive", "disabled"]
    budget_tokens: Annotated[int, Field(ge=MIN_THINKING_BUDGET)] | None = None


class ToolChoiceIn(V1Body):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class OutputConfigIn(V1Body):
    effort: str | None = Field(
        default=None, description="the reasoning effort of an adaptive thinking request"
    )


Probability = Annotated[float, Field(ge=0, le=1)]


class MessagesBody(V1Body):
    """A Messages API request. Its scalars are checked here; its content (messages,
    system, tools, thinking, tool_choice) is checked as it is converted, each part in the
    API's own words, and described here."""

    model: Annotated[str, Field(min_length=1, max_length=MODEL_NAME_MAX)]
    max_tokens: Annotated[int, Field(ge=0, json_schema_extra={"minimum": 1})]
    messages: Annotated[
        list[Any], Field(min_length=1), documented(Annotated[list[MessageIn], Field(min_length=1)])
    ]
    system: Annotated[Any, documented(str | list[TextIn])] = None
    stream: bool | None = None
    tools: Annotated[Any, documented(list[ToolIn])] = None
    temperature: Probability | None = None
    top_p: Probability | None = None
    top_k: Annotated[int, Field(ge=1)] | None = None
    stop_sequences: list[Annotated[str, Field(min_length=1)]] | None = None
    thinking: Annotated[Any, documented(ThinkingConfigIn)] = None
    tool_choice: Annotated[Any, documented(ToolChoiceIn)] = None
    metadata: Annotated[Any, documented(dict[str, Any])] = Field(
        default=None, description="accepted; not logged nor kept"
    )
    output_config: Annotated[Any, documented(OutputConfigIn)] = None


class CountBody(MessagesBody):
    """count_tokens reads the same fields; ``max_tokens`` may be left out."""

    max_tokens: Annotated[int, Field(ge=0)] = 0


_PROBLEMS: dict[str, dict[str, str]] = {
    "model": {
        "string_too_long": f"at most {MODEL_NAME_MAX} characters",
        "": "Field required (a model name, e.g. from GET /v1/models)",
    },
    "max_tokens": {"": "Field required (an integer ≥ 1)"},
    "messages": {"": "Field required (a non-empty array of messages)"},
    "stream": {"": "must be a boolean"},
    "temperature": {"": "must be a number from 0 to 1"},
    "top_p": {"": "must be a number from 0 to 1"},
    "top_k": {"": "must be an integer ≥ 1"},
    "stop_sequences": {"": "must be an array of non-empty strings"},
}


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
    body = validate(CountBody if count_only else MessagesBody, data, _PROBLEMS)
    if body.max_tokens == 0 and not count_only:
        raise bad("max_tokens", "must be an integer ≥ 1")
    system = _system(body.system)
    messages: list[Message] = []
    history_thinking: dict[int, list[dict[str, Any]]] = {}
    for i, raw in enumerate(body.messages):
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
    return MessagesRequest(
        model=body.model,
        max_tokens=body.max_tokens,
        system=system,
        messages=messages,
        tools=_tools(body.tools),
        stream=bool(body.stream),
        sampling=Sampling(
            temperature=body.temperature,
            top_p=body.top_p,
            top_k=body.top_k,
            stop_sequences=list(body.stop_sequences or []),
        ),
        thinking=_thinking(body.thinking, body.output_config),
        tool_choice=_tool_choice(body.tool_choice),
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
