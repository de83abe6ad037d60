"""``<remember category="…">fact</remember>`` tags in a model reply (seed 001
"Memory Auto-Extract"): the model's way to save a fact in passing, never shown to the owner.

:class:`RememberFilter` strips the tags from text given in any number of pieces and
collects their facts. Its output does not depend on how the text was split, so the
streamed deltas every channel previews and the final reply agree, and a tag split across
deltas never leaks: text from a ``<`` that may begin ``<remember`` is held back until it
is resolved. A tag that is never closed, or whose fact runs past ``MAX_FACT_CHARS``, is
not a tag after all and is shown as written, so a stray ``<remember`` cannot swallow
the rest of a reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernel.store.db import MEMORY_CATEGORIES

MAX_FACT_CHARS = 1000
MAX_OPEN_CHARS = 200  # "<remember", its attributes and ">"
DEFAULT_CATEGORY = "user"  # seed 001: an extracted fact is about the user unless told

_OPEN = re.compile(r"<remember(?:\s[^<>]*)?>", re.IGNORECASE)
_OPEN_UNFINISHED = re.compile(r"<remember(?:\s[^<>]*)?", re.IGNORECASE)
_CLOSE = re.compile(r"</remember>", re.IGNORECASE)
_CLOSE_LEN = len("</remember>")
_CATEGORY = re.compile(r"""\bcategory\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)


@dataclass(frozen=True, slots=True)
class Fact:
    text: str
    category: str | None


class RememberFilter:
    """Feed text pieces in order, then :meth:`flush`; read :attr:`facts` at the end."""

    def __init__(self) -> None:
        self._held = ""
        self._open_tag: str | None = None  # the raw opening tag while inside a tag
        self.facts: list[Fact] = []

    def feed(self, piece: str) -> str:
        """The text that can be shown now."""
        self._held += piece
        return self._drain(final=False)

    def flush(self) -> str:
        """The end of the text: whatever was held back and is not a tag."""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> str:
        out: list[str] = []
        text = self._held
        while text:
            if self._open_tag is not None:
                close = _CLOSE.search(text)
                if close is not None and close.start() <= MAX_FACT_CHARS:
                    self._record(text[: close.start()])
                    text = text[close.end() :]
                    self._open_tag = None
                    continue
                if close is None and not final and len(text) < MAX_FACT_CHARS + _CLOSE_LEN:
                    break  # the closing tag may still come in time
                out.append(self._open_tag)  # not a tag after all: shown as written
                self._open_tag = None
                continue
            lt = text.find("<")
            if lt == -1:
                out.append(text)
                text = ""
                break
            out.append(text[:lt])
            text = text[lt:]
            tag = _OPEN.match(text)
            if tag is not None and tag.end() <= MAX_OPEN_CHARS:
                self._open_tag = tag.group(0)
                text = text[tag.end() :]
                continue
            if not final and _may_open(text):
                break
            out.append("<")
            text = text[1:]
        self._held = text
        return "".join(out)

    def _record(self, content: str) -> None:
        fact = content.strip()
        if not fact:
            return
        assert self._open_tag is not None
        found = _CATEGORY.search(self._open_tag)
        category = DEFAULT_CATEGORY
        if found is not None:
            value = next(g for g in found.groups() if g is not None).strip().lower()
            category = value if value in MEMORY_CATEGORIES else DEFAULT_CATEGORY
        self.facts.append(Fact(fact, category))


def _may_open(text: str) -> bool:
    """Whether more text could still make ``text`` (starting with ``<``) an opening tag."""
    if len(text) < len("<remember"):
        return "<remember".startswith(text.lower())
    return len(text) < MAX_OPEN_CHARS and _OPEN_UNFINISHED.fullmatch(text) is not None


def extract_remember(text: str) -> tuple[str, list[Fact]]:
    """``text`` without its remember tags, and their facts in order."""
    tags = RememberFilter()
    shown = tags.feed(text) + tags.flush()
    return shown, tags.facts
