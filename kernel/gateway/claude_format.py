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

In content: ``cache_control`` is dropped (Kernel's providers cache on their own terms: a
``claude`` provider sets its own breakpoints on the system prompt and the last block);
``thinking``/``redacted_thinking`` blocks of assistant messages are handed back to a
Claude provider as they came (their signatures), and dropped for other providers;
images inside a ``tool_result`` travel as image blocks right after it; URL images and
documents are refused with a message; server tools (no ``input_schema``) are dropped.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError, model_validator

from kernel.core.messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kernel.core.provider import MIN_THINKING_BUDGET, Sampling, Thinking
from kernel.core.usage import estimate_request_tokens
from kernel.gateway.api import IMAGE_MEDIA_TYPES, ApiError, image_block
from kernel.gateway.schema import documented
from kernel.gateway.v1 import MODEL_NAME_MAX, V1Body, V1Error, bad, validate

log = logging.getLogger(__name__)

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})

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


def _lenient_str(value: Any) -> Any:
    return value if isinstance(value, str) else str(value)


def _object_or_empty(value: Any) -> Any:
    return value if isinstance(value, dict) else {}


# Fields Kernel reads leniently, as it always did (documented as the API types them).
LenientStr = Annotated[str, BeforeValidator(_lenient_str)]
LenientBool = Annotated[bool, BeforeValidator(lambda value: value is True)]
TruthyBool = Annotated[bool, BeforeValidator(bool)]


class TextIn(V1Body):
    type: Literal["text"]
    text: str


class ImageSourceIn(V1Body):
    type: Literal["base64"]
    media_type: Literal[IMAGE_MEDIA_TYPES]  # type: ignore[valid-type]
    data: Annotated[str, Field(min_length=1)]


class ImageIn(V1Body):
    type: Literal["image"]
    source: ImageSourceIn


class ToolUseIn(V1Body):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Annotated[dict[str, Any], BeforeValidator(_object_or_empty)] = Field(
        default_factory=dict
    )


ResultPartIn = Annotated[TextIn | ImageIn, Field(discriminator="type")]


class ToolResultIn(V1Body):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[ResultPartIn] | None = None
    is_error: TruthyBool = False


class ThinkingIn(V1Body):
    type: Literal["thinking"]
    thinking: LenientStr = ""
    signature: LenientStr = ""


class RedactedThinkingIn(V1Body):
    type: Literal["redacted_thinking"]
    data: LenientStr = ""


ContentIn = Annotated[
    TextIn | ImageIn | ToolUseIn | ToolResultIn | ThinkingIn | RedactedThinkingIn,
    Field(discriminator="type"),
]


class MessageIn(V1Body):
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentIn]


class ToolIn(V1Body):
    name: str
    description: Annotated[str, BeforeValidator(lambda v: v if isinstance(v, str) else "")] = ""
    input_schema: dict[str, Any] | None = Field(
        default=None, description="absent for a server tool (dropped: only Anthropic runs those)"
    )


