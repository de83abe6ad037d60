"""Normalise tool calls as models actually send them (seed rule "参数归一化").

Models emit arguments that are double-encoded, fenced, cut off by ``max_tokens``,
written as Python literals, wrapped in an extra ``{"input": ...}`` layer or spelled
with another tool ecosystem's parameter names. Repairing them here is cheaper than
a failed call and a retry round.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Collection
from typing import Any

from kernel.core.errors import ToolError

WRAPPER_KEYS = ("input", "arguments", "args", "parameters")

# (source, target): renamed only when the schema has the target and not the source.
KEY_ALIASES: tuple[tuple[str, str], ...] = (
    ("q", "query"),
    ("workdir", "cwd"),
    ("num_results", "count"),
    ("start_line", "start"),
    ("end_line", "end"),
    ("cmd", "task"),
    ("command", "task"),
    ("yield_time_ms", "timeout_seconds"),
)

SHELL_TOOL = "delegate_to_cli"
SHELL_ALIASES = frozenset({"exec_command", "shell", "bash", "run_shell", "run_command", "execute"})
NAME_PREFIXES = ("functions.", "tools.")

_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n?(?P<body>.*?)(?:\n?```\s*)?$", re.DOTALL)
_CLOSERS = {"{": "}", "[": "]"}
_MAX_CUTS = 32


class _Unparsable(Exception):
    pass


# ---------------------------------------------------------------- arguments


def repair_arguments(raw: str | dict[str, Any] | None, schema: dict[str, Any]) -> dict[str, Any]:
    """Turn whatever the model sent into an arguments dict shaped for ``schema``.

    Raises ToolError when no JSON object can be recovered.
    """
    args = _to_dict(raw)
    properties = _properties(schema)
    args = _unwrap(args, properties)
    args = _apply_aliases(args, properties)
    return _wrap_arrays(args, properties)


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def _to_dict(raw: object) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    if not isinstance(raw, str):
        raise ToolError(f"tool arguments must be a JSON object, got {type(raw).__name__}")
    if not raw.strip():
        return {}
    value = _parse_text(raw.strip())
    if not isinstance(value, dict):
        raise ToolError(f"tool arguments must be a JSON object, got {_json_kind(value)}")
    return value


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _parse_text(text: str) -> Any:
    try:
        return _decode_nested(json.loads(text))
    except ValueError:
        pass
    body = _strip_fences(text)
    attempts: tuple[Callable[[str], Any], ...] = (
        json.loads,
        lambda s: json.loads(_drop_trailing_commas(s)),
        lambda s: _loads_truncated(_drop_trailing_commas(s)),
        _literal_eval,
    )
    for attempt in attempts:
        try:
            return _decode_nested(attempt(body))
        except (ValueError, _Unparsable):
            continue
    raise ToolError("tool arguments are not valid JSON and could not be repaired")


def _decode_nested(value: Any) -> Any:
    """A JSON string whose content is a JSON object was encoded twice."""
    if isinstance(value, str):
        inner = _object_from_string(value)
        if inner is not None:
            return inner
    return value


def _object_from_string(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _strip_fences(text: str) -> str:
    match = _FENCE.match(text)
    return match.group("body").strip() if match else text


def _literal_eval(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise _Unparsable from exc


def _drop_trailing_commas(text: str) -> str:
    """Remove commas directly before ``}`` or ``]``, leaving string contents alone."""
    out: list[str] = []
    in_string = False
    for i, ch in enumerate(text):
        if in_string:
            in_string = not (ch == '"' and _closes_string(text, i))
        elif ch == '"':
            in_string = True
        elif ch == "," and text[i + 1 :].lstrip()[:1] in ("}", "]"):
            continue
        out.append(ch)
    return "".join(out)


def _closes_string(text: str, index: int) -> bool:
    """A quote closes a string unless an odd number of backslashes precede it."""
    backslashes = 0
    j = index - 1
    while j >= 0 and text[j] == "\\":
        backslashes += 1
        j -= 1
    return backslashes % 2 == 0


def _loads_truncated(text: str) -> Any:
    """Parse JSON that was cut off; if closing it is not enough, drop the last member."""
    candidate = text
    for _ in range(_MAX_CUTS):
        closed, last_comma = _close(candidate)
        try:
            return json.loads(closed)
        except ValueError:
            if last_comma is None:
                break
            candidate = candidate[:last_comma]
    raise _Unparsable


def _close(text: str) -> tuple[str, int | None]:
    """Close an open string, then open arrays/objects innermost first.

    Also returns the position of the last comma outside strings, where the text can
    be cut back to the previous complete member.
    """
    stack: list[str] = []
    in_string = False
    last_comma: int | None = None
    for i, ch in enumerate(text):
        if in_string:
            if ch == '"' and _closes_string(text, i):
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
        elif ch in ("}", "]") and stack:
            stack.pop()
        elif ch == ",":
            last_comma = i
    tail = text
    if in_string:
        if not _closes_string(tail + '"', len(tail)):
            tail = tail[:-1]  # a dangling backslash would escape the closing quote
        tail += '"'
    tail = tail.rstrip()
    if tail.endswith(","):
        tail = tail[:-1]
    elif tail.endswith(":"):
        tail += " null"
    return tail + "".join(reversed(stack)), last_comma


# ---------------------------------------------------------------- shaping


def _unwrap(args: dict[str, Any], properties: dict[str, Any]) -> dict[str, Any]:
    if len(args) != 1:
        return args
    key, value = next(iter(args.items()))
    if key not in WRAPPER_KEYS or key in properties:
        return args
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        inner = _object_from_string(value)
        if inner is not None:
            return inner
    return args


def _apply_aliases(args: dict[str, Any], properties: dict[str, Any]) -> dict[str, Any]:
    for source, target in KEY_ALIASES:
        if source not in args or source in properties or target not in properties:
            continue
        if target in args:
            continue
        value = args.pop(source)
        args[target] = _ms_to_seconds(value) if source == "yield_time_ms" else value
    return args


def _ms_to_seconds(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    try:
        ms = float(value)
    except ValueError:
        return value
    if not math.isfinite(ms):
        return value
    return math.ceil(ms / 1000)


def _wrap_arrays(args: dict[str, Any], properties: dict[str, Any]) -> dict[str, Any]:
    for key, value in args.items():
        prop = properties.get(key)
        if value is None or isinstance(value, list) or not _is_array(prop):
            continue
        args[key] = _list_from_string(value) if isinstance(value, str) else [value]
    return args


def _is_array(prop: object) -> bool:
    if not isinstance(prop, dict):
        return False
    kind = prop.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _list_from_string(value: str) -> list[Any]:
    """``'["a", "b"]'`` is an encoded list, anything else is one item."""
    if value.lstrip().startswith("["):
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = None
        if isinstance(decoded, list):
            return decoded
    return [value]


# ---------------------------------------------------------------- names


def resolve_tool_name(name: str, available: Collection[str]) -> str | None:
    """Map the name a model used to a registered tool name, or None."""
    if name in available:
        return name
    base = name.strip()
    for prefix in NAME_PREFIXES:
        if base.startswith(prefix):
            base = base[len(prefix) :]
            break
    if base in available:
        return base
    folded = [n for n in available if n.lower() == base.lower()]
    if len(folded) == 1:
        return folded[0]
    if base.lower() in SHELL_ALIASES and SHELL_TOOL in available:
        return SHELL_TOOL
    return None
