"""AuditLog: the one way parts of Kernel record what they did (issue 23)."""

from __future__ import annotations

import logging
from typing import Any

from kernel.audit.verify import Verdict, verify_chain
from kernel.core.errors import StoreError
from kernel.store.audit import AuditRow, AuditStore
from kernel.store.database import Database

log = logging.getLogger(__name__)

MAX_VALUE_CHARS = 300  # a string fact longer than this is cut: facts are short


class AuditLog:
    """Appends events to the audit chains and reads and verifies them.

    ``record`` never raises: a consequential action goes on when its audit row cannot
    be written (the store closed, the disk full); the failure is logged by type, once
    per kind of failure in a row, and counted in ``failures``."""

    def __init__(self, db: Database) -> None:
        self.rows = AuditStore(db)
        self.failures = 0
        self._last_failure = ""

    async def record(
        self,
        kind: str,
        *,
        session_id: int | None = None,
        actor: str = "kernel",
        **data: Any,
    ) -> AuditRow | None:
        """Append one event. ``data``: facts only (see kernel/audit/kinds.py); a key
        ``messages`` (stored message ids) becomes references with their content hash."""
        try:
            row = await self.rows.append(
                kind, session_id=session_id, actor=actor, data=_facts(data)
            )
        except (StoreError, ValueError, TypeError) as exc:
            self.failures += 1
            name = type(exc).__name__
            if name != self._last_failure:
                log.warning("audit: an event of kind %s was not recorded (%s)", kind, name)
            self._last_failure = name
            return None
        self._last_failure = ""
        return row

    async def events(
        self, session_id: int | None = None, *, limit: int = 100, before: int | None = None
    ) -> list[AuditRow]:
        return await self.rows.events(session_id=session_id, limit=limit, before=before)

    async def verify(self, session_id: int | None = None) -> Verdict:
        """Verify a session's chain, or with None the global chain (every row)."""
        return verify_chain(await self.rows.chain(session_id))


def _facts(data: dict[str, Any]) -> dict[str, Any]:
    return {key: _fact(value) for key, value in data.items() if value is not None}


def _fact(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS] + "…"
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _fact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_fact(v) for v in value]
    return f"<{type(value).__name__}>"