class ThinkingConfigIn(V1Body):
    type: Literal["enabled", "adaptive", "disabled"]
    budget_tokens: Annotated[int, Field(ge=MIN_THINKING_BUDGET)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _budget_when_enabled(cls, data: Any) -> Any:
        # A budget is read (and checked) only when thinking is enabled.
        if isinstance(data, dict) and data.get("type") != "enabled":
            return {k: v for k, v in data.items() if k != "budget_tokens"}
        return data


class ToolChoiceIn(V1Body):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: LenientBool = False

    @model_validator(mode="before")
    @classmethod
    def _name_when_tool(cls, data: Any) -> Any:
        # A name is read only for type "tool".
        if isinstance(data, dict) and data.get("type") != "tool":
            return {k: v for k, v in data.items() if k != "name"}
        return data


class OutputConfigIn(V1Body):
    effort: str | None = Field(
        default=None, description="the reasoning effort of an adaptive thinking request"
    )


# Each part of a request is validated by the model that documents it, one part at a
# time, so that a refusal can name the part in the API's own words.
_TEXT = TypeAdapter(TextIn)
_MESSAGE = TypeAdapter(MessageIn)
_TOOL = TypeAdapter(ToolIn)
_THINKING = TypeAdapter(ThinkingConfigIn)
_TOOL_CHOICE = TypeAdapter(ToolChoiceIn)
_BUDGET = f"must be an integer ≥ {MIN_THINKING_BUDGET}"
_CHOICE_NAME = "Field required when type is 'tool'"

Probability = Annotated[float, Field(ge=0, le=1)]


class MessagesBody(V1Body):
    """A Messages API request. Its scalars are checked here; its content (messages,
    system, tools, thinking, tool_choice) by the very models that describe it here, one
    part at a time as it is converted, so a refusal names the part in the API's words."""

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
    body = validate(CountBody if count_only else MessagesBody, data, "messages")
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
            try:
                texts.append(_TEXT.validate_python(block).text)
            except ValidationError:
                raise bad(
                    f"system.{i}", 'must be a text block ({"type": "text", "text": …})'
                ) from None
        return "\n\n".join(texts)
    raise bad("system", "must be a string or an array of text blocks")


def _system_message(content: Any, where: str) -> str:
    """The text of a ``role: "system"`` message (a string or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, block in enumerate(content):
            try:
                texts.append(_TEXT.validate_python(block).text)
            except ValidationError:
                raise bad(
                    f"{where}.content.{j}", "a system message holds text blocks only"
                ) from None
        return "\n\n".join(texts)
    raise bad(f"{where}.content", "must be a string or an array of text blocks")


def _thinking(value: Any, output_config: Any) -> Thinking | None:
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if isinstance(output_config, dict) and output_config.get("format") is not None:
        raise bad("output_config.format", "structured outputs are not supported by Kernel")
    effort = effort if isinstance(effort, str) else ""
    if value is None:
        return None
    try:
        config = _THINKING.validate_python(value)
    except ValidationError as exc:
        if _problem(exc, value)[0] == ["budget_tokens"]:
            raise bad("thinking.budget_tokens", _BUDGET) from None
        raise bad("thinking.type", "must be one of 'enabled', 'adaptive', 'disabled'") from None
    if config.type == "disabled":
        return None
    if config.type == "adaptive":
        return Thinking("adaptive", effort=effort)
    if config.budget_tokens is None:
        raise bad("thinking.budget_tokens", _BUDGET)
    return Thinking("enabled", budget_tokens=config.budget_tokens, effort=effort)


def _tool_choice(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        choice = _TOOL_CHOICE.validate_python(value)
    except ValidationError as exc:
        if _problem(exc, value)[0] == ["name"]:
            raise bad("tool_choice.name", _CHOICE_NAME) from None
        raise bad("tool_choice.type", "must be one of 'auto', 'any', 'tool', 'none'") from None
    if choice.type == "tool" and choice.name is None:
        raise bad("tool_choice.name", _CHOICE_NAME)
    return choice.model_dump(exclude_defaults=True)


def _tools(value: Any) -> list[ToolSpec]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad("tools", "must be an array")
    specs = []
    for i, raw in enumerate(value):
        where = f"tools.{i}"
        try:
            tool = _TOOL.validate_python(raw)
        except ValidationError as exc:
            if _problem(exc, raw)[0] == ["input_schema"]:
                raise bad(f"{where}.input_schema", "must be an object (a JSON schema)") from None
            raise bad(where, "must be a tool object with a name") from None
        if tool.input_schema is None:
            continue  # a server tool (web search…): only Anthropic itself runs those
        specs.append(ToolSpec(tool.name, tool.description, tool.input_schema))
    return specs


def _kind(raw: Any) -> str | None:
    kind = raw.get("type") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) else None


def _problem(exc: ValidationError, raw: Any) -> tuple[list[str | int], str]:
    """(path, error type) of the first problem in ``raw``'s own terms: pydantic's union
    labels and discriminator tags are left out, and an error of a union's member that
    does not fit the input (the string member when an array came) is passed over."""
    errors = exc.errors(include_url=False)
    found = [_walk(raw, error["loc"]) for error in errors]
    for (path, fits), error in zip(found, errors, strict=True):
        if fits:
            return path, error["type"]
    # No member fits: the problem is where the deepest of them stopped.
    deepest = max(range(len(found)), key=lambda i: len(found[i][0]))
    return found[deepest][0], errors[deepest]["type"]


def _walk(raw: Any, loc: tuple[str | int, ...]) -> tuple[list[str | int], bool]:
    path: list[str | int] = []
    node, after_index = raw, False
    for part in loc:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
            path.append(part)
            after_index = True
            continue
        if part == "str" or part.startswith("list["):
            if not isinstance(node, str if part == "str" else list):
                return path, False
            continue
        if after_index and _kind(node) == part:
            after_index = False  # a discriminated union's tag
            continue
        after_index = False
        node = node.get(part) if isinstance(node, dict) else None
        path.append(part)
    return path, True


def _message(value: Any, where: str) -> tuple[Message, list[dict[str, Any]]]:
    """The message and, for an assistant message, its thinking blocks as sent."""
    if not isinstance(value, dict) or value.get("role") not in ("user", "assistant"):
        raise bad(f"{where}.role", "must be 'user', 'assistant' or 'system'")
    try:
        message = _MESSAGE.validate_python(value)
    except ValidationError as exc:
        raise _message_problem(exc, value, where) from None
    role = message.role
    assert role != "system"
    if isinstance(message.content, str):
        return Message(role, [TextBlock(message.content)]), []
    blocks: list[Block] = []
    trailing_images: list[Block] = []
    thinking: list[dict[str, Any]] = []
    for j, block in enumerate(message.content):
        at = f"{where}.content.{j}"
        if isinstance(block, TextIn):
            blocks.append(TextBlock(block.text))
        elif isinstance(block, ImageIn):
            blocks.append(_image(block, at))
        elif isinstance(block, ToolUseIn):
            blocks.append(ToolUseBlock(block.id, block.name, block.input))
        elif isinstance(block, ToolResultIn):
            text, images = _tool_result_content(block.content, at)
            blocks.append(ToolResultBlock(block.tool_use_id, text, block.is_error))
            trailing_images.extend(images)
        elif role == "assistant":
            # Handed back as the API takes it: its own fields only.
            thinking.append(block.model_dump())
    return Message(role, [*blocks, *trailing_images]), thinking


def _message_problem(exc: ValidationError, value: dict[str, Any], where: str) -> V1Error:
    """A message's first problem in the API's words (as Kernel always worded them)."""
    path, _ = _problem(exc, value)
    if len(path) < 2 or path[0] != "content":
        return bad(f"{where}.content", "must be a string or an array of content blocks")
    j = path[1]
    at = f"{where}.content.{j}"
    raw = value["content"][j]
    rest = path[2:]
    kind = _kind(raw)
    if kind == "image" and rest[:1] == ["source"]:
        return _image_problem(rest[1:], at)
    if kind == "tool_result" and rest[:1] == ["content"]:
        if len(rest) == 1:
            return bad(f"{at}.content", "must be a string or an array of content blocks")
        inner = f"{at}.content.{rest[1]}"
        if _kind(raw["content"][rest[1]]) == "image" and rest[2:3] == ["source"]:
            return _image_problem(rest[3:], inner)
        return bad(
            inner,
            f"content block type {_kind(raw['content'][rest[1]])!r} is not supported in a "
            "tool_result (text and image are)",
        )
    return bad(
        at,
        f"content block type {kind!r} is not supported here "
        "(text, image, tool_use, tool_result, thinking are)",
    )


def _image_problem(path: list[str | int], at: str) -> V1Error:
    if path[:1] == ["media_type"]:
        return bad(f"{at}.source.media_type", f"must be one of {', '.join(IMAGE_MEDIA_TYPES)}")
    if path[:1] == ["data"]:
        return bad(f"{at}.source.data", "must be non-empty base64")
    return bad(f"{at}.source", "images must be base64 (source.type 'base64'), not URLs")


def _image(block: ImageIn, at: str) -> ImageBlock:
    try:
        return image_block(block.source.media_type, block.source.data, at)
    except ApiError:
        raise bad(f"{at}.source.data", "is not valid base64") from None


def _tool_result_content(
    value: str | list[TextIn | ImageIn] | None, at: str
) -> tuple[str, list[Block]]:
    if value is None:
        return "", []
    if isinstance(value, str):
        return value, []
    texts: list[str] = []
    images: list[Block] = []
    for k, part in enumerate(value):
        if isinstance(part, TextIn):
            texts.append(part.text)
        else:
            images.append(_image(part, f"{at}.content.{k}"))
            texts.append("[image: attached after the tool results]")
    return "\n".join(texts), images


def estimate_tokens(request: MessagesRequest) -> int:
    """A local estimate (Kernel's one rule: :func:`kernel.core.usage.estimate_tokens`)."""
    return estimate_request_tokens(request.system, request.messages, request.tools)
