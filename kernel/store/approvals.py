"""The ``delegation_approvals`` table (migration 13): every answer to a coding CLI's
permission prompt, with its delegation (issue 19)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kernel.store.database import last_id, parse_stamp, stamp
from kernel.store.db import Store

MAX_LIMIT = 500
INPUT_CHARS = 4_000  # of the tool's input (JSON) kept in a record

_COLUMNS = (
    "id, delegation_id, conversation, session_id, cli, tool, input, rule, decision,"
    " decided_by, asked_at, answered_at"
)


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    delegation_id: str
    tool: str
    input: str  # JSON, capped at INPUT_CHARS
    decision: str  # "allow" | "deny"
    decided_by: str  # owner | task_rule | timeout | cancelled | undelivered | nobody
    asked_at: datetime
    answered_at: datetime
    conversation: str = ""
    session_id: int | None = None
    cli: str = ""
    rule: str = ""  # the "allow for this task" rule used or added; "" none
    id: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "delegation_id": self.delegation_id,
            "conversation": self.conversation,
            "session_id": self.session_id,
            "cli": self.cli,
            "tool": self.tool,
            "input": self.input,
            "rule": self.rule,
            "decision": self.decision,
            "decided_by": self.decided_by,
            "asked_at": stamp(self.asked_at),
            "answered_at": stamp(self.answered_at),
        }


def input_text(data: dict[str, Any]) -> str:
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= INPUT_CHARS else text[:INPUT_CHARS] + " …"


class ApprovalStore:
    """Reads and writes ``delegation_approvals`` through the Store's database thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def record(self, record: ApprovalRecord) -> int:
        values = (
            record.delegation_id,
            record.conversation,
            record.session_id,
            record.cli,
            record.tool,
            record.input,
            record.rule,
            record.decision,
            record.decided_by,
            stamp(record.asked_at),
            stamp(record.answered_at),
        )

        def op(conn: sqlite3.Connection) -> int:
            columns = _COLUMNS.split(", ", 1)[1]
            marks = ", ".join("?" * len(values))
            sql = f"INSERT INTO delegation_approvals ({columns}) VALUES ({marks})"
            return last_id(conn.execute(sql, values))

        return await self.store.write("record a permission decision", op)

    async def recent(
        self, delegation_id: str | None = None, limit: int = 50
    ) -> list[ApprovalRecord]:
        """The newest ``limit`` records, newest first; of one delegation when given."""
        limit = max(1, min(limit, MAX_LIMIT))
        where, values = (
            ("", []) if delegation_id is None else (" WHERE delegation_id = ?", [delegation_id])
        )

        def op(conn: sqlite3.Connection) -> list[ApprovalRecord]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM delegation_approvals{where} ORDER BY id DESC LIMIT ?",
                [*values, limit],
            )
            return [_record(r) for r in rows]

        return await self.store.read("list permission decisions", op)


def _record(row: sqlite3.Row | tuple[Any, ...]) -> ApprovalRecord:
    rid, delegation, conversation, session, cli, tool, data, rule, decision, by, asked, done = (
        tuple(row)
    )
    return ApprovalRecord(
        delegation_id=delegation,
        tool=tool,
        input=data,
        decision=decision,
        decided_by=by,
        asked_at=parse_stamp(asked),
        answered_at=parse_stamp(done),
        conversation=conversation,
        session_id=session,
        cli=cli,
        rule=rule,
        id=rid,
    )
