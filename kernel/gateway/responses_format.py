"""OpenAI Responses API requests → Kernel's neutral messages, for ``/v1/responses``
(Codex, and the openai SDK's ``client.responses``), answered by whatever provider Kernel has.

Input: a string (one user message) or a list of items. ``message`` items (or role-only
items, as the SDK sends them) of role ``system``/``developer`` join ``instructions`` as
the system prompt, in order; ``user`` content may hold ``input_text`` and ``input_image``
(a ``data:`` URL); ``assistant`` content ``output_text`` (and ``refusal``).
``function_call`` / ``custom_tool_call`` / ``local_shell_call`` items are the model's
tool calls, their ``*_output`` items the results (text: an image in a result is named, not
passed on). ``reasoning`` items Kernel made (their ``encrypted_content`` carries the
provider's signed thinking) go back to the provider; any other reasoning item is dropped.
Records of hosted tools (``web_search_call`` …) are dropped: no provider of Kernel's
runs them. Any other item type is refused by name.

Tools: ``function`` tools are passed through; ``custom`` (freeform) tools become a function
with one string argument ``input`` and their calls come back as ``custom_tool_call``;
the functions of a ``namespace`` tool are offered as ``<namespace>__<name>`` and their calls
come back with ``namespace`` set; hosted tools (``web_search``, ``local_shell``,
``file_search`` …) are dropped. ``reasoning.effort`` asks for thinking where the provider has
the reasoning capability (else it is ignored, as a model that does not reason ignores it).
``text.format`` other than ``text``, ``background`` and ``conversation`` are refused.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from kernel.core import safejson
from kernel.core.messages import Block, Message, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from kernel.core.provider import Sampling, Thinking
from kernel.gateway.openai_format import image_from_url
from kernel.gateway.schema import OpenShape, Shape, documented
from kernel.gateway.v1 import (
    MODEL_NAME_MAX,
    TOO_DEEP,
    V1Body,
    V1Error,
    bad,
    tool_input,
    validate,
)

EFFORTS = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}
ITEMS_MAX = 10_000  # input items per request (a stored chain counts whole)
# Records of tools a hosted API ran: nothing a provider of Kernel's can be given.
DROPPED_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "tool_search_call",
        "tool_search_output",
        "mcp_list_tools",
    }
)
DROPPED_TOOLS = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_2025_08_26",
        "web_search_preview_2025_03_11",
        "local_shell",
        "file_search",
        "code_interpreter",
        "image_generation",
        "computer_use_preview",
        "computer",
        "mcp",
        "tool_search",
        "shell",
        "apply_patch",
    }
)
NAMESPACE_SEP = "__"
CUSTOM_PARAMETERS = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "the tool's input, as free text"}},
    "required": ["input"],
}
# Kernel's reasoning items carry the provider's signed thinking blocks in this form.
REASONING_PREFIX = "kernel.v1:"


# ---------------------------------------------------------------------- the body


class InputTextIn(V1Body):
    type: Literal["input_text", "output_text"]
    text: str


class InputImageIn(V1Body):
    type: Literal["input_image"]
    image_url: str = Field(description="a data: URL (base64); links and file ids are refused")


class MessageItemIn(V1Body):
    type: Literal["message"] | None = None
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputTextIn | InputImageIn]


class FunctionCallItemIn(V1Body):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    namespace: str | None = None


class FunctionCallOutputItemIn(V1Body):
    type: Literal["function_call_output", "custom_tool_call_output", "local_shell_call_output"]
    call_id: str
    output: str | list[InputTextIn | InputImageIn]


class ReasoningItemIn(V1Body):
    type: Literal["reasoning"]
    summary: list[OpenShape] = Field(default_factory=list)
    encrypted_content: str | None = None


InputItemIn = MessageItemIn | FunctionCallItemIn | FunctionCallOutputItemIn | ReasoningItemIn


class FunctionToolIn(V1Body):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ReasoningIn(V1Body):
    effort: str | None = None
    summary: str | None = None


class ResponsesBody(V1Body):
    """A Responses API request. Its scalars are checked here; its input items and tools
    one at a time as they are converted, so a refusal names the item in the API's words."""

    model: Annotated[str, Field(min_length=1, max_length=MODEL_NAME_MAX)]
    input: Annotated[Any, documented(str | list[InputItemIn])] = None
    instructions: str | None = None
    stream: bool | None = None
    store: bool | None = None
    previous_response_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    tools: Annotated[Any, documented(list[FunctionToolIn | OpenShape])] = None
    tool_choice: Annotated[Any, documented(str | OpenShape)] = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    reasoning: Annotated[Any, documented(ReasoningIn)] = None
    text: Annotated[Any, documented(OpenShape)] = None


