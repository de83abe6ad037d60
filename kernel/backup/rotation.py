"""Which backups are kept (issue 40): the daily backups' rotation, and the last good
backup's age for ``/status`` and ``kernel check``, read from the archives' names.

An archive is named when it is written (``kernel-20261205T033000Z-daily.kbackup``,
:func:`kernel.backup.archive.archive_name`) and appears under that name only once whole
(it is written under a hidden partial name, then renamed): an archive there is a good
backup, taken at the time its name says.

The rotation keeps, of the archives labelled ``daily``, the newest of each of the last
``keep_daily`` days, ``keep_weekly`` ISO weeks and ``keep_monthly`` months that have one
(days, weeks and months of ``general.timezone``; one archive may count for several), and
always the newest; the others are deleted. An archive of another label (``kernel
backup``'s ``manual``) and the pre-upgrade snapshots are never deleted.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from kernel.backup.format import SUFFIX
from kernel.config import Config

log = logging.getLogger(__name__)

DAILY = "daily"  # the label of the backups Kernel takes by itself
_NAME = re.compile(r"^kernel-([0-9]{8}T[0-9]{6}Z)-([a-z0-9-]+)" + re.escape(SUFFIX) + "$")


@dataclass(frozen=True, slots=True)
class Archive:
    path: Path
    taken: datetime  # UTC, from its name
    label: str


def archives(folder: Path) -> list[Archive]:
    """The whole archives in ``folder`` named as Kernel names them, newest first."""
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        taken = datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        found.append(Archive(folder / name, taken, match.group(2)))
    found.sort(key=lambda a: (a.taken, a.path.name), reverse=True)
    return found


def last_good(folder: Path) -> Archive | None:
    """The newest archive of any label: the last good backup."""
    found = archives(folder)
    return found[0] if found else None


def to_keep(
    taken: Iterable[datetime], tz: tzinfo, *, daily: int, weekly: int, monthly: int
) -> set[datetime]:
    """Which of the moments ``taken`` the rotation keeps."""
    ordered = sorted(taken, reverse=True)
    kept = set(ordered[:1])
    buckets: tuple[tuple[int, Callable[[datetime], Hashable]], ...] = (
        (daily, lambda d: d.date()),
        (weekly, lambda d: d.isocalendar()[:2]),
        (monthly, lambda d: (d.year, d.month)),
    )
    for count, bucket in buckets:
        seen: set[Hashable] = set()
        for moment in ordered:
            key = bucket(moment.astimezone(tz))
            if key in seen:
                continue
            if len(seen) >= count:
                break
            seen.add(key)
            kept.add(moment)
    return kept


def rotate(config: Config, tz: tzinfo) -> tuple[int, int]:
    """Delete the daily archives the rotation does not keep; (kept, deleted). Blocking."""
    cfg = config.backup
    daily = [a for a in archives(config.backups_dir) if a.label == DAILY]
    keep = to_keep(
        (a.taken for a in daily),
        tz,
        daily=cfg.keep_daily,
        weekly=cfg.keep_weekly,
        monthly=cfg.keep_monthly,
    )
    deleted = 0
    for archive in daily:
        if archive.taken in keep:
            continue
        try:
            archive.path.unlink()
            deleted += 1
        except FileNotFoundError:
            continue
        except OSError as exc:  # the next rotation tries again
            log.warning("backup rotation: could not delete an archive: %s", type(exc).__name__)
    return len(daily) - deleted, deleted
