"""Memories by meaning (issue 39): the vectors of every memory, kept by one background
worker, and each turn's message embedded for recall. Built only when
``[memory.embeddings]`` is configured (the embeddings client and sqlite-vec load then).

The worker embeds what has no vector of the configured model yet, newest first, in
batches (``batch_size``), each retried (``max_retries``) and counted in the usage
ledger (purpose ``embedding``): a save wakes it, and at start it takes up the memories
saved before (the backfill). Its state is the database itself, so a killed Kernel
resumes where it stopped. While the endpoint fails the worker waits ``COOLDOWN`` and
tries again; when ``daily_tokens`` are spent it waits for the next day.

A message's vector waits at most ``timeout``; after a failure the next turns skip it for
``COOLDOWN`` (recall is then FTS5 alone, never slower than the timeout, never an error).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from kernel.config import EmbeddingsConfig
from kernel.core.i18n import t
from kernel.core.usage import Usage
from kernel.memory.embeddings import Embedded, EmbeddingError, EmbeddingsClient
from kernel.store.db import Store
from kernel.store.usage import UsageFilter, UsageStore

log = logging.getLogger(__name__)

LEDGER_NAME = "embeddings"  # the ledger's provider column
COOLDOWN = 60.0  # seconds the vector side rests after the endpoint failed
Paused = Literal["", "budget", "down"]
# Writes one call's row in the usage ledger (the composition root hands the meter's):
# (what it used, whether the server reported it, failed tries before it).
Recorder = Callable[[Usage, bool, int], Awaitable[object]]


def model_key(cfg: EmbeddingsConfig) -> str:
    """What a stored vector is marked with: another model (or size) embeds again."""
    return f"{cfg.model}@{cfg.dimensions}"


class VectorIndex:
    def __init__(
        self,
        store: Store,
        cfg: EmbeddingsConfig,
        *,
        record: Recorder | None = None,
        tz: ZoneInfo | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.client = EmbeddingsClient(cfg)
        self.record = record  # None: not recorded (kernel check, the benchmark)
        self.tz = tz or ZoneInfo("UTC")
        self._now = now or (lambda: datetime.now(self.tz))
        self.model = model_key(cfg)
        self.paused: Paused = ""
        self.cooldown = COOLDOWN
        self._resting_until = 0.0  # time.monotonic() before which queries are skipped
        self._day: date | None = None
        self._spent = 0  # tokens embedded on ``_day``
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._records: set[asyncio.Future[object]] = set()
        self.embedded = 0  # vectors stored by this worker since start

    async def start(self) -> None:
        """Load sqlite-vec (where this Python can), learn today's spending, start the
        worker (which takes up what is not embedded yet)."""
        await self.store.load_vectors()
        if self.cfg.daily_tokens:
            today = self._now().astimezone(self.tz)
            since = datetime.combine(today.date(), datetime.min.time(), self.tz)
            total = await UsageStore(self.store).total(
                UsageFilter(since=since, purpose="embedding")
            )
            self._day, self._spent = today.date(), total.usage.input
        self._worker = asyncio.create_task(self._work(), name="memory-vectors")
        self.poke()

    async def stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        for task in list(self._records):
            with contextlib.suppress(Exception):
                await task
        await self.client.aclose()

    def poke(self) -> None:
        """A memory was saved or changed: the worker looks for what to embed."""
        self._wake.set()

    async def progress(self) -> tuple[int, int]:
        """(memories with a vector of the configured model, memories)."""
        return await self.store.vector_progress(self.model)

    async def status_line(self) -> str:
        """/status full's line: how many memories are embedded, and why it waits."""
        done, total = await self.progress()
        line = t("memory.vectors.progress", model=self.cfg.model, done=done, total=total)
        if self.paused:
            reason = t(f"memory.vectors.reason.{self.paused}")
            line += t("memory.vectors.paused", reason=reason)
        return line

    # ----- a turn's message --------------------------------------------------------------

    async def query(self, text: str) -> list[float] | None:
        """``text``'s unit vector, or None: the endpoint failed, was slower than
        ``timeout`` or rests after a failure, or today's budget is spent."""
        if time.monotonic() < self._resting_until or self._over_budget():
            return None
        try:
            answer = await self.client.embed([text], self.cfg.timeout)
        except EmbeddingError as exc:
            self._resting_until = time.monotonic() + self.cooldown
            log.info("recall by meaning skipped: %s", type(exc).__name__)
            return None
        self._record(answer, 0)
        return answer.vectors[0]

    # ----- the worker --------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                wait = await self._drain()
            except Exception as exc:  # the store's trouble, say: never the worker's end
                log.warning("embedding memories failed: %s", type(exc).__name__)
                wait = self.cooldown
            if wait:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                self._wake.set()

    async def _drain(self) -> float:
        """Embed until nothing is left (0) or a pause: the seconds to wait before trying
        again."""
        while True:
            if self._over_budget():
                self.paused = "budget"
                return self._until_tomorrow()
            rows = await self.store.vector_backlog(self.model, self.cfg.batch_size)
            if not rows:
                self.paused = ""
                return 0.0
            try:
                answer, retries = await self.client.embed_retrying([text for _, text in rows])
            except EmbeddingError as exc:
                self.paused = "down"
                log.warning(
                    "memories not embedded: %s (transient: %s); trying again later",
                    type(exc).__name__,
                    exc.transient,
                )
                return self.cooldown
            self.paused = ""
            self._record(answer, retries)
            pairs = [(i, text, v) for (i, text), v in zip(rows, answer.vectors, strict=True)]
            self.embedded += await self.store.put_vectors(self.model, pairs)

    def _over_budget(self) -> bool:
        if not self.cfg.daily_tokens:
            return False
        today = self._now().astimezone(self.tz).date()
        if today != self._day:
            self._day, self._spent = today, 0
        return self._spent >= self.cfg.daily_tokens

    def _until_tomorrow(self) -> float:
        now = self._now().astimezone(self.tz)
        midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), self.tz)
        return max((midnight - now).total_seconds(), 1.0)

    def _record(self, answer: Embedded, retries: int) -> None:
        tokens = answer.tokens or 0
        if self.cfg.daily_tokens:
            self._over_budget()  # rolls the day over
            self._spent += tokens
        if self.record is None:
            return
        record = self.record(Usage(input=tokens), answer.tokens is not None, retries)
        # A turn's recall does not wait for its record.
        task: asyncio.Future[object] = asyncio.ensure_future(record)
        self._records.add(task)
        task.add_done_callback(self._records.discard)
