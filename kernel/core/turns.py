"""A running turn: the task that produces its events and the queue channels read them from."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

from kernel.core.events import Completed, ErrorEvent, TurnEvent
from kernel.core.rows import RowId
from kernel.core.usage import Usage


class Turn:
    """Handle on one turn. Iterate it for events; the last one is Completed or ErrorEvent."""

    def __init__(self, conversation: str) -> None:
        # Unique across restarts: a stale id from before must never cancel a new turn.
        self.id = f"turn-{uuid.uuid4().hex[:16]}"
        self.conversation = conversation
        self._queue: asyncio.Queue[TurnEvent] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.reply = ""
        self.final: Completed | ErrorEvent | None = None
        # The stored final answer (what 🔁 retries): a RowId while it is being stored
        # (its write queued, the reply's outbox row goes in the same hop: issue 37).
        self.answer_id: int | RowId | None = None
        # The model's final answer is in hand (only storing it remains): a draft of it
        # would be replaced at once, so none goes (kernel/telegram/drafts.py).
        self.reply_whole = False
        self.session_id: int | None = None  # the session it runs in, once known
        self.placed = asyncio.Event()  # set when session_id is known
        self.started = False  # set by the runner once it holds the turn
        self.cancel_requested = False
        # What its model calls used so far (/status shows it while it runs).
        self.usage = Usage()
        self.cost = 0.0  # known costs
        self.unpriced = 0  # calls whose cost is unknown
        self.calls = 0

    def count(self, usage: Usage, cost: float | None) -> None:
        """Add one model call's usage and cost (None: unknown)."""
        self.usage += usage
        self.calls += 1
        if cost is None:
            self.unpriced += 1
        else:
            self.cost += cost

    def spend(self) -> dict[str, object]:
        """The turn's usage as events and the sidecar show it."""
        return {
            **self.usage.as_json(),
            "calls": self.calls,
            "cost": round(self.cost, 6),
            "unpriced_calls": self.unpriced,
        }

    def place(self, session_id: int) -> None:
        """The session the turn runs in is known (created, for a fresh conversation)."""
        self.session_id = session_id
        self.placed.set()

    def attach(self, task: asyncio.Task[None]) -> None:
        self.task = task
        task.add_done_callback(self._ensure_final)

    def _ensure_final(self, task: asyncio.Task[None]) -> None:
        # Safety net: whatever ended the task, readers always get a last event.
        if self.final is None:
            self.emit(Completed(0, "", cancelled=True))

    def emit(self, event: TurnEvent) -> None:
        if self.final is not None:
            return
        if isinstance(event, (Completed, ErrorEvent)):
            self.final = event
            if isinstance(event, Completed):
                self.reply = event.reply
        self.deliver(event)

    def deliver(self, event: TurnEvent) -> None:
        """Hand ``event`` to whoever reads the turn (its iterator, by default)."""
        self._queue.put_nowait(event)

    @property
    def done(self) -> bool:
        return self.task is not None and self.task.done()

    def cancel(self) -> bool:
        """Ask the turn to stop; it still emits its final event and leaves history valid.

        Asking twice does not interrupt the clean-up of the first request. A turn not yet
        started stops right after it has stored the owner's message.
        """
        if self.task is None or self.task.done():
            return False
        if not self.cancel_requested:
            self.cancel_requested = True
            if self.started:
                self.task.cancel()
        return True

    async def wait(self) -> Completed | ErrorEvent:
        """Drain the events and return the final one."""
        async for _ in self:
            pass
        assert self.final is not None
        return self.final

    async def __aiter__(self) -> AsyncIterator[TurnEvent]:
        while True:
            event = await self._queue.get()
            yield event
            if isinstance(event, (Completed, ErrorEvent)):
                return
