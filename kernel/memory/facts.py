"""Facts that change (issue 39): what saving a memory did, and how a new fact is found to
restate or replace one already kept.

A fact saved is compared with the memories recall finds for it (``Memories.recall``:
FTS5 today, hybrid once vectors are configured). The same words (:func:`normal`: width,
case, punctuation and spacing aside) restate it; otherwise, when a judge is set (the
agent's cheap side call, kernel/agent/fact_judge.py), the judge names the one it
replaces, within ``JUDGE_SECONDS``. Either way the kept memory takes the new text and
its earlier text becomes a version; a judge that fails or is late changes nothing (the
fact stays a memory of its own).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from kernel.store.db import MemoryRow

JUDGED = 3  # the memories recall offers the judge for a new fact
JUDGE_SECONDS = 10.0  # how long a save waits for the judge; then the fact is saved as new

Replaced = Literal["superseded", "restated"]  # how a new fact changed a kept one
Outcome = Literal["created", "exists", "superseded", "restated", "promoted"]
# The id of the memory (one of those given) a new fact replaces, or None.
Judge = Callable[[str, Sequence[MemoryRow]], Awaitable[int | None]]

_NUMBER = re.compile(r"\d+")


class Changed(Protocol):
    """Told of each change to a memory (the agent writes it to the audit trail):
    ``action`` (edited, forgotten, moved, superseded, restated), who made it, and facts
    (ids, scopes, counts), never the text."""

    def __call__(self, action: str, actor: str, **facts: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class Saved:
    """What saving a fact did: ``row`` is the memory that holds it now; ``replaced``
    the text that memory had before (superseded, restated)."""

    row: MemoryRow
    outcome: Outcome
    replaced: str = ""

    @property
    def written(self) -> bool:
        """A memory was made or changed (not the same fact already there as it was)."""
        return self.outcome != "exists"


def normal(text: str) -> str:
    """``text`` as compared for a restatement: NFKC (full width as half), case folded,
    punctuation and symbols dropped, spacing collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(c)[0] in "PSZ" else c for c in folded)
    return " ".join(kept.split())


def chosen(answer: str, known: Sequence[MemoryRow]) -> int | None:
    """The id a judge's answer names: the first number, 1-based into ``known``; None
    for 0, no number or one out of range."""
    found = _NUMBER.search(answer)
    if found is None or len(found.group(0)) > 3:
        return None
    n = int(found.group(0))
    return known[n - 1].id if 1 <= n <= len(known) else None
