"""The daily backup (issue 40): Kernel's own job on its clock (a virtual one here, driven
by hand: tests/clock.py) rotating its archives over a simulated month; the last good
backup's age in ``kernel check``. A failure told once and /status:
tests/telegram/test_backup_notice.py."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from kernel.backup.archive import archive_name
from kernel.backup.rotation import archives
from kernel.backup.schedule import BackupJob
from kernel.check import backup_line
from kernel.check.line import CheckLine
from kernel.config import Config, load_config
from kernel.config.backup import BACKUPS_FOLDER
from kernel.core.i18n import t
from kernel.store.db import Store
from tests.clock import ManualClock
from tests.conftest import write_config

SHANGHAI = ZoneInfo("Asia/Shanghai")  # write_config's general.timezone
DAY = 86400.0


def empty_archive(config: Config, folder: Path, now: datetime) -> tuple[Path, int]:
    """An archive named as the writer names it, without its bytes (writing 45 real ones
    costs seconds; the writer itself: test_backup.py, and the daily backup in Telegram:
    tests/telegram/test_backup_notice.py)."""
    path = folder / archive_name("daily", now)
    path.write_bytes(b"")
    return path, 0


async def test_rotation_keeps_the_right_set_over_a_simulated_month(tmp_path: Path) -> None:
    """45 days of daily backups at 03:30 with 7 daily, 4 weekly, 6 monthly: the last 7
    days, the newest of the 4 last weeks and of each month stay, and so do a backup taken
    by hand and a pre-upgrade snapshot."""
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", backup={"enabled": True})
    config = load_config(path, env={}, require_telegram=False)
    store = Store(config.db_path)
    await store.start()
    folder = config.data_dir / BACKUPS_FOLDER
    folder.mkdir()
    start = datetime(2026, 11, 1, 3, 20, tzinfo=SHANGHAI)
    manual = folder / archive_name("manual", start - timedelta(days=3))
    snapshot = folder / "pre-upgrade-v20-to-v21-20261020T000000Z.db"
    for kept in (manual, snapshot):
        kept.write_bytes(b"kept")
    clock = ManualClock(start)
    job = BackupJob(config, clock, store, make=empty_archive)
    job.start()
    try:
        wait = 600.0  # none yet: the first one 10 minutes after start (03:30 here)
        for _ in range(45):
            await clock.wait_for_sleeper(wait, timeout=120)
            clock.advance(wait)
            wait = DAY
        await clock.wait_for_sleeper(DAY, timeout=120)  # the 45th written and rotated
    finally:
        await job.stop()
        await store.close()

    daily = [a.taken.astimezone(SHANGHAI).date() for a in archives(folder) if a.label == "daily"]
    expected = [date(2026, 12, d) for d in (15, 14, 13, 12, 11, 10, 9)]  # the last 7 days
    expected += [date(2026, 12, 6), date(2026, 11, 30), date(2026, 11, 29)]  # weeks, months
    assert daily == expected
    assert manual.exists() and snapshot.exists()
    assert job.runs == 45


def test_kernel_check_warns_past_two_days(tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", backup={"enabled": True})
    config = load_config(path, env={}, require_telegram=False)
    folder = config.data_dir / BACKUPS_FOLDER
    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    assert backup_line(config, now) == CheckLine(
        "backup", "warn", t("check.backup_none", path=folder)
    )
    folder.mkdir(parents=True)
    old = folder / archive_name("daily", now - timedelta(days=2, hours=1))
    old.write_bytes(b"")
    assert backup_line(config, now) == CheckLine(
        "backup", "warn", t("check.backup_old", age=t("backup.age_days", n=2), path=old)
    )
    new = folder / archive_name("manual", now - timedelta(hours=5))
    new.write_bytes(b"")
    assert backup_line(config, now) == CheckLine(
        "backup", "ok", t("check.backup_ok", age=t("backup.age_hours", n=5), path=new)
    )