class ResponseOut(Shape):
    id: str
    object: Literal["response"]
    created_at: int
    status: str
    model: str
    output: list[OpenShape]
    usage: OpenShape | None = None


class DeletedOut(Shape):
    id: str
    object: Literal["response.deleted"]
    deleted: bool


# ---------------------------------------------------------------------- the request


@dataclass(slots=True)
class Tools:
    """The tools offered, and how a call of each comes back: ``custom`` names a freeform
    tool (its call is a ``custom_tool_call``), ``namespaces`` maps a flattened name to
    its (namespace, name)."""

    specs: list[ToolSpec] = field(default_factory=list)
    custom: set[str] = field(default_factory=set)
    namespaces: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass(slots=True)
class ResponsesRequest:
    model: str
    items: list[Any]  # the request's own input items, as sent (what is stored)
    instructions: str | None
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    tools: Tools = field(default_factory=Tools)
    tool_choice: dict[str, Any] | None = None
    max_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)
    effort: str | None = None
    echo: dict[str, Any] = field(default_factory=dict)  # fields the response repeats


def parse_responses_request(data: Any) -> ResponsesRequest:
    if not isinstance(data, dict):
        raise V1Error(400, "invalid_request", "the request body must be a JSON object")
    for name in ("background", "conversation", "prompt"):
        if data.get(name) not in (None, False):
            raise bad(name, _UNSUPPORTED[name])
    body = validate(ResponsesBody, data, "responses")
    if body.input is None and body.previous_response_id is None:
        raise bad("input", "Field required (a string or an array of input items)")
    items = _items(body.input)
    _text_format(body.text)
    tools = _tools(body.tools)
    return ResponsesRequest(
        model=body.model,
        items=items,
        instructions=body.instructions,
        stream=bool(body.stream),
        store=body.store is not False,
        previous_response_id=body.previous_response_id,
        tools=tools,
        tool_choice=_tool_choice(body.tool_choice, body.parallel_tool_calls, tools),
        max_tokens=body.max_output_tokens,
        sampling=Sampling(temperature=body.temperature, top_p=body.top_p),
        effort=_effort(body.reasoning),
        echo={
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "temperature": body.temperature,
            "top_p": body.top_p,
            "tool_choice": body.tool_choice if body.tool_choice is not None else "auto",
            "tools": body.tools if isinstance(body.tools, list) else [],
            "metadata": data.get("metadata") if isinstance(data.get("metadata"), dict) else {},
            "user": data.get("user") if isinstance(data.get("user"), str) else None,
        },
    )


_UNSUPPORTED = {
    "background": "background responses are not supported by Kernel: send background false",
    "conversation": "conversations are not supported by Kernel: continue with "
    "previous_response_id, or send the whole input",
    "prompt": "prompt templates are not supported by Kernel: send instructions and input",
}


def _items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise bad("input", "must be a string or an array of input items")
    if len(value) > ITEMS_MAX:
        raise bad("input", f"at most {ITEMS_MAX} items")
    return value


def _text_format(text: Any) -> None:
    if text is None:
        return
    if not isinstance(text, dict):
        raise bad("text", "must be an object")
    fmt = text.get("format")
    if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") != "text"):
        raise bad("text.format", "only type 'text' is supported by Kernel")


def _effort(reasoning: Any) -> str | None:
    if reasoning is None:
        return None
    if not isinstance(reasoning, dict):
        raise bad("reasoning", "must be an object")
    effort = reasoning.get("effort")
    if effort is None or effort == "none":
        return None
    if not isinstance(effort, str) or effort not in EFFORTS:
        raise bad("reasoning.effort", f"must be one of none, {', '.join(EFFORTS)}")
    return EFFORTS[effort]


def thinking(effort: str | None, reasons: bool) -> Thinking | None:
    """The thinking ``effort`` asks for, where the provider reasons."""
    return Thinking("adaptive", effort=effort) if effort and reasons else None


def _tools(value: Any) -> Tools:
    tools = Tools()
    if value is None:
        return tools
    if not isinstance(value, list):
        raise bad("tools", "must be an array")
    for i, raw in enumerate(value):
        kind = raw.get("type") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(kind, str):
            raise bad(f"tools.{i}", "must be a tool object with a type")
        if kind == "function":
            tools.specs.append(_function(raw, f"tools.{i}"))
        elif kind == "custom":
            name = _name(raw.get("name"), f"tools.{i}.name")
            tools.custom.add(name)
            tools.specs.append(ToolSpec(name, _describe(raw), CUSTOM_PARAMETERS))
        elif kind == "namespace":
            _namespace(raw, f"tools.{i}", tools)
        elif kind not in DROPPED_TOOLS:
            raise bad(
                f"tools.{i}.type",
                f"tool type {kind[:40]!r} is not supported (function, custom and namespace "
                "are; hosted tools such as web_search are left out)",
            )
    return tools


