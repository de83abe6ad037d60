"""Tools the model may call: schemas from signatures, validated and isolated calls.

A tool call never raises into the agent loop (except cancellation): every failure
becomes a ToolOutcome whose ``content`` tells the model what went wrong.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
import math
import re
import types
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import NoneType
from typing import Any, Literal, TypeVar, overload

from kernel.core import i18n
from kernel.core.asks import Answer, AskOutcome
from kernel.core.errors import ToolError
from kernel.core.messages import ImageBlock, ToolSpec
from kernel.tools.repair import repair_arguments, resolve_tool_name

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
# ask(question, options, kind=..., seconds=...) -> the owner's Answer
Ask = Callable[..., Awaitable[Answer]]

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# The keyword a handler registered ``with_context`` gets its ToolContext under: not a
# valid JSON-schema-friendly tool argument, so it cannot clash with a real one.
CONTEXT_ARG = "__kernel_context__"


@dataclass
class ToolContext:
    """Injected into tools that ask for it; never part of the schema."""

    session_id: int | None = None
    conversation: str = ""  # e.g. "console:default", "telegram:123"
    # A running tool reports a progress line ("3/10 indexing"): the turn shows it as a
    # tool_progress event (Telegram: the edited "⏳ tool: …" message). None: nobody shows it.
    progress: Callable[[str], None] | None = None
    tool_call_id: str = ""
    ask: Ask | None = None  # put a question to the owner; None where nobody can answer


@dataclass
class ToolReply:
    """What a tool returns when it has images for the model besides its text."""

    text: str
    images: list[ImageBlock] = field(default_factory=list)


@dataclass
class ToolOutcome:
    name: str  # the resolved tool name actually called
    ok: bool
    content: str  # what the model reads
    arguments: dict[str, Any]  # the repaired arguments that were used ({} if unrepairable)
    error: BaseException | None = None  # kept for the log, never shown raw to the model
    images: list[ImageBlock] = field(default_factory=list)  # shown to the model after it


@dataclass
class _Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    source: str
    context_param: str | None = None


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, _Tool] = {}
        self._disabled: set[str] = set()
        self._approval: dict[str, float] = {}  # tool name -> seconds to wait for the owner

    # ------------------------------------------------------------ registration

    @overload
    def tool(self, fn: F, *, name: str | None = None, description: str | None = None) -> F: ...

    @overload
    def tool(
        self, fn: None = None, *, name: str | None = None, description: str | None = None
    ) -> Callable[[F], F]: ...

    def tool(
        self, fn: F | None = None, *, name: str | None = None, description: str | None = None
    ) -> F | Callable[[F], F]:
        """Register a function as a tool: ``@reg.tool`` or ``@reg.tool(name=...)``."""

        def decorate(func: F) -> F:
            self._register_function(func, name, description)
            return func

        return decorate if fn is None else decorate(fn)

    def _register_function(
        self, fn: Callable[..., Any], name: str | None, description: str | None
    ) -> None:
        tool_name = name or str(getattr(fn, "__name__", ""))
        summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
        parameters, context_param = build_schema(fn, arg_docs)
        self._add(
            _Tool(
                name=tool_name,
                description=description if description is not None else summary,
                parameters=parameters,
                handler=fn,
                source="builtin",
                context_param=context_param,
            )
        )

    def register(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        handler: Callable[..., Any],
        *,
        source: str = "builtin",
        with_context: bool = False,
    ) -> None:
        """Register a tool with a ready JSON schema; ``handler(**arguments)`` runs it
        (``with_context``: also given the call's ToolContext as ``CONTEXT_ARG``)."""
        context_param = CONTEXT_ARG if with_context else None
        parameters = copy.deepcopy(parameters)
        self._add(_Tool(name, description, parameters, handler, source, context_param))

    def _add(self, tool: _Tool) -> None:
        if not NAME_PATTERN.match(tool.name):
            raise ValueError(f"invalid tool name {tool.name!r}: use 1-64 of [a-zA-Z0-9_-]")
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> None:
        """Remove a tool; unknown names are ignored."""
        self._tools.pop(name, None)

    def unregister_source(self, source: str) -> None:
        for name in [n for n, t in self._tools.items() if t.source == source]:
            del self._tools[name]

    def disable(self, names: Iterable[str]) -> None:
        """Disabled tools are not offered and refuse calls (also if registered later)."""
        self._disabled.update(names)

    def require_approval(self, name: str, timeout: float) -> None:
        """Calls to ``name`` run only after the owner approves each one (SPEC §7)."""
        self._approval[name] = timeout

    def needs_approval(self, name: str) -> bool:
        return name in self._approval

    def is_disabled(self, name: str) -> bool:
        return name in self._disabled

    # ------------------------------------------------------------ listing

    def names(self) -> list[str]:
        return [n for n in self._tools if n not in self._disabled]

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(t.name, t.description, copy.deepcopy(t.parameters))
            for t in self._tools.values()
            if t.name not in self._disabled
        ]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools and name not in self._disabled

    # ------------------------------------------------------------ calling

    async def call(
        self,
        name: str,
        arguments: str | dict[str, Any] | None,
        context: ToolContext | None = None,
        *,
        repaired: bool = False,
    ) -> ToolOutcome:
        """``repaired``: ``arguments`` is the dict repair_arguments made for the tool
        ``name`` resolves to (the agent repairs once per call): validated, not repaired."""
        available = self.names()
        resolved = resolve_tool_name(name, available)
        if resolved is None:
            listing = ", ".join(available) or "(none)"
            content = f"unknown tool '{name}'; available tools: {listing}"
            return ToolOutcome(name, False, content, {})
        tool = self._tools[resolved]
        try:
            if repaired and isinstance(arguments, dict):
                args = arguments
            else:
                args = repair_arguments(arguments, tool.parameters)
        except ToolError as exc:
            log.warning("tool %s: unrepairable arguments", resolved)
            content = (
                f"invalid arguments for {resolved}: {exc}. "
                "Resend the call with the arguments as one valid JSON object."
            )
            return ToolOutcome(resolved, False, content, {}, exc)
        args, problem = validate_arguments(args, tool.parameters)
        if problem is not None:
            log.info("tool %s: rejected arguments", resolved)
            content = f"invalid arguments for {resolved}: {problem}"
            return ToolOutcome(resolved, False, content, args)
        if tool.name in self._approval:
            refusal = await self._approve(tool, args, context)
            if refusal is not None:
                return refusal
        return await self._run(tool, args, context)

    async def _approve(
        self, tool: _Tool, args: dict[str, Any], context: ToolContext | None
    ) -> ToolOutcome | None:
        """Ask the owner; None means approved, otherwise the refusal the model reads."""
        timeout = self._approval[tool.name]
        if context is None or context.ask is None:
            content = (
                f"error: {tool.name} needs the owner's approval for each call, and nobody "
                "can be asked here; the call was not run"
            )
            return ToolOutcome(tool.name, False, content, args)
        shown = json.dumps(args, ensure_ascii=False, indent=1)
        if len(shown) > 800:
            shown = shown[:800] + " …"
        question = i18n.t("ask.approval", tool=tool.name, args=shown)
        options = [i18n.t("ask.approve"), i18n.t("ask.deny")]
        answer = await context.ask(question, options, kind="approval", seconds=timeout)
        if answer.option == 0:
            log.info("tool %s approved by the owner", tool.name)
            return None
        if answer.outcome is AskOutcome.UNDELIVERED:
            log.info("tool %s: the approval request could not be shown", tool.name)
            content = (
                f"error: the approval request for {tool.name} could not be shown to the "
                "owner (their chat is unreachable now); the call was not run"
            )
        elif answer.outcome is AskOutcome.TIMEOUT:
            log.info("tool %s: approval timed out", tool.name)
            content = (
                f"error: the owner did not answer the approval request for {tool.name} "
                f"within {timeout:g} s; the call was not run. Do not retry it unasked."
            )
        else:
            log.info("tool %s denied by the owner", tool.name)
            content = (
                f"error: the owner denied this call to {tool.name}; it was not run. "
                "Do not retry it; ask the owner what to do instead."
            )
        return ToolOutcome(tool.name, False, content, args)

    async def _run(
        self, tool: _Tool, args: dict[str, Any], context: ToolContext | None
    ) -> ToolOutcome:
        kwargs = dict(args)
        if tool.context_param is not None:
            kwargs[tool.context_param] = context if context is not None else ToolContext()
        try:
            result = await _invoke(tool.handler, kwargs)
            images = list(result.images) if isinstance(result, ToolReply) else []
            content = render_result(result.text if isinstance(result, ToolReply) else result)
        except Exception as exc:  # CancelledError is a BaseException and propagates
            log.warning("tool %s failed: %s", tool.name, type(exc).__name__)
            return ToolOutcome(tool.name, False, _error_text(exc), args, exc)
        return ToolOutcome(tool.name, True, content, args, images=images)


