"""SOUL.md's tool sections (issue 38, seed 004: SOUL.md carries the tool and memory
rules, as editable text).

A section of SOUL.md is about a tool when its heading (``#`` to ``######``, outside a
code fence) names the tool: a word of the heading equal to the tool's name, or a
pattern with ``*`` that matches it (``### memory_*``, ``### mcp_*``). Where SOUL.md
says something about a tool, Kernel leaves out its own wording for that tool (the
rules appended to its definition, its line in the tool guide); where it says nothing,
Kernel's wording applies. A section whose heading names tools, none of which the turn
offers, is left out of that turn's prompt: the model reads a tool's rules only with
the tool. A heading names tools by words written as tool names are: lower case with an
underscore (``delegate_to_cli``), a pattern with ``*``, or the name of a tool Kernel
has. A section ends at the next heading of the same or a higher level; a heading left
with nothing under it goes too.

Public API: :func:`covered`, :func:`for_tools`, :func:`for_turn`, :func:`named_tools`,
:func:`section_tools`.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable

TURNS_KEPT = 8  # for_turn's cache: SOUL.md texts with the tool lists they were cut for

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_WORD = re.compile(r"[A-Za-z0-9_*-]+")
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9*]*)+")


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, text) of each heading outside code fences."""
    found: list[tuple[int, int, str]] = []
    fenced = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            found.append((index, len(match.group(1)), match.group(2)))
    return found


def named_tools(heading: str, names: Iterable[str]) -> set[str]:
    """The tools among ``names`` that a heading's words name."""
    words = _WORD.findall(heading)
    return {
        name
        for name in names
        if any(word == name or ("*" in word and fnmatch.fnmatchcase(name, word)) for word in words)
    }


def _is_tool_section(heading: str, known: set[str]) -> bool:
    """Whether a heading names a tool, offered or not."""
    return any(
        word in known or _SNAKE.fullmatch(word) or ("*" in word and word.strip("*"))
        for word in _WORD.findall(heading)
    )


def covered(text: str, names: Iterable[str]) -> set[str]:
    """The tools among ``names`` some heading of ``text`` names."""
    names = list(names)
    lines = text.splitlines()
    found: set[str] = set()
    for _, _, heading in _headings(lines):
        found |= named_tools(heading, names)
    return found


def section_tools(text: str, known: Iterable[str] = ()) -> set[str]:
    """The tool names and patterns the tool sections' headings of ``text`` are written
    with (what SelfOps compares before and after an edit)."""
    known_set = set(known)
    return {
        word
        for _, _, heading in _headings(text.splitlines())
        for word in _WORD.findall(heading)
        if _is_tool_section(word, known_set)
    }


def for_tools(text: str, offered: Iterable[str], known: Iterable[str] = ()) -> str:
    """``text`` without the tool sections about none of the ``offered`` tools
    (``known``: every tool Kernel has, whose bare names count as tool names too)."""
    offered, known_set = list(offered), set(known)
    lines = text.splitlines()
    dropped = _sections(
        lines, lambda h: _is_tool_section(h, known_set) and not named_tools(h, offered)
    )
    if not dropped:
        return text
    lines = [line for index, line in enumerate(lines) if index not in dropped]
    empty = _empty_headings(lines)
    lines = [line for index, line in enumerate(lines) if index not in empty]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines).strip())


@functools.lru_cache(maxsize=TURNS_KEPT)
def for_turn(
    text: str, offered: tuple[str, ...], known: tuple[str, ...]
) -> tuple[str, frozenset[str]]:
    """:func:`for_tools` and the offered tools its headings name (:func:`covered`), kept
    for the last ``TURNS_KEPT`` texts and tool lists: a turn cuts the same SOUL.md for
    the same tools as the turn before it, and the cut costs ~0.1 ms of the event loop."""
    cut = for_tools(text, offered, known)
    return cut, frozenset(covered(cut, offered))


def _sections(lines: list[str], drop: Callable[[str], bool]) -> set[int]:
    """The line indexes of the sections whose heading ``drop`` picks."""
    headings = _headings(lines)
    out: set[int] = set()
    for position, (start, level, heading) in enumerate(headings):
        if drop(heading):
            end = next((i for i, lv, _ in headings[position + 1 :] if lv <= level), len(lines))
            out.update(range(start, end))
    return out


def _empty_headings(lines: list[str]) -> set[int]:
    """Headings with nothing but blank lines before the next of the same or a higher
    level (or the end)."""
    headings = _headings(lines)
    out: set[int] = set()
    for position in reversed(range(len(headings))):  # the deepest first
        start, level, _ = headings[position]
        end = next((i for i, lv, _ in headings[position + 1 :] if lv <= level), len(lines))
        if all(not lines[i].strip() or i in out for i in range(start + 1, end)):
            out.add(start)
    return out
