"""OpenAI Chat Completions JSON ↔ Kernel's neutral messages, for ``/v1/chat/completions``
(the many tools that speak only OpenAI's API, answered by whatever provider Kernel has).

Request: ``system``/``developer`` messages become the system prompt in order; ``tool``
messages become tool results (consecutive ones in one user message); images must be
``data:`` URLs; ``stop`` becomes stop sequences; ``reasoning_effort`` asks for thinking
(refused by name when the provider has no reasoning). ``n`` other than 1, audio and
``response_format`` other than text are refused; other unknown fields are ignored.
Errors are :class:`~kernel.gateway.v1.V1Error` like the rest of ``/v1/``, answered in
OpenAI's error shape on this path.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError

from kernel.core.messages import (
    Block,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from kernel.core.provider import Completion, Sampling, Thinking
from kernel.gateway.api import IMAGE_MEDIA_TYPES, ApiError, image_block
from kernel.gateway.schema import OpenShape, Shape, documented
from kernel.gateway.v1 import (
    MODEL_NAME_MAX,
    V1Body,
    V1Error,
    bad,
    tool_input,
    validate,
)

EFFORTS = ("minimal", "low", "medium", "high")


def _str_or_empty(value: Any) -> Any:
    return value if isinstance(value, str) else ""


# ---------------------------------------------------------------------- the body


def _object_schema(value: Any) -> Any:
    return value if isinstance(value, dict) else {"type": "object"}


def _function_or_none(value: Any) -> Any:
    return value if value == "function" else None


class FunctionIn(V1Body):
    name: str
    description: Annotated[str, BeforeValidator(_str_or_empty)] = ""
    parameters: Annotated[dict[str, Any], BeforeValidator(_object_schema)] = Field(
        default_factory=lambda: {"type": "object"}
    )


class FunctionToolIn(V1Body):
    type: Literal["function"]
    function: FunctionIn


class ToolCallFunctionIn(V1Body):
    name: str
    arguments: Annotated[str, BeforeValidator(lambda v: v if isinstance(v, str) else "{}")] = "{}"


class ToolCallIn(V1Body):
    id: str
    type: Annotated[Literal["function"] | None, BeforeValidator(_function_or_none)] = None
    function: ToolCallFunctionIn


class TextPartIn(V1Body):
    type: Literal["text"]
    text: str


class ImageUrlIn(V1Body):
    url: str = Field(description="a data: URL (base64); links are refused")


class ImagePartIn(V1Body):
    type: Literal["image_url"]
    image_url: ImageUrlIn


ContentPartIn = Annotated[TextPartIn | ImagePartIn, Field(discriminator="type")]


class ChatMessageIn(V1Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPartIn] | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None


class FunctionNameIn(V1Body):
    name: str


class FunctionChoiceIn(V1Body):
    type: Literal["function"]
    function: FunctionNameIn


ToolChoiceIn = Literal["auto", "none", "required"] | FunctionChoiceIn
# Each part is validated by the model that documents it, one at a time, so that a
# refusal can name the part in the API's own words.
_TOOL = TypeAdapter(FunctionToolIn)
_TOOL_CHOICE: TypeAdapter[ToolChoiceIn] = TypeAdapter(ToolChoiceIn)
_TOOL_CALL = TypeAdapter(ToolCallIn)
_PART: TypeAdapter[TextPartIn | ImagePartIn] = TypeAdapter(ContentPartIn)


class StreamOptionsIn(V1Body):
    include_usage: bool | None = None


class ChatBody(V1Body):
    """A Chat Completions request. Its scalars are checked here; its tools, tool choice,
    tool calls and user content parts by the models that describe them here, one part at
    a time as they are converted, so a refusal names the part in the API's words."""

    model: Annotated[str, Field(min_length=1, max_length=MODEL_NAME_MAX)]
    messages: Annotated[
        list[Any],
        Field(min_length=1),
        documented(Annotated[list[ChatMessageIn], Field(min_length=1)]),
    ]
    stream: bool | None = None
    tools: Annotated[Any, documented(list[FunctionToolIn])] = None
    tool_choice: Annotated[Any, documented(ToolChoiceIn)] = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    stop: Annotated[str, Field(min_length=1)] | list[Annotated[str, Field(min_length=1)]] | None = (
        None
    )
    reasoning_effort: Annotated[Any, documented(str)] = None
    stream_options: Annotated[Any, documented(StreamOptionsIn)] = None


