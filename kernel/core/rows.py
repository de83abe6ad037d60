"""Row ids known only once a queued write ran on the database thread (issue 37: a turn
phase's rows go in one hop, a later write naming an earlier one's id).

:class:`RowId` is the id itself; :class:`Later` a value made from it (the 🔁 under an
answer names the answer's id: its outbox row is written in the hop that stores the
answer, kernel/store/mailbox.py fills it in). Here, in core, so that a running turn
(``Turn.answer_id``) can hold one; the store re-exports :class:`RowId`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class RowId:
    """The id of the row a queued write makes, filled on the database thread when that
    write runs. A write queued behind it (jobs run in the order queued) names the row
    with it before any caller has the id: the meter's usage row and the audit row that
    names it go in one hop (issue 37). ``value`` stays None when the write failed."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: int | None = None


class Later:
    """``make(row.value)``, made where the row's id is known: on the database thread, by
    a write queued behind the one that makes the row (``make`` reads nothing of the
    caller's context there: no language, no clock). None when that write failed (the
    value is left out)."""

    __slots__ = ("make", "row")

    def __init__(self, row: RowId, make: Callable[[int], Any]) -> None:
        self.row = row
        self.make = make

    def value(self) -> Any:
        return None if self.row.value is None else self.make(self.row.value)


def filled(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with each :class:`Later` among its values made (left out when its row
    was not written); on the database thread."""
    made = {}
    for key, value in body.items():
        if isinstance(value, Later):
            value = value.value()
            if value is None:
                continue
        made[key] = value
    return made


def holds_later(body: dict[str, Any]) -> bool:
    """Whether one of ``body``'s values waits for a row's id (:class:`Later`)."""
    return any(isinstance(value, Later) for value in body.values())
