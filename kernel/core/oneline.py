"""Outside text shown on one line (a session's title, an approval's summary of what a
model-written call will do): no control, direction or invisible character can break the
line, reorder what it reads (a U+202E override turning ``rm -rf`` around) or hide a
word. Each is replaced by a space, and runs of space fold into one.

Public API: :data:`CONTROL`, :func:`flat`, :func:`one_line`.
"""

from __future__ import annotations

import re

# C0 and C1 controls (line breaks and tabs among them), the Arabic letter mark, the
# zero-width spaces and joiners, the direction marks, embeddings, overrides and
# isolates, the line and paragraph separators, the invisible operators (U+2060–U+2064)
# and the byte-order mark.
CONTROL = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


def flat(text: str) -> str:
    """``text`` on one line, without those characters, its spaces folded."""
    return " ".join(CONTROL.sub(" ", text).split())


def one_line(text: str, width: int) -> str:
    """:func:`flat`, cut to ``width`` characters ("…" marks the cut)."""
    line = flat(text)
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"
