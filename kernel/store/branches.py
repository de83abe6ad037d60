"""A session's branches (issue 20's cuts, issue 38's switches; seed 002 ``siblingNav``).

The live history of a session is its messages with ``cut`` = 0, in id order: what a
model is shown. /undo, /rewind, /retry (and a failed question asked again) cut the live
messages after one point into a **branch**: they keep their rows and get the branch's
number in ``cut``. The ``branches`` table names each branch's **fork**: the message it
continues after (the last live message before it when it was cut; 0: the session's
start), how it came to be and when.

A **switch** makes a branch the live history: the live messages after its fork are cut
into a branch of their own (nothing is lost), then the branch's messages are live again.
A branch forking inside another branch brings that one back first (its ancestors, then
it), so the live history is always one path. ``sessions.branch`` is the number the live
history had as a branch (0: never switched), and the history left behind by a switch
takes it back, so switching between two branches keeps both their numbers. A number is
never given to another branch (a restored branch keeps its row).

Public API: :class:`BranchTables` (a part of the Store), :class:`BranchRow`,
:class:`Branches`, :class:`Switched`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kernel.store.database import WRITE, Database
from kernel.store.parsed import parse_message

BRANCH_LISTING = 50  # the newest this many branches are listed (the total is counted)


@dataclass(frozen=True, slots=True)
class BranchRow:
    """One branch: its number (``messages.cut``), the message id it forks after (0: the
    start), how it came to be (undo, rewind, retry, repeat, switch; ``cut`` for one cut
    before branches were named), when it was cut, its size, its first message's id and
    time, and the words of its first owner's message and of its fork message."""

    branch: int
    fork: int
    how: str
    cut_at: datetime
    messages: int
    first_id: int
    started_at: datetime
    first_words: str = ""
    fork_words: str = ""


@dataclass(frozen=True, slots=True)
class Branches:
    """A session's branches, oldest first (the newest ``BRANCH_LISTING``), ``total``
    of them, and ``active``: the number the live history had as a branch (0: never
    switched)."""

    rows: list[BranchRow]
    total: int
    active: int


@dataclass(frozen=True, slots=True)
class Switched:
    """A switch done: the branch now live (``restored`` messages, with the branches it
    forks inside, if any), and each branch the messages left behind went to, as
    (number, messages)."""

    branch: int
    fork: int
    restored: int
    left: tuple[tuple[int, int], ...]


class BranchTables(Database):
    """The Store's branch methods (the ``branches`` table and ``messages.cut``)."""

    async def cut_after(self, session_id: int, after_id: int, how: str = "cut") -> tuple[int, int]:
        """Cut every message of the session after ``after_id`` that is not cut yet
        (kept as history, never loaded for a model again), as one new branch whose fork
        is the last live message up to ``after_id``. Returns (the branch number, how
        many messages it holds); (0, 0) when none."""
        now = self._now()

        def op(conn: sqlite3.Connection) -> tuple[int, int]:
            fork = _scalar(
                conn,
                "SELECT MAX(id) FROM messages WHERE session_id = ? AND id <= ? AND cut = 0",
                (session_id, after_id),
            )
            branch = _next_number(conn, session_id)
            count = _cut_live(conn, session_id, fork, branch, how, now)
            return (branch, count) if count else (0, 0)

        return await self._write("cut messages", op)

    async def restore_branch(self, session_id: int, branch: int) -> int:
        """Undo :meth:`cut_after` (a retry that could not start); returns how many. The
        branch's row stays: its number is never given to another."""

        def op(conn: sqlite3.Connection) -> int:
            return _restore(conn, session_id, branch)

        return await self._write("restore messages", op)

    async def count_branches(self, session_id: int) -> tuple[int, int]:
        """(branches cut from the session, messages in them)."""

        def op(conn: sqlite3.Connection) -> tuple[int, int]:
            row = conn.execute(
                "SELECT COUNT(DISTINCT cut), COUNT(*) FROM messages"
                " WHERE session_id = ? AND cut > 0",
                (session_id,),
            ).fetchone()
            return int(row[0]), int(row[1])

        return await self._read("count branches", op)

    async def list_branches(self, session_id: int) -> Branches:
        """The session's branches with their fork, size and first words."""

        def op(conn: sqlite3.Connection) -> Branches:
            total = _scalar(
                conn,
                "SELECT COUNT(DISTINCT cut) FROM messages WHERE session_id = ? AND cut > 0",
                (session_id,),
            )
            rows = conn.execute(
                "SELECT m.cut, MIN(m.id), COUNT(*), MIN(m.created_at), b.fork, b.how, b.at"
                " FROM messages m LEFT JOIN branches b"
                " ON b.session_id = m.session_id AND b.branch = m.cut"
                " WHERE m.session_id = ? AND m.cut > 0"
                " GROUP BY m.cut ORDER BY m.cut DESC LIMIT ?",
                (session_id, BRANCH_LISTING),
            ).fetchall()
            listed = [_branch_row(conn, session_id, r) for r in reversed(rows)]
            return Branches(listed, total, _active(conn, session_id))

        return await self._read("list branches", op)

    def switch_branch(self, session_id: int, branch: int) -> asyncio.Future[Switched | None]:
        """Make ``branch`` the session's live history (see the module's words), in one
        transaction; None when the session has no such branch. Queued at once (not a
        coroutine): a caller that checked the chat is idle has its switch ordered
        before any turn that starts after; the switch runs even if the caller is then
        cancelled (the future says how it ended)."""
        now = self._now()

        def op(conn: sqlite3.Connection) -> Switched | None:
            return _switch(conn, session_id, branch, now)

        return self._submit("switch branch", op, WRITE)