# ---------------------------------------------------------------------- the answer


class ChoiceOut(OpenShape):
    index: int


class ChatCompletionOut(Shape):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: OpenShape | None = None


@dataclass(slots=True)
class ChatCompletionRequest:
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None
    stream: bool = False
    include_usage: bool = False
    sampling: Sampling = field(default_factory=Sampling)
    thinking: Thinking | None = None
    tool_choice: dict[str, Any] | None = None


def parse_chat_request(data: Any) -> ChatCompletionRequest:
    if not isinstance(data, dict):
        raise V1Error(400, "invalid_request", "the request body must be a JSON object")
    if data.get("n") not in (None, 1):
        raise bad("n", "only 1 choice per request is supported")
    for name in ("audio", "prediction"):
        if data.get(name) is not None:
            raise bad(name, "not supported by Kernel")
    response_format = data.get("response_format")
    if response_format is not None and (
        not isinstance(response_format, dict) or response_format.get("type") != "text"
    ):
        raise bad("response_format", "only type 'text' is supported by Kernel")
    body = validate(ChatBody, data, "chat")
    system, messages = _messages(body.messages)
    if not messages:
        raise bad("messages", "at least one user or assistant message is required")
    options = body.stream_options
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    stop = [body.stop] if isinstance(body.stop, str) else body.stop
    return ChatCompletionRequest(
        model=body.model,
        system=system,
        messages=messages,
        tools=_tools(body.tools),
        max_tokens=body.max_completion_tokens or body.max_tokens,
        stream=bool(body.stream),
        include_usage=include_usage,
        sampling=Sampling(
            temperature=body.temperature, top_p=body.top_p, stop_sequences=list(stop or [])
        ),
        thinking=_thinking(body.reasoning_effort),
        tool_choice=_tool_choice(body.tool_choice, data.get("parallel_tool_calls")),
    )


def _thinking(effort: Any) -> Thinking | None:
    if effort is None or effort == "none":
        return None
    if effort not in EFFORTS:
        raise bad("reasoning_effort", f"must be one of {', '.join(EFFORTS)}")
    return Thinking("adaptive", effort=effort)


def _tool_choice(value: Any, parallel: Any) -> dict[str, Any] | None:
    choice: dict[str, Any] | None = None
    if value is not None:
        try:
            given = _TOOL_CHOICE.validate_python(value)
        except ValidationError:
            raise bad(
                "tool_choice", "must be 'auto', 'none', 'required' or a function choice"
            ) from None
        if isinstance(given, FunctionChoiceIn):
            choice = {"type": "tool", "name": given.function.name}
        else:
            choice = {"type": "any" if given == "required" else given}
    if parallel is False:
        choice = (choice or {"type": "auto"}) | {"disable_parallel_tool_use": True}
    return choice


def _tools(value: Any) -> list[ToolSpec]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad("tools", "must be an array")
    specs = []
    for i, raw in enumerate(value):
        try:
            function = _TOOL.validate_python(raw).function
        except ValidationError:
            raise bad(
                f"tools.{i}", "must be {'type': 'function', 'function': {'name': …}}"
            ) from None
        specs.append(ToolSpec(function.name, function.description, function.parameters))
    return specs


def _messages(raw: list[Any]) -> tuple[str, list[Message]]:
    system: list[str] = []
    messages: list[Message] = []
    for i, item in enumerate(raw):
        where = f"messages.{i}"
        role = item.get("role") if isinstance(item, dict) else None
        if not isinstance(item, dict) or role not in (
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
        ):
            raise bad(f"{where}.role", "must be system, developer, user, assistant or tool")
        content = item.get("content")
        if role in ("system", "developer"):
            system.append(_text(content, where))
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str):
                raise bad(f"{where}.tool_call_id", "Field required")
            result = ToolResultBlock(call_id, _text(content, where))
            last = messages[-1] if messages else None
            if last is not None and last.role == "user" and last.tool_results:
                last.content.append(result)
            else:
                messages.append(Message("user", [result]))
        elif role == "assistant":
            messages.append(_assistant(item, where))
        else:
            messages.append(Message("user", _user_content(content, where)))
    return "\n\n".join(s for s in system if s), messages


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise bad(f"{where}.content.{j}", "only text parts are allowed here")
            texts.append(str(part.get("text", "")))
        return "\n".join(texts)
    raise bad(f"{where}.content", "must be a string or an array of parts")


