"""The daily backup in a running Kernel (issue 40), on its virtual clock (tests/clock.py):
real archives (kernel/backup/archive.py); a day's failure in the audit trail and told to
the owner once in Telegram; /status names it, and shows the last good backup's age."""

from __future__ import annotations

import errno
import os
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from kernel.audit import kinds
from kernel.backup.rotation import archives
from kernel.core.i18n import t
from tests.clock import ManualClock
from tests.telegram.conftest import Factory

SHANGHAI = ZoneInfo("Asia/Shanghai")  # write_config's general.timezone
DAY = 86400.0


@pytest.mark.posix  # a file where a folder should be: ENOTDIR
async def test_a_failing_backup_is_told_once_and_status_shows_the_age(
    bot: Factory, tmp_path: Path
) -> None:
    """Backups into a folder that cannot be made (a file is in its place) fail each day:
    one notice in the chat for both, both in the audit trail, /status names the problem;
    once the folder can be made, the next run writes one, the problem is gone and
    /status shows its age; past two days without one, /status says so."""
    blocker = tmp_path / "disk"
    blocker.write_text("a file where the backups' parent folder should be")
    blocked = blocker / "backups"
    clock = ManualClock(datetime(2026, 12, 1, 3, 0, tzinfo=SHANGHAI))
    h = await bot(clock=clock, backup={"enabled": True, "dir": str(blocked)})
    job = h.kernel.backups
    notice = t("backup.scheduled_failed", detail=os.strerror(errno.ENOTDIR), path=blocked)

    def told() -> list[str]:
        return [text for text in h.texts() if text == notice]

    # 03:10, catching up (none yet); then the next day's 03:30, not this night's.
    for wait, after in ((600.0, DAY + 1200.0), (DAY + 1200.0, DAY)):
        await clock.wait_for_sleeper(wait, timeout=120)
        clock.advance(wait)
        await clock.wait_for_sleeper(after, timeout=120)  # the run is over
        await h.settle()
    assert told() == [notice]
    events = await h.kernel.audit.events(None)
    failed = [e.data for e in events if e.kind == kinds.BACKUP_FAILED]
    assert failed == [{"label": "daily", "reason": "backup.failed"}] * 2
    status = await h.converse("/status full")
    assert t("status.problem_backup_failing") in status
    assert t("backup.status_none", path=blocked) in status

    blocker.unlink()  # the folder can be made now
    clock.advance(DAY)
    await clock.wait_for_sleeper(DAY, timeout=120)
    assert [a.label for a in archives(blocked)] == ["daily"] and job.runs == 3
    status = await h.converse("/status full")
    assert t("status.problem_backup_failing") not in status
    assert t("backup.status_last", age=t("backup.age_minutes", n=0), path=blocked) in status
    made = [e.data for e in await h.kernel.audit.events(None) if e.kind == kinds.BACKUP_MADE]
    assert len(made) == 1 and made[0] and made[0]["kept"] == 1 and made[0]["size"] > 0

    await job.stop()  # three days without a backup
    clock.advance(3 * DAY)
    status = await h.converse("/status")
    assert t("status.problem_backup_old", age=t("backup.age_days", n=3)) in status
    assert len(told()) == 1