# ----- on the db thread ----------------------------------------------------------------


def _scalar(conn: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row[0] or 0) if row is not None else 0


def _next_number(conn: sqlite3.Connection, session_id: int) -> int:
    """A number no branch of the session has had (nor its live history)."""
    return (
        max(
            _scalar(conn, "SELECT MAX(cut) FROM messages WHERE session_id = ?", (session_id,)),
            _scalar(conn, "SELECT MAX(branch) FROM branches WHERE session_id = ?", (session_id,)),
            _active(conn, session_id),
        )
        + 1
    )


def _active(conn: sqlite3.Connection, session_id: int) -> int:
    return _scalar(conn, "SELECT branch FROM sessions WHERE id = ?", (session_id,))


def _cut_live(
    conn: sqlite3.Connection, session_id: int, fork: int, branch: int, how: str, now: str
) -> int:
    """The live messages after ``fork`` become branch ``branch``; how many."""
    cur = conn.execute(
        "UPDATE messages SET cut = ? WHERE session_id = ? AND id > ? AND cut = 0",
        (branch, session_id, fork),
    )
    if cur.rowcount:
        conn.execute(
            "INSERT OR REPLACE INTO branches (session_id, branch, fork, how, at)"
            " VALUES (?, ?, ?, ?, ?)",
            (session_id, branch, fork, how, now),
        )
    return cur.rowcount


def _restore(conn: sqlite3.Connection, session_id: int, branch: int) -> int:
    cur = conn.execute(
        "UPDATE messages SET cut = 0 WHERE session_id = ? AND cut = ?", (session_id, branch)
    )
    return cur.rowcount


def _fork(conn: sqlite3.Connection, session_id: int, branch: int) -> int:
    """Where ``branch`` forks; for a branch without a row, the last message before it
    that was live when it was cut (not in a branch cut before it)."""
    row = conn.execute(
        "SELECT fork FROM branches WHERE session_id = ? AND branch = ?", (session_id, branch)
    ).fetchone()
    if row is not None:
        return int(row[0])
    return _scalar(conn, LEGACY_FORK, (session_id, session_id, branch, branch))


# The fork of a branch cut before the table named it (also the migration's guess).
LEGACY_FORK = (
    "SELECT MAX(p.id) FROM messages p WHERE p.session_id = ? AND p.id <"
    " (SELECT MIN(id) FROM messages WHERE session_id = ? AND cut = ?)"
    " AND (p.cut = 0 OR p.cut > ?)"
)


def _switch(conn: sqlite3.Connection, session_id: int, branch: int, now: str) -> Switched | None:
    if branch <= 0 or not _scalar(
        conn,
        "SELECT COUNT(*) FROM messages WHERE session_id = ? AND cut = ?",
        (session_id, branch),
    ):
        return None
    # The branch, then the branches its fork lies in, out to one forking off the live path.
    chain = [(branch, _fork(conn, session_id, branch))]
    while chain[-1][1] > 0:
        inside = _scalar(
            conn,
            "SELECT cut FROM messages WHERE session_id = ? AND id = ?",
            (session_id, chain[-1][1]),
        )
        if inside <= 0 or any(b == inside for b, _ in chain):
            break
        chain.append((inside, _fork(conn, session_id, inside)))
    # The live history's tail keeps the live history's number (when it has one); the
    # rest of a branch brought back on the way keeps that branch's.
    number = _active(conn, session_id)
    left: list[tuple[int, int]] = []
    restored = 0
    for step, fork in reversed(chain):
        number = number or _next_number(conn, session_id)
        count = _cut_live(conn, session_id, fork, number, "switch", now)
        if count:
            left.append((number, count))
        restored += _restore(conn, session_id, step)
        number = step
    conn.execute("UPDATE sessions SET branch = ? WHERE id = ?", (branch, session_id))
    return Switched(branch, chain[0][1], restored, tuple(left))


def _branch_row(conn: sqlite3.Connection, session_id: int, row: tuple[Any, ...]) -> BranchRow:
    branch, first_id, count, started, fork, how, at = row
    fork_id = int(fork) if fork is not None else _fork(conn, session_id, branch)
    first = conn.execute(
        "SELECT id, role, content FROM messages WHERE session_id = ? AND cut = ?"
        " ORDER BY starts_round DESC, id LIMIT 1",
        (session_id, branch),
    ).fetchone()
    forked = conn.execute(
        "SELECT id, role, content FROM messages WHERE id = ?", (fork_id,)
    ).fetchone()
    return BranchRow(
        branch=int(branch),
        fork=fork_id,
        how=str(how or "cut"),
        cut_at=datetime.fromisoformat(at or started),
        messages=int(count),
        first_id=int(first_id),
        started_at=datetime.fromisoformat(started),
        first_words=parse_message(*first).text if first is not None else "",
        fork_words=parse_message(*forked).text if forked is not None else "",
    )
