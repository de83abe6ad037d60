"""The daily backup (issue 40): Kernel's own periodic work, like the retention sweep — one
tracked task on Kernel's clock (tests drive it with a virtual one), started with the
Kernel and cancelled at its stop, when ``[backup] enabled`` (the default).

Each day at ``[backup] schedule`` (``general.timezone``) it writes one archive labelled
``daily`` into ``[backup] dir`` (:func:`kernel.backup.archive.create_backup`, in a
thread), then rotates the daily archives (:mod:`kernel.backup.rotation`). When the last
good backup is more than a day old at start (or there is none), one is taken
:data:`CATCH_UP` seconds after the start instead of waiting for the schedule.

Every run is in the audit trail (``backup.made``, ``backup.failed``: facts only, sizes,
counts, a reason code). A failure is told to the owner once (through the notice channel
Kernel is given: Telegram's durable outbox), not again until a backup succeeded; while
it lasts, ``/status`` names it (the setting :data:`FAILING`).

Nothing here imports the archive writer (or ``cryptography``) until a backup runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from kernel.audit import AuditLog
from kernel.audit import kinds as audit_kinds
from kernel.backup.rotation import DAILY, last_good, rotate
from kernel.config import Config
from kernel.core.clock import Clock, sleep_unless
from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.store.settings import SettingTables

log = logging.getLogger(__name__)

CATCH_UP = 600.0  # seconds after start a missed (or the first) daily backup runs
DAY = 86400.0
STALE = 2 * DAY  # past this, /status and kernel check warn
FAILING = "backup.failing"  # setting: the reason code of the failure told; gone once one works

Made = tuple[Path, int]  # the archive and its size
# The seam to the archive writer: (config, folder, now) -> the archive written. Blocking.
MakeBackup = Callable[[Config, Path, datetime], Made]
Notify = Callable[[str], Awaitable[None]]


def make_daily(config: Config, folder: Path, now: datetime) -> Made:
    """One ``daily`` archive in ``folder`` (the real writer, imported when it runs)."""
    from kernel.backup.archive import create_backup
    from kernel.backup.format import BackupError

    try:  # a folder: create_backup names the archive in it (a path that is none, a file)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        detail = exc.strerror or type(exc).__name__
        raise BackupError("backup.failed", path=folder, detail=detail) from exc
    made = create_backup(config, folder, label=DAILY, now=now)
    return made.path, made.size


class BackupJob:
    """The daily backup as one tracked task; ``make`` is the archive writer (tests give
    one that fails)."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        settings: SettingTables,
        *,
        audit: AuditLog | None = None,
        notify: Notify | None = None,
        make: MakeBackup = make_daily,
    ) -> None:
        self.config = config
        self.clock = clock
        self.settings = settings
        self.audit = audit
        self.notify = notify
        self.make = make
        self.tz: tzinfo = ZoneInfo(config.general.timezone)
        self.runs = 0
        self._tasks = TaskSet("backup")
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def folder(self) -> Path:
        return self.config.backups_dir

    def start(self) -> None:
        if not self.config.backup.enabled or self._task is not None:
            return
        self._stopping.clear()
        self._task = self._tasks.spawn(self._loop(), "backup")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task = None
        self._stopping.set()
        await self._tasks.close()

    def until_next(self, now: datetime, *, gap: float = 0.0) -> float:
        """Seconds from ``now`` to the first ``[backup] schedule`` time at least ``gap``
        seconds away."""
        hour, minute = (int(part) for part in self.config.backup.schedule.split(":"))
        local = (now + timedelta(seconds=gap)).astimezone(self.tz)
        target = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if target <= local:
            target = (target + timedelta(days=1)).replace(hour=hour, minute=minute)
        return max(1.0, (target.astimezone(UTC) - now.astimezone(UTC)).total_seconds())

    async def _first_wait(self) -> float:
        now = self.clock.now()
        last = await asyncio.to_thread(last_good, self.folder)
        if last is None or (now - last.taken).total_seconds() > DAY:
            return min(CATCH_UP, self.until_next(now))
        return self.until_next(now)

    async def _loop(self) -> None:
        wait = await self._first_wait()
        while not await sleep_unless(self.clock, wait, self._stopping):
            try:
                await self.run_once()
            except Exception as exc:  # a failed run must not end the daily job
                log.warning("backup run failed: %s", type(exc).__name__)
            # A backup caught up at start is not followed by another that same night.
            wait = self.until_next(self.clock.now(), gap=DAY / 2)

    async def run_once(self) -> bool:
        """One backup and its rotation; whether it was written."""
        self.runs += 1
        now = self.clock.now()
        try:
            path, size = await asyncio.to_thread(self.make, self.config, self.folder, now)
        except Exception as exc:
            await self._failed(exc)
            return False
        kept, deleted = await asyncio.to_thread(rotate, self.config, self.tz)
        log.info("backup written (%d bytes); rotation kept %d, deleted %d", size, kept, deleted)
        await self._record(audit_kinds.BACKUP_MADE, size=size, kept=kept, deleted=deleted)
        await self.settings.delete_setting(FAILING)
        return True

    async def _failed(self, exc: Exception) -> None:
        reason = getattr(exc, "key", None) or type(exc).__name__
        log.warning("daily backup failed: %s", reason)
        await self._record(audit_kinds.BACKUP_FAILED, reason=reason)
        if await self.settings.get_setting(FAILING) is not None:
            return  # told already: once until a backup works again
        await self.settings.set_setting(FAILING, reason)
        if self.notify is None:
            return
        try:
            text = t("backup.scheduled_failed", detail=_cause(exc), path=self.folder)
            await self.notify(text)
        except Exception as notice:  # the owner's channel is down: /status names it
            log.warning("could not tell the owner of the failed backup: %s", type(notice).__name__)

    async def _record(self, kind: str, **facts: Any) -> None:
        if self.audit is not None:
            await self.audit.record(kind, actor="kernel", label=DAILY, **facts)


def _cause(exc: BaseException) -> str:
    """What went wrong in a few words: the system's, when a file operation failed (the
    writer's own line names a command-line fix)."""
    for error in (exc, exc.__cause__):
        if isinstance(error, OSError) and error.strerror:
            return error.strerror
    return str(exc)


async def backup_state(
    config: Config, settings: SettingTables, now: datetime
) -> tuple[float | None, bool]:
    """(the last good backup's age in seconds or None, whether a daily one is failing)."""
    last = await asyncio.to_thread(last_good, config.backups_dir)
    failing = await settings.get_setting(FAILING) is not None
    return (None if last is None else (now - last.taken).total_seconds()), failing


def age_words(seconds: float) -> str:
    """An age in the owner's words: minutes, hours or days."""
    minutes = max(0, int(seconds // 60))
    if minutes < 60:
        return t("backup.age_minutes", n=minutes)
    if minutes < 48 * 60:
        return t("backup.age_hours", n=minutes // 60)
    return t("backup.age_days", n=minutes // (24 * 60))
