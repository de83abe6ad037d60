"""Retention (seed 004 "数据目录与保留"): files Kernel made for a moment — downloads, CLI
outputs, long tool outputs — are deleted once older than ``general.retention_days``.

History and memories live in the database and are kept forever; logs are bounded by
rotation. The mailbox (the inbox and outbox records of issue 15) is pruned with the same
age: rows settled or finished longer ago than ``retention_days`` go; open, waiting and
undelivered rows stay whatever their age. The sweep runs in a thread (it may touch many
files) and never leaves its folders: symbolic links are removed as links, never followed.
The routing decisions log (issue 17) keeps its own age, ``routing.decisions_days``: the
same daily job prunes it, even when ``retention_days = 0`` keeps the files and the mailbox.
The artifacts a sweep deleted (issue 23) are marked removed in the same job, so the
listings say so and a download of one is refused with the reason. The responses
``/v1/responses`` stored (kernel/store/responses.py) go with the mailbox's age.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kernel.core.tasks import TaskSet
from kernel.store.artifacts import ArtifactStore
from kernel.store.decisions import DecisionStore
from kernel.store.mailbox import Mailbox
from kernel.store.responses import ResponseStore

log = logging.getLogger(__name__)

FOLDERS = ("downloads", "cli_outputs", "tool_outputs")
DAY = 86400.0

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(slots=True)
class SweepResult:
    deleted: dict[str, int] = field(default_factory=dict)  # folder → files removed
    folders_removed: int = 0
    failures: int = 0
    skipped: list[str] = field(default_factory=list)  # top folders that are not real dirs
    mailbox_rows: int = 0  # settled inbox and finished outbox rows pruned
    decisions: int = 0  # routing decisions pruned
    responses: int = 0  # stored /v1 responses pruned
    removed: list[str] = field(default_factory=list)  # files deleted, relative to data_dir
    artifacts: int = 0  # artifact rows marked removed

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


def sweep(
    data_dir: Path,
    max_age: float,
    now: float,
    *,
    folders: tuple[str, ...] = FOLDERS,
    stop: threading.Event | None = None,
) -> SweepResult:
    """Delete files (and emptied sub-folders) under ``data_dir/<folder>`` whose mtime is
    more than ``max_age`` seconds before ``now``. Blocking: call it in a thread."""
    result = SweepResult()
    cutoff = now - max_age
    for name in folders:
        top = data_dir / name
        result.deleted[name] = 0
        try:
            mode = os.lstat(top).st_mode
        except FileNotFoundError:
            continue
        except OSError:
            result.failures += 1
            continue
        if not stat.S_ISDIR(mode):
            # A link here could point anywhere (/, the home folder): not ours to clean.
            result.skipped.append(name)
            continue
        _sweep_tree(top, cutoff, name, result, stop)
    return result


def _relative(path: str, top: Path, name: str) -> str:
    return "/".join((name, *Path(os.path.relpath(path, top)).parts))


def _sweep_tree(
    top: Path, cutoff: float, name: str, result: SweepResult, stop: threading.Event | None
) -> None:
    emptied: set[str] = set()  # folders this sweep deleted from (their mtime is now new)
    # Bottom-up, links not followed: a linked folder shows up as an entry, never entered.
    for folder, dirs, files in os.walk(top, topdown=False, followlinks=False):
        for entry in (*files, *dirs):
            if stop is not None and stop.is_set():
                return
            path = os.path.join(folder, entry)
            try:
                info = os.lstat(path)
                if stat.S_ISDIR(info.st_mode):
                    # A real sub-folder goes once empty, if old or emptied by this sweep.
                    old = info.st_mtime < cutoff or path in emptied
                    if old and not os.listdir(path):
                        os.rmdir(path)
                        result.folders_removed += 1
                        emptied.add(folder)
                elif info.st_mtime < cutoff:
                    os.unlink(path)  # a link is removed as a link
                    result.deleted[name] += 1
                    result.removed.append(_relative(path, top, name))
                    emptied.add(folder)
            except FileNotFoundError:
                continue
            except OSError:
                result.failures += 1


class RetentionJob:
    """A daily sweep as one tracked task: started by the Kernel, cancelled at stop.

    ``first_run`` (seconds after start) and ``interval``, ``clock`` and ``sleep`` are
    attributes so a test can run it at once with its own time."""

    def __init__(
        self,
        data_dir: Path,
        days: int,
        *,
        first_run: float = 60.0,
        interval: float = DAY,
        clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep,
        mailbox: Mailbox | None = None,
        decisions: DecisionStore | None = None,
        decisions_days: int = 0,
        artifacts: ArtifactStore | None = None,
        responses: ResponseStore | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.responses = responses  # stored /v1 responses, pruned after ``days``
        self.artifacts = artifacts  # what the sweep deleted is marked removed there
        self.mailbox = mailbox
        self.days = days
        self.decisions = decisions  # pruned after decisions_days (0: kept)
        self.decisions_days = decisions_days
        self.first_run = first_run
        self.interval = interval
        self.clock = clock
        self.sleep = sleep
        self.runs = 0
        self.last: SweepResult | None = None
        self._tasks = TaskSet("retention")
        self._task: asyncio.Task[None] | None = None
        self._stop = threading.Event()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def _prunes_decisions(self) -> bool:
        return self.decisions is not None and self.decisions_days > 0

    def start(self) -> None:
        if (self.days <= 0 and not self._prunes_decisions) or self.running:
            return  # nothing to forget: retention_days = 0 and no decisions log
        self._stop.clear()
        self._task = self._tasks.spawn(self._loop(), "retention")

    async def _mark_artifacts(self, removed: list[str]) -> int:
        """What this sweep deleted, and every listed file that is gone anyway (deleted by
        an earlier sweep whose marking failed or was cut short, or by someone else): the
        listing never says "there" for a file that is not (review R2)."""
        assert self.artifacts is not None
        listed = await self.artifacts.listed_paths()
        data_dir = self.data_dir

        def gone() -> list[str]:
            return [p for p in listed if not os.path.lexists(data_dir / p)]

        return await self.artifacts.mark_removed([*removed, *await asyncio.to_thread(gone)])

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task = None
        self._stop.set()  # a sweep in its thread stops at the next file
        await self._tasks.close()

    async def run_once(self) -> SweepResult:
        if self.days > 0:
            result = await asyncio.to_thread(
                sweep, self.data_dir, self.days * DAY, self.clock(), stop=self._stop
            )
        else:  # retention_days = 0: the files and the mailbox are kept
            result = SweepResult()
        if self.decisions is not None and self.decisions_days > 0:
            before = datetime.fromtimestamp(self.clock() - self.decisions_days * DAY, UTC)
            try:
                result.decisions = await self.decisions.prune(before)
            except Exception as exc:  # tomorrow's sweep tries again
                result.failures += 1
                log.warning("retention: pruning the decisions log failed: %s", type(exc).__name__)
        if self.mailbox is not None and self.days > 0:
            before = datetime.fromtimestamp(self.clock() - self.days * DAY, UTC)
            try:
                result.mailbox_rows = await self.mailbox.prune(before)
            except Exception as exc:  # the files were swept; the rows wait for tomorrow
                result.failures += 1
                log.warning("retention: pruning the mailbox failed: %s", type(exc).__name__)
        if self.responses is not None and self.days > 0:
            before = datetime.fromtimestamp(self.clock() - self.days * DAY, UTC)
            try:
                result.responses = await self.responses.prune(before)
            except Exception as exc:  # get() does not find them meanwhile
                result.failures += 1
                log.warning("retention: pruning /v1 responses failed: %s", type(exc).__name__)
        if self.artifacts is not None:
            try:
                result.artifacts = await self._mark_artifacts(result.removed)
            except Exception as exc:  # the next sweep reconciles what this one could not
                result.failures += 1
                log.warning("retention: marking artifacts removed failed: %s", type(exc).__name__)
        self.runs += 1
        self.last = result
        for name in result.skipped:
            log.warning(
                "retention: data/%s is not a real folder (a link?); not cleaned. "
                "Make it a directory inside the data folder.",
                name,
            )
        counts = ", ".join(f"{k} {v}" for k, v in result.deleted.items())
        if result.mailbox_rows:
            log.info("retention: pruned %d mailbox rows", result.mailbox_rows)
        if result.decisions:
            log.info("retention: pruned %d routing decisions", result.decisions)
        if result.responses:
            log.info("retention: pruned %d stored /v1 responses", result.responses)
        if result.total or result.failures:
            log.info(
                "retention: deleted %d files older than %d days (%s), %d empty folders, "
                "%d failures",
                result.total,
                self.days,
                counts,
                result.folders_removed,
                result.failures,
            )
        else:
            log.debug("retention: nothing older than %d days", self.days)
        return result

    async def _loop(self) -> None:
        await self.sleep(self.first_run)
        while True:
            try:
                await self.run_once()
            except Exception as exc:  # a failed sweep must not end the daily job
                log.warning("retention sweep failed: %s", type(exc).__name__)
            await self.sleep(self.interval)
