"""AuditLog: the one way parts of Kernel record what they did (issue 23)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial
from pathlib import Path
from typing import Any

from kernel.audit.anchor import anchor_target, load_anchor, write_anchor
from kernel.audit.key import AuditKey, BadKey, Opened, open_key, read_key
from kernel.audit.verify import Verdict, verify_chain
from kernel.core.errors import StartupError, StoreError
from kernel.core.fileio import os_cause
from kernel.core.i18n import t
from kernel.store.audit import AuditRow, AuditStore, read_chain, read_only
from kernel.store.database import Database, RowId

log = logging.getLogger(__name__)

MAX_VALUE_CHARS = 300  # a string fact longer than this is cut: facts are short


class AuditLog:
    """Appends events to the audit chains and reads and verifies them.

    ``record`` never raises: a consequential action goes on when its audit row cannot
    be written (the store closed, the disk full); the failure is logged by type, once
    per kind of failure in a row, and counted in ``failures``.

    ``anchor``: the file keeping the global chain's end outside the database
    (kernel/audit/anchor.py), written at most every ``anchor_every`` seconds and at
    ``close()``; None (tests, a bare Agent): no anchor.

    :meth:`start` opens (or makes) the audit key (kernel/audit/key.py): from then on
    the rows and the anchor are sealed with it. Without it (tests): plain SHA-256."""

    def __init__(
        self, db: Database, *, anchor: Path | None = None, anchor_every: float = 1.0
    ) -> None:
        self.rows = AuditStore(db)
        self.anchor = anchor
        self.anchor_every = anchor_every
        self.failures = 0
        self._last_failure = ""
        self._pending: tuple[int, str] | None = None  # the end not yet in the anchor
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        self._stuck = False  # the record no longer reaches the anchor: never moved again
        self._writing = False  # a write in its thread: awaited at close, never cancelled
        self.key: AuditKey | None = None
        self._seal_next = False  # the next anchor write may make a sealed anchor anew
        self._noting: set[asyncio.Future[AuditRow | None]] = set()  # note()'s rows not yet written

    async def start(self, key_file: Path) -> None:
        """Open the audit key at ``key_file`` (made, 0600, when there is none) before
        anything is recorded; StartupError when the file is there but not a key. A key
        that cannot be made (a read-only config folder) leaves the record unkeyed, said
        in the log."""
        try:
            try:
                opened = await self._open_key(key_file)
            except FileExistsError:  # made meanwhile by another start: read it
                opened = await self._open_key(key_file)
        except OSError as exc:
            log.warning(
                "audit: no audit key could be made at %s (%s): the record is not sealed;"
                " see README, What did it do?",
                key_file,
                os_cause(exc),
            )
            return
        self._use(opened)
        if opened.row is not None and self.anchor is not None:
            self._pending = (opened.row.id, opened.row.ghash)
            self._seal_next = True
            await self._flush()

    async def _open_key(self, key_file: Path) -> Opened:
        try:
            found = await asyncio.to_thread(read_key, key_file)
        except BadKey as exc:
            raise StartupError(t("audit.key_bad", path=key_file, detail=str(exc))) from None
        at = self.rows.db._now()
        return await self.rows.db.write(
            "audit key", lambda conn: open_key(conn, key_file, found, at)
        )

    def _use(self, opened: Opened) -> None:
        self.key = opened.key
        self.rows.db.audit_key = opened.key.key
        if opened.made and opened.keyed_before is not None:
            log.warning(
                "audit: the audit key file was missing while the record is sealed from #%d:"
                " a new key was made; the rows sealed with the old one cannot be proven",
                opened.keyed_before,
            )
        start = opened.key.start
        if start is not None and not opened.made and opened.head < start:
            log.warning(
                "audit: the record ends at #%d, before #%d where its key began: it was cut"
                " or wiped; run `kernel audit verify`",
                opened.head,
                start,
            )

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
            self._failed(kind, exc)
            return None
        self._appended(row)
        return row

    def note(
        self,
        kind: str,
        *,
        session_id: int | None = None,
        actor: str = "kernel",
        linger: float | None = None,
        after: RowId | None = None,
        **data: Any,
    ) -> None:
        """:meth:`record` without waiting for the row: it is queued behind every store
        call made so far and written, in that order, with the next hand-off to the
        database thread and whatever is queued meanwhile (one hop for a turn phase's
        records; ``linger``: how long it may wait for one, ``Database.write_soon``;
        ``after``: kept only if the write filling that row made it). Failures are logged
        and counted as ``record``'s."""
        try:
            future = self.rows.append_soon(
                kind,
                session_id=session_id,
                actor=actor,
                data=_facts(data),
                linger=linger,
                after=after,
            )
        except (StoreError, ValueError, TypeError) as exc:
            self._failed(kind, exc)
            return
        self._noting.add(future)
        future.add_done_callback(lambda done: self._noted(kind, done))

    def _noted(self, kind: str, done: asyncio.Future[AuditRow | None]) -> None:
        self._noting.discard(done)
        if done.cancelled():
            return
        exc = done.exception()
        if exc is None:
            row = done.result()
            if row is not None:  # None: not kept (``after``)
                self._appended(row)
        else:
            self._failed(kind, exc)

    async def settled(self) -> None:
        """Wait until every row :meth:`note` queued is written (or failed): a waited
        call takes the rows still waiting for company along (a tidy row's, up to a
        second) instead of waiting out their bound."""
        if self._noting:
            with contextlib.suppress(StoreError):
                await self.rows.db.read("audit settled", lambda conn: None)
        if self._noting:
            await asyncio.wait(set(self._noting))

    def _failed(self, kind: str, exc: BaseException) -> None:
        self.failures += 1
        name = type(exc).__name__
        if name != self._last_failure:
            log.warning("audit: an event of kind %s was not recorded (%s)", kind, name)
        self._last_failure = name

    def _appended(self, row: AuditRow) -> None:
        self._last_failure = ""
        if self.anchor is not None:
            self._pending = (row.id, row.ghash)
            if not self._closed and (self._flusher is None or self._flusher.done()):
                self._flusher = asyncio.create_task(self._flush_later(), name="audit-anchor")

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.anchor_every)
        await self._flush()

    async def _flush(self) -> None:
        while self._pending is not None and self.anchor is not None and not self._stuck:
            seq, value = self._pending
            self._pending = None
            path, key, anew = self.anchor, self.rows.db.audit_key, self._seal_next
            # Checked in one job on the database thread, once what came before committed.
            stays, at, link = await self.rows.db.outside(
                "audit anchor check", partial(anchor_target, path=path, key=key, anew=anew)
            )
            if stays:
                self._stick(stays)
                return
            if not at:
                continue
            self._writing = True
            try:
                await asyncio.to_thread(write_anchor, path, at, link, key)
                self._seal_next = False
            except OSError as exc:
                # Kept for the next write; a full disk must not stop the recording.
                if self._pending is None:
                    self._pending = (seq, value)
                log.warning("audit: the anchor was not written (%s)", type(exc).__name__)
                return
            finally:
                self._writing = False
            if self._pending is not None and self._pending[0] <= at:
                self._pending = None  # written in the same hop, before the check: anchored

    def _stick(self, what: str) -> bool:
        self._stuck = True
        log.warning(
            "audit: the anchor (data/audit.anchor) is %s; it is not rewritten: run"
            " `kernel audit verify`",
            what,
        )
        return False

    async def close(self) -> None:
        """Write the anchor's last end now (at stop, before the database closes)."""
        await self.settled()
        self._closed = True
        flusher, self._flusher = self._flusher, None
        if flusher is not None and not flusher.done():
            if not self._writing:
                flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
        await self._flush()

    async def events(
        self, session_id: int | None = None, *, limit: int = 100, before: int | None = None
    ) -> list[AuditRow]:
        return await self.rows.events(session_id=session_id, limit=limit, before=before)

    async def verify(self, session_id: int | None = None) -> Verdict:
        """Verify a session's chain, or with None the global chain (every row) and the
        anchor kept outside the database. In a thread, on its own read-only connection:
        a long chain neither blocks the loop nor holds up the database thread's writes.
        The anchor is read first, so it can only lag the snapshot, never lead it."""
        await self.settled()  # on another connection: the rows noted so far are in
        anchor = self.anchor if session_id is None else None
        path = self.rows.db.path
        key = self.key

        def check() -> Verdict:
            seen = load_anchor(anchor) if anchor is not None else None
            chain = read_only(path, lambda conn: read_chain(conn, session_id))
            return verify_chain(chain, seen, key=key, anchored=anchor is not None)

        return await asyncio.to_thread(check)


def _facts(data: dict[str, Any]) -> dict[str, Any]:
    return {key: _fact(value) for key, value in data.items() if value is not None}


def _fact(value: Any) -> Any:
    if isinstance(value, RowId):  # filled when the row is appended (store/audit.py)
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS] + "…"
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _fact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_fact(v) for v in value]
    return f"<{type(value).__name__}>"
