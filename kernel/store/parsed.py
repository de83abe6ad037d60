"""Stored messages parsed once: each turn reads its session's last rounds again (the
history a model is shown), and parsing their JSON into blocks was most of that read's
cost, growing with the history (issue 37).

A message row's content never changes once written: rows are only flagged (failed,
cut) or deleted, and their ids (AUTOINCREMENT) are never reused. The stored text is
kept beside its blocks all the same and compared on every read, so a database file
replaced under the store (a restore) can never be served a stale parse.

Touched only on the db thread (every job runs there). Bounded by use: a row none of
the last ``KEEP_READS`` reads returned (it left its session's window, or the session
went quiet) goes at the next sweep, made every ``SWEEP_EVERY`` rows kept; so what stays
is the windows read lately, flat once they are full. And by size, whatever the use: at
most ``LIMIT_CHARS`` characters of stored text, the oldest leaving first; a message
longer than ``LONGEST`` is parsed each time, never kept.
"""

from __future__ import annotations

import json
from typing import Any, cast

from kernel.core.errors import StoreError
from kernel.core.messages import Block, Message, Role, content_from_json

LIMIT_CHARS = 1_000_000  # ~50 rounds of a dozen long-winded sessions
LONGEST = 64_000
KEEP_READS = 64  # a turn reads twice: ~32 turns, across every session
SWEEP_EVERY = 256


class ParsedMessages:
    """Message rows' blocks by row id. A message handed out is the caller's own (its
    list of blocks a new one); the blocks are shared between reads, values that
    nothing changes in place."""

    def __init__(self) -> None:
        # row id -> [role, stored text, blocks, the read that last returned it]
        self._kept: dict[int, list[Any]] = {}
        self._chars = 0
        self._reads = 0
        self._added = 0  # rows kept since the last sweep

    def read(self) -> None:
        """A read of some session's rows begins (its rows are stamped with it)."""
        self._reads += 1
        if self._added >= SWEEP_EVERY:
            self._sweep()

    def message(self, message_id: int, role: str, content: str) -> Message:
        kept = self._kept.get(message_id)
        if kept is not None and kept[1] == content and kept[0] == role:
            kept[3] = self._reads
            return Message(cast(Role, role), list(kept[2]))
        message = parse_message(message_id, role, content)
        if len(content) <= LONGEST:
            self._keep(message_id, role, content, tuple(message.content))
        return message

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def chars(self) -> int:
        return self._chars

    def _keep(self, message_id: int, role: str, content: str, blocks: tuple[Block, ...]) -> None:
        old = self._kept.pop(message_id, None)
        if old is not None:
            self._chars -= len(old[1])
        self._kept[message_id] = [role, content, blocks, self._reads]
        self._chars += len(content)
        self._added += 1
        while self._chars > LIMIT_CHARS:
            oldest = next(iter(self._kept))
            self._chars -= len(self._kept.pop(oldest)[1])

    def _sweep(self) -> None:
        since = self._reads - KEEP_READS
        for message_id in [i for i, kept in self._kept.items() if kept[3] < since]:
            self._chars -= len(self._kept.pop(message_id)[1])
        self._added = 0


def parse_message(message_id: int, role: str, content: str) -> Message:
    """The message a row stores; StoreError names a row whose content cannot be read."""
    try:
        blocks = content_from_json(json.loads(content))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(f"message {message_id} has unreadable content") from exc
    return Message(cast(Role, role), blocks)  # the table's CHECK allows only the two