def _user_content(content: Any, where: str) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list):
        raise bad(f"{where}.content", "must be a string or an array of parts")
    blocks: list[Block] = []
    for j, raw in enumerate(content):
        at = f"{where}.content.{j}"
        try:
            part = _PART.validate_python(raw)
        except ValidationError:
            kind = raw.get("type") if isinstance(raw, dict) else None
            if kind == "image_url":
                raise bad(f"{at}.image_url.url", _NOT_DATA_URL) from None
            raise bad(at, f"part type {kind!r} is not supported (text and image_url are)") from None
        if isinstance(part, TextPartIn):
            blocks.append(TextBlock(part.text))
        else:
            blocks.append(image_from_url(part.image_url.url, f"{at}.image_url.url"))
    return blocks


_NOT_DATA_URL = "images must be data: URLs (base64), not links"


def image_from_url(url: str, where: str) -> Block:
    """The image of a ``data:`` URL (OpenAI's APIs' one way to send an image inline);
    ``where``: the field named by a refusal."""
    head, _, data = url.partition(",")
    media_type = head.removeprefix("data:").removesuffix(";base64")
    if not head.startswith("data:") or not head.endswith(";base64"):
        raise bad(where, _NOT_DATA_URL)
    if media_type not in IMAGE_MEDIA_TYPES:
        raise bad(where, f"must be one of {', '.join(IMAGE_MEDIA_TYPES)}")
    try:
        return image_block(media_type, data, where)
    except ApiError:
        raise bad(where, "is not valid base64") from None


def _assistant(item: dict[str, Any], where: str) -> Message:
    blocks: list[Block] = []
    text = _text(item.get("content"), where)
    if text:
        blocks.append(TextBlock(text))
    calls = item.get("tool_calls") or []
    if not isinstance(calls, list):
        raise bad(f"{where}.tool_calls", "must be an array")
    for k, raw in enumerate(calls):
        try:
            call = _TOOL_CALL.validate_python(raw)
        except ValidationError:
            raise bad(f"{where}.tool_calls.{k}", "must have an id and a function name") from None
        arguments = tool_input(
            call.function.arguments, f"{where}.tool_calls.{k}.function.arguments"
        )
        blocks.append(ToolUseBlock(call.id, call.function.name, arguments))
    return Message("assistant", blocks)


# ---------------------------------------------------------------------- responses


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def finish_reason(completion: Completion) -> str:
    if completion.tool_calls:
        return "tool_calls"
    if completion.stop_reason in ("max_tokens", "length"):
        return "length"
    if completion.stop_reason in ("refusal", "content_filter"):
        return "content_filter"
    return "stop"


def usage_json(completion: Completion, prompt_estimate: int) -> dict[str, Any]:
    """OpenAI's usage: ``prompt_tokens`` counts all input, the part read from the
    provider's cache named in ``prompt_tokens_details.cached_tokens``."""
    usage = completion.usage
    prompt = usage.prompt or prompt_estimate
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
    }


def tool_calls_json(completion: Completion) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(tool_input(call.arguments))},
        }
        for call in completion.tool_calls
    ]


def completion_json(
    completion: Completion, model: str, completion_id: str, prompt_estimate: int
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": completion.text or None,
        "refusal": None,
    }
    if completion.tool_calls:
        message["tool_calls"] = tool_calls_json(completion)
    reasoning = "".join(p.text for p in completion.thinking)
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason(completion),
            }
        ],
        "usage": usage_json(completion, prompt_estimate),
    }


def chunk_json(
    completion_id: str,
    model: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta`` None is the usage-only last chunk."""
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None or delta is None:
        chunk["usage"] = usage
    return chunk
