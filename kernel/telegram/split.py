"""Split long replies into Telegram-sized messages.

Telegram counts a message's visible text in UTF-16 code units (4096 at most). A cut
prefers a paragraph break, then a line break, then a space, and only then falls in the
middle of a word. Inside a code block (`<pre>`) spaces are code: a cut falls at a line
break, or, in a line too long for one message, before a run of spaces, dropping nothing.
In HTML, tags open at a cut are closed at the end of the chunk and reopened, with their
original attributes, at the start of the next one.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from kernel.telegram.render import decode_entity

LIMIT = 4096

_ATOM = re.compile(
    r"<(?P<close>/?)(?P<name>[A-Za-z][A-Za-z0-9-]*+)(?:\s(?:[^<>\"']|\"[^<\"]*+\"|'[^<']*+')*+)?+>"
    r"|&(?P<ent>lt|gt|amp|quot|#[0-9]+|#[xX][0-9a-fA-F]+);"
    r"|[^<&]+|."
)
_PARAGRAPH = re.compile(r"\n(?:[ \t]*\n)+")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r"[ \t]+")
_BLANK_LINES = re.compile(r"(?:[ \t]*\n)+")


@dataclass(frozen=True)
class _Tag:
    name: str
    raw: str


@dataclass
class _Parsed:
    """Visible text of an HTML string, each character tied to its place in the markup."""

    text: str
    raw_start: list[int]
    raw_end: list[int]
    # Tags open around each visible character, outermost first.
    stacks: list[tuple[_Tag, ...]]
    # Whether each visible character is inside a code block (<pre>).
    in_pre: list[bool]


def utf16_len(text: str) -> int:
    """Length as Telegram counts it: characters outside the BMP take two units (a lone
    surrogate, one)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def split_plain(text: str, limit: int = LIMIT) -> list[str]:
    """Split plain text into chunks of at most ``limit`` UTF-16 units."""
    return [text[a:b] for a, b in _ranges(text, limit, [False] * len(text))]


def split_html(html: str, limit: int = LIMIT) -> list[str]:
    """Split Telegram HTML into chunks of at most ``limit`` visible UTF-16 units.

    Each chunk is valid Telegram HTML on its own, given valid Telegram HTML.
    """
    parsed = _parse(html)
    return [_chunk(html, parsed, a, b) for a, b in _ranges(parsed.text, limit, parsed.in_pre)]


def _parse(html: str) -> _Parsed:
    parsed = _Parsed("", [], [], [], [])
    chars: list[str] = []
    stack: tuple[_Tag, ...] = ()
    in_pre = False
    for match in _ATOM.finditer(html):
        start, end = match.span()
        if match.group("name"):
            stack = _apply_tag(stack, match.group("name").lower(), match.group(), match["close"])
            in_pre = any(tag.name == "pre" for tag in stack)
            continue
        if match.group("ent"):  # one character, the whole entity its place
            piece = decode_entity(match.group("ent"))
            parsed.raw_start.append(start)
            parsed.raw_end.append(end)
        else:  # a run of text: each character is its own place in the markup
            piece = match.group()
            parsed.raw_start.extend(range(start, end))
            parsed.raw_end.extend(range(start + 1, end + 1))
        count = len(piece)
        chars.append(piece)
        parsed.stacks.extend([stack] * count)
        parsed.in_pre.extend([in_pre] * count)
    parsed.text = "".join(chars)
    return parsed


def _apply_tag(stack: tuple[_Tag, ...], name: str, raw: str, close: str) -> tuple[_Tag, ...]:
    if not close:
        return (*stack, _Tag(name, raw))
    for depth in range(len(stack) - 1, -1, -1):
        if stack[depth].name == name:
            return stack[:depth]
    return stack


def _chunk(html: str, parsed: _Parsed, a: int, b: int) -> str:
    opening = "".join(tag.raw for tag in parsed.stacks[a])
    closing = "".join(f"</{tag.name}>" for tag in reversed(parsed.stacks[b - 1]))
    return opening + html[parsed.raw_start[a] : parsed.raw_end[b - 1]] + closing


def _ranges(text: str, limit: int, in_pre: list[bool]) -> list[tuple[int, int]]:
    """Spans ``[a, b)`` of ``text`` for the chunks, whitespace at the cuts left out."""
    if limit < 2:
        raise ValueError("limit must leave room for a character outside the BMP")
    # units[i]: UTF-16 length of text[:i]
    units: range | list[int] = range(len(text) + 1)
    if utf16_len(text) != len(text):
        units = [0]
        for ch in text:
            units.append(units[-1] + (2 if ord(ch) > 0xFFFF else 1))
    spans = []
    start = _skip_blank_lines(text, 0)
    while start < len(text):
        fits = bisect_right(units, units[start] + limit) - 1
        if fits >= len(text):
            end, resume = len(text), len(text)
        else:
            end, resume = _cut(text, start, fits, in_pre)
        while end > start and text[end - 1].isspace():
            end -= 1
        if text[start:end].strip():
            spans.append((start, end))
        start = _skip_blank_lines(text, resume)
    return spans


def _skip_blank_lines(text: str, pos: int) -> int:
    match = _BLANK_LINES.match(text, pos)
    return match.end() if match else pos


def _cut(text: str, start: int, fits: int, in_pre: list[bool]) -> tuple[int, int]:
    """Where the chunk starting at ``start`` ends, and where the next one begins.

    ``text[start:fits]`` is the most that fits. A separator may run past ``fits``
    since it is dropped; a cut never leaves the chunk without visible text.
    """
    ink = start + len(text[start:fits]) - len(text[start:fits].lstrip())
    stop = min(len(text), fits + 64)
    # A better kind of cut wins unless it leaves the chunk less than a quarter full.
    for lowest in (start + (fits - start) // 4, ink + 1):
        for level in (_PARAGRAPH, _LINE, _SPACE):
            best = None
            for match in level.finditer(text, max(lowest, ink + 1), stop):
                if match.start() > fits:
                    break
                # Spaces inside a code block are part of the code.
                if level is _SPACE and in_pre[match.start()]:
                    continue
                best = match.span()
            if best is not None:
                return best
    # A code line longer than a chunk: cut it before its spaces, which the next chunk keeps.
    cut = fits
    while cut > ink + 1 and in_pre[cut - 1] and text[cut - 1].isspace():
        cut -= 1
    return cut, cut