async def _invoke(handler: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(handler):
        return await handler(**kwargs)
    # Blocking tools must not stall the event loop (and with it every conversation).
    result = await asyncio.to_thread(handler, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def render_result(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def _error_text(exc: BaseException) -> str:
    message = str(exc)
    if isinstance(exc, ToolError):
        return f"error: {message}" if message else "error: the tool failed"
    kind = type(exc).__name__
    return f"error: {kind}: {message}" if message else f"error: {kind}"


# ---------------------------------------------------------------- docstrings

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$"
)
_ARG_LINE = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and ``Args:`` descriptions."""
    lines = doc.expandtabs().splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    i = 0
    while i < len(lines) and not _SECTION.match(lines[i].strip()):
        summary.append(lines[i])
        i += 1
    while i < len(lines):
        header = lines[i]
        i += 1
        body_end = _section_end(lines, i, _indent(header))
        if header.strip() in ("Args:", "Arguments:", "Parameters:"):
            args.update(_parse_args(lines[i:body_end]))
        i = body_end
    return "\n".join(summary).strip(), args


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _section_end(lines: list[str], start: int, header_indent: int) -> int:
    i = start
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > header_indent):
        i += 1
    return i


def _parse_args(body: list[str]) -> dict[str, str]:
    entries = [line for line in body if line.strip()]
    if not entries:
        return {}
    entry_indent = _indent(entries[0])
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in entries:
        match = _ARG_LINE.match(line.strip())
        if _indent(line) <= entry_indent and match:
            current = match.group("name")
            out[current] = [match.group("text").strip()]
        elif current is not None:
            out[current].append(line.strip())
    return {name: " ".join(p for p in parts if p) for name, parts in out.items()}


# ---------------------------------------------------------------- schemas

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def build_schema(
    fn: Callable[..., Any], arg_docs: dict[str, str] | None = None
) -> tuple[dict[str, Any], str | None]:
    """The JSON schema of ``fn``'s arguments and the name of its ToolContext parameter."""
    arg_docs = arg_docs or {}
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # an unresolvable forward reference, for instance
        raise TypeError(f"cannot resolve the type hints of tool {fn!r}: {exc}") from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        _check_kind(param)
        if param.name not in hints:
            raise TypeError(f"tool parameter {param.name!r} has no type annotation")
        annotation = hints[param.name]
        if _is_context(annotation):
            context_param = param.name
            continue
        prop = _parameter_schema(param, annotation, arg_docs.get(param.name, ""))
        properties[param.name] = prop
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    schema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return schema, context_param


def _check_kind(param: inspect.Parameter) -> None:
    allowed = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if param.kind not in allowed:
        raise TypeError(f"tool parameter {param.name!r} must be passable by keyword")


def _is_context(annotation: Any) -> bool:
    annotation = _strip_annotated(annotation)[0]
    if annotation is ToolContext:
        return True
    args = typing.get_args(annotation)
    return _is_union(annotation) and ToolContext in args and set(args) <= {ToolContext, NoneType}


def _strip_annotated(annotation: Any) -> tuple[Any, str]:
    """``Annotated[X, "text"]`` is X, with its first string as a description."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        texts = [e for e in extras if isinstance(e, str)]
        return base, texts[0] if texts else ""
    return annotation, ""


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _parameter_schema(param: inspect.Parameter, annotation: Any, doc: str) -> dict[str, Any]:
    annotation, annotated_doc = _strip_annotated(annotation)
    try:
        prop = _type_schema(annotation)
    except TypeError as exc:
        raise TypeError(f"tool parameter {param.name!r}: {exc}") from exc
    description = doc or annotated_doc
    if description:
        prop["description"] = description
    if param.default is not inspect.Parameter.empty:
        try:
            json.dumps(param.default)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"tool parameter {param.name!r}: default is not JSON") from exc
        prop["default"] = param.default
    return prop


def _type_schema(annotation: Any) -> dict[str, Any]:
    if _is_union(annotation):
        members = [a for a in typing.get_args(annotation) if a is not NoneType]
        if len(members) != 1:
            raise TypeError(f"unsupported union {annotation!r} (only X | None)")
        return _nullable(_type_schema(members[0]))
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return _literal_schema(typing.get_args(annotation))
    if origin is list:
        return _list_schema(typing.get_args(annotation))
    if origin is dict or annotation is dict:
        return _dict_schema(typing.get_args(annotation))
    raise TypeError(f"unsupported annotation {annotation!r}")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _literal_schema(values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {_SCALARS.get(type(v)) for v in values}
    if len(kinds) != 1 or None in kinds:
        raise TypeError(f"Literal values must share one of str/int/float/bool: {values!r}")
    return {"type": kinds.pop(), "enum": list(values)}


def _list_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    if len(args) != 1 or args[0] not in _SCALARS:
        raise TypeError(f"unsupported list item type {args!r} (use list[str], list[int], ...)")
    return {"type": "array", "items": {"type": _SCALARS[args[0]]}}


def _dict_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    if not args:
        return {"type": "object"}
    key, value = args
    if key is not str:
        raise TypeError("dict keys must be str")
    if value is Any:
        return {"type": "object"}
    if value in _SCALARS:
        return {"type": "object", "additionalProperties": {"type": _SCALARS[value]}}
    raise TypeError(f"unsupported dict value type {value!r}")


# ---------------------------------------------------------------- validation

_INT_TEXT = re.compile(r"-?\d+")
_NUMBER_TEXT = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


class _Mismatch(Exception):
    pass


def validate_arguments(
    args: dict[str, Any], schema: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """Check and lightly coerce ``args``; returns (arguments, problem or None)."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    if schema.get("additionalProperties") is False:
        args = {k: v for k, v in args.items() if k in properties}
    missing = [r for r in schema.get("required", []) if r not in args]
    if missing:
        return args, f"missing required parameter(s): {', '.join(missing)}"
    checked: dict[str, Any] = {}
    for key, value in args.items():
        prop = properties.get(key)
        if not isinstance(prop, dict):
            checked[key] = value
            continue
        if value is None and key not in schema.get("required", []) and not _nullable_prop(prop):
            continue  # models send null for "not given": let the default apply
        try:
            checked[key] = _check_value(value, prop)
        except _Mismatch as exc:
            return args, f"parameter '{key}' {exc}"
    return checked, None


def _nullable_prop(prop: dict[str, Any]) -> bool:
    kind = prop.get("type")
    return kind is None or kind == "null" or (isinstance(kind, list) and "null" in kind)


def _check_value(value: Any, prop: dict[str, Any]) -> Any:
    value = _check_type(value, prop)
    enum = prop.get("enum")
    if isinstance(enum, list) and not _in_enum(value, enum):
        allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in enum)
        raise _Mismatch(f"must be one of: {allowed}")
    items = prop.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        return [_check_item(i, item, items) for i, item in enumerate(value)]
    return value


def _check_item(index: int, item: Any, items: dict[str, Any]) -> Any:
    try:
        return _check_value(item, items)
    except _Mismatch as exc:
        raise _Mismatch(f"item {index} {exc}") from None


def _in_enum(value: Any, enum: list[Any]) -> bool:
    # bool is an int in Python: keep True from matching 1.
    return any(value == e and isinstance(value, bool) == isinstance(e, bool) for e in enum)


def _check_type(value: Any, prop: dict[str, Any]) -> Any:
    kind = prop.get("type")
    kinds = [kind] if isinstance(kind, str) else kind
    if not isinstance(kinds, list) or not kinds:
        return value
    if any(_matches(value, k) for k in kinds):
        return value
    for k in kinds:
        coerced = _coerce(value, k)
        if coerced is not None:
            return coerced
    expected = " or ".join(_TYPE_WORDS.get(k, str(k)) for k in kinds)
    raise _Mismatch(f"must be {expected}, got {_json_type(value)}")


def _matches(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    return True  # a type this validator does not know is the tool's business


def _coerce(value: Any, kind: str) -> Any:
    """Trivially exact conversions only; None means no conversion applies."""
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            return int(value.strip())
    if kind == "number" and isinstance(value, str) and _NUMBER_TEXT.fullmatch(value.strip()):
        number = float(value.strip())
        if math.isfinite(number):
            return int(number) if _INT_TEXT.fullmatch(value.strip()) else number
    if kind == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
