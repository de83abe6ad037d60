"""How an approval names a tool call (issue 34): the tool's display name and one line of
what it will do, with the full arguments beside it for whoever wants them.

A tool may bring its own :data:`Describe` when it is registered (``delegate_to_cli``:
"交给 Claude Code" and the task's first line; an MCP tool: its server and own name);
every other call is described by :func:`generic`: the command it runs, the path it
touches, or its arguments in one compact line.

Public API: :data:`Describe`, :func:`generic`, :func:`remote`, :func:`first_line`,
:func:`details`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kernel.core.i18n import t_or
from kernel.core.oneline import CONTROL, flat

SUMMARY = 120  # characters of the one-line summary
VALUE = 40  # characters of one argument's value in a compact summary
DETAILS = 3000  # characters of the full arguments shown beside it

# The tool's display name and the one line of what this call will do.
Describe = Callable[[dict[str, Any]], tuple[str, str]]

_COMMAND = ("command", "cmd")
_PATH = ("path", "file_path", "file", "filename")


def first_line(text: str, limit: int = SUMMARY) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters; "…" marks a
    cut, or the lines left out. Model-written: no control, direction or invisible
    character stays (:func:`~kernel.core.oneline.flat`), so it reads as it will run."""
    lines = [line for line in (flat(part) for part in text.splitlines()) if line]
    line = lines[0] if lines else ""
    more = len(line) > limit or len(lines) > 1
    line = line[: limit - 1] if len(line) > limit else line
    return line + "…" if more else line


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return first_line(text, VALUE)


def compact(args: dict[str, Any]) -> str:
    """``key=value, …`` on one line: each value's start, the whole within SUMMARY."""
    line = ", ".join(f"{flat(key)}={_value(value)}" for key, value in args.items())
    return line if len(line) <= SUMMARY else line[: SUMMARY - 1] + "…"


def generic(name: str, args: dict[str, Any]) -> tuple[str, str]:
    """A tool without its own describer: its name in the owner's words when the
    catalogue has one (a built-in tool: "记住一件事"), else as registered; the command it
    runs, else the path it touches, else its arguments in one line."""
    title = t_or(f"tool.title.{name}", name)
    for key in _COMMAND:
        if isinstance(args.get(key), str):
            return title, "$ " + first_line(args[key])
    for key in _PATH:
        if isinstance(args.get(key), str):
            return title, first_line(args[key])
    return title, compact(args)


def remote(server: str, tool: str) -> Describe:
    """An MCP server's tool: "server · tool" and its arguments in one line."""

    def describe(args: dict[str, Any]) -> tuple[str, str]:
        return f"{flat(server)} · {flat(tool)}", generic("", args)[1]

    return describe


def details(args: dict[str, Any]) -> str:
    """The full arguments as indented JSON, cut at DETAILS characters; a direction or
    invisible character inside a value is shown as its escape (still the same JSON)."""
    shown = json.dumps(args, ensure_ascii=False, indent=1)
    shown = CONTROL.sub(lambda m: m[0] if m[0] == "\n" else f"\\u{ord(m[0]):04x}", shown)
    return shown if len(shown) <= DETAILS else shown[:DETAILS] + " …"