def _function(raw: dict[str, Any], where: str, prefix: str = "") -> ToolSpec:
    name = _name(raw.get("name"), f"{where}.name")
    params = raw.get("parameters")
    schema = params if isinstance(params, dict) else {"type": "object", "properties": {}}
    return ToolSpec(prefix + name, _describe(raw), schema)


def _namespace(raw: dict[str, Any], where: str, tools: Tools) -> None:
    space = _name(raw.get("name"), f"{where}.name")
    inner = raw.get("tools")
    if not isinstance(inner, list):
        raise bad(f"{where}.tools", "must be an array of function tools")
    for j, tool in enumerate(inner):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue  # only functions can be offered
        spec = _function(tool, f"{where}.tools.{j}", space + NAMESPACE_SEP)
        tools.specs.append(spec)
        tools.namespaces[spec.name] = (space, spec.name[len(space) + len(NAMESPACE_SEP) :])


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 128:
        raise bad(where, "must be a tool name of 1 to 128 characters")
    return value


def _describe(raw: dict[str, Any]) -> str:
    description = raw.get("description")
    return description if isinstance(description, str) else ""


def _tool_choice(value: Any, parallel: bool | None, tools: Tools) -> dict[str, Any] | None:
    choice: dict[str, Any] | None = None
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise bad("tool_choice", "must be 'auto', 'none', 'required' or a function choice")
        choice = {"type": "any" if value == "required" else value}
    elif isinstance(value, dict):
        kind = value.get("type")
        if kind in ("function", "custom") and isinstance(value.get("name"), str):
            choice = {"type": "tool", "name": value["name"]}
        elif kind == "allowed_tools":
            choice = {"type": "any" if value.get("mode") == "required" else "auto"}
        else:
            raise bad("tool_choice", "must be 'auto', 'none', 'required' or a function choice")
    elif value is not None:
        raise bad("tool_choice", "must be 'auto', 'none', 'required' or a function choice")
    if not tools.specs:  # no tool to choose (hosted tools are left out)
        if choice is not None and choice["type"] in ("any", "tool"):
            raise bad("tool_choice", "names a tool, but no tool Kernel can offer was sent")
        return None
    if parallel is False:
        choice = (choice or {"type": "auto"}) | {"disable_parallel_tool_use": True}
    return choice


# ---------------------------------------------------------------------- input items


@dataclass(slots=True)
class Conversation:
    """Input items as Kernel's messages: the system text of system/developer messages,
    the messages, and the signed thinking to hand back before each assistant message."""

    system: list[str] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    history_thinking: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    pending_thinking: list[dict[str, Any]] = field(default_factory=list)

    def assistant(self) -> Message:
        last = self.messages[-1] if self.messages else None
        if last is None or last.role != "assistant":
            last = Message("assistant", [])
            self.messages.append(last)
            if self.pending_thinking:
                self.history_thinking[len(self.messages) - 1] = self.pending_thinking
                self.pending_thinking = []
        return last

    def user(self, blocks: list[Block], *, results: bool = False) -> None:
        if not blocks:
            return  # an empty message says nothing (and no API takes one)
        last = self.messages[-1] if self.messages else None
        if results and last is not None and last.role == "user" and last.tool_results:
            last.content.extend(blocks)
        else:
            self.messages.append(Message("user", blocks))


def conversation(items: list[Any], namespaces: dict[str, tuple[str, str]]) -> Conversation:
    """``items`` (a stored chain's, then the request's) as Kernel's messages."""
    spaced = {pair: flat for flat, pair in namespaces.items()}
    out = Conversation()
    for i, item in enumerate(items):
        _item(item, f"input.{i}", out, spaced)
    return out


