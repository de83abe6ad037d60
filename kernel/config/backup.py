"""``[backup]`` (issue 40): the daily backup Kernel takes by itself, and which it keeps."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from kernel.config.schema import NonNegInt, Section

_TIME = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")


def _time_of_day(value: str) -> str:
    if not _TIME.match(value):
        raise ValueError('a time of day as "HH:MM" (24 hours, general.timezone), e.g. "03:30"')
    return value


BACKUPS_FOLDER = "backups"  # in the data directory, unless [backup] dir says otherwise

TimeOfDay = Annotated[str, AfterValidator(_time_of_day)]


class BackupConfig(Section):
    """``[backup]``: a backup archive every day at ``schedule`` (``general.timezone``)
    into ``dir``; of those, the newest of each of the last ``keep_daily`` days,
    ``keep_weekly`` weeks and ``keep_monthly`` months are kept (a backup may count for
    several), the others deleted. Backups taken by hand and the pre-upgrade snapshots
    are never deleted by the rotation."""

    enabled: bool = Field(True, description="take the daily backup")
    dir: str = Field(
        "", description="where they go; empty: data/backups; a relative path is under data/"
    )
    schedule: TimeOfDay = Field("03:30", description="when, each day, as HH:MM local time")
    keep_daily: NonNegInt = Field(7, description="days whose newest backup is kept")
    keep_weekly: NonNegInt = Field(4, description="weeks whose newest backup is kept")
    keep_monthly: NonNegInt = Field(6, description="months whose newest backup is kept")