def _item(item: Any, where: str, out: Conversation, spaced: dict[tuple[str, str], str]) -> None:
    if not isinstance(item, dict):
        raise bad(where, "must be an input item object")
    kind = item.get("type", "message" if "role" in item else None)
    if not isinstance(kind, str):
        raise bad(f"{where}.type", "Field required (the item's type, e.g. message)")
    if kind == "message":
        _message(item, where, out)
    elif kind == "function_call":
        name = _name(item.get("name"), f"{where}.name")
        space = item.get("namespace")
        if isinstance(space, str) and space:
            name = spaced.get((space, name), space + NAMESPACE_SEP + name)
        _call(out, item, where, name, _string(item, "arguments", where), "arguments")
    elif kind == "custom_tool_call":
        text = _string(item, "input", where)
        name = _name(item.get("name"), f"{where}.name")
        _call(out, item, where, name, json.dumps({"input": text}), "input")
    elif kind == "local_shell_call":
        action = item.get("action")
        arguments = json.dumps(action if isinstance(action, dict) else {})
        _call(out, item, where, "local_shell", arguments, "action")
    elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        call_id = _string(item, "call_id", where)
        text = _output(item.get("output"), f"{where}.output")
        out.user([ToolResultBlock(call_id, text)], results=True)
    elif kind == "reasoning":
        out.pending_thinking.extend(_reasoning(item, where))
    elif kind in DROPPED_ITEMS:
        return
    else:
        raise bad(
            f"{where}.type",
            f"input item type {kind[:40]!r} is not supported (message, function_call, "
            "function_call_output, custom_tool_call(_output), local_shell_call(_output) "
            "and reasoning are)",
        )


def _string(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise bad(f"{where}.{key}", "Field required (a string)")
    return value


def _call(
    out: Conversation, item: dict[str, Any], where: str, name: str, arguments: str, field: str
) -> None:
    call_id = item.get("call_id") or item.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise bad(f"{where}.call_id", "Field required (a string)")
    args = tool_input(arguments, f"{where}.{field}")
    out.assistant().content.append(ToolUseBlock(call_id, name, args))


def _message(item: dict[str, Any], where: str, out: Conversation) -> None:
    role = item.get("role")
    content = item.get("content")
    if role in ("system", "developer"):
        out.system.append(_text(content, f"{where}.content"))
    elif role == "assistant":
        text = _text(content, f"{where}.content")
        if text:
            out.assistant().content.append(TextBlock(text))
    elif role == "user":
        out.user(_user_content(content, f"{where}.content"))
    else:
        raise bad(f"{where}.role", "must be user, assistant, system or developer")


_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(where, "must be a string or an array of content parts")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        else:
            raise bad(f"{where}.{j}", "only text parts (input_text, output_text) are allowed here")
    return "\n".join(texts)


def _user_content(content: Any, where: str) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list):
        raise bad(where, "must be a string or an array of content parts")
    blocks: list[Block] = []
    for j, part in enumerate(content):
        at = f"{where}.{j}"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            blocks.append(TextBlock(part["text"]))
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise bad(f"{at}.image_url", "images must be data: URLs (base64); file ids are not")
            blocks.append(image_from_url(url, f"{at}.image_url"))
        else:
            shown = kind[:40] if isinstance(kind, str) else kind
            raise bad(at, f"part type {shown!r} is not supported (input_text and input_image are)")
    return blocks


def _output(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise bad(where, "must be a string or an array of content parts")
    texts = []
    for j, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in ("input_image", "input_file"):
            texts.append(f"[{kind.removeprefix('input_')}: not passed on, the tool result is text]")
        else:
            raise bad(f"{where}.{j}", "only input_text and input_image parts are allowed here")
    return "\n".join(texts)


def _reasoning(item: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """The signed thinking blocks a reasoning item of Kernel's carries; none for others."""
    sealed = item.get("encrypted_content")
    if sealed is not None and not isinstance(sealed, str):
        raise bad(f"{where}.encrypted_content", "must be a string")
    if not sealed or not sealed.startswith(REASONING_PREFIX):
        return []  # another server's reasoning: nothing a provider here can read
    try:
        blocks = json.loads(base64.b64decode(sealed[len(REASONING_PREFIX) :], validate=True))
        safejson.check_depth(blocks)
    except (RecursionError, safejson.UnsafeJSONError):  # not what Kernel sealed
        raise bad(
            f"{where}.encrypted_content", f"{TOO_DEEP}: pass back the item as it came"
        ) from None
    except (binascii.Error, ValueError):
        return []
    if not isinstance(blocks, list):
        return []
    return [b for b in blocks if isinstance(b, dict) and b.get("type") in _THINKING]


_THINKING = ("thinking", "redacted_thinking")


def seal(blocks: list[dict[str, Any]]) -> str | None:
    """Signed thinking blocks as a reasoning item's ``encrypted_content``."""
    if not blocks:
        return None
    return REASONING_PREFIX + base64.b64encode(json.dumps(blocks).encode()).decode()
