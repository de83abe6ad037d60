"""When a job runs: a cron expression, a fixed interval, or once at a local time, all in
``general.timezone``.

Written by people and models as text (``kernel cron create``, the cron tools):

- ``2025-06-02T09:00`` (or ``2025-06-02 09:00``, seconds optional): once, local time;
- ``every 30m`` / ``every 2h`` / ``every 1d`` / ``every 1h30m`` / ``every 90`` (seconds);
- ``0 9 * * 1``: five cron fields (minute hour day-of-month month day-of-week) or a
  descriptor (``@daily``, ``@hourly``…), evaluated by croniter in the local zone.

The HTTP API takes the same as an object: ``{"type": "once", "at": …}``,
``{"type": "interval", "every": "30m"}`` (or seconds), ``{"type": "cron", "cron": …}``.
Every refusal names the form expected, the time zone and, for a past time, what time it
is now: the cron tools hand it to the model as is. Numbers are ASCII digits; texts longer
than any schedule, and intervals past year 9999, are refused before anything parses them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from kernel.core.errors import CronError
from kernel.core.i18n import t

KINDS = ("cron", "interval", "once")
INVALID = "invalid_cron_schedule"

_EVERY = re.compile(r"^every\s++(.+)$", re.IGNORECASE)
# ASCII digits only: str.isdigit() and \d also take "²" or "٣", which int() refuses or
# reads unlike what the writer saw.
_INTERVAL = re.compile(r"[0-9]+|(?:[0-9]+[dhms])+")
_PART = re.compile(r"(?<![0-9])([0-9]++)([dhms])")  # each number scanned once
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_LOCAL = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2})?$")
# Longer texts are no schedule: refused before a regex or croniter reads them.
TEXT_LIMIT = 64
CRON_LIMIT = 1000
# Far past year 9999 from any start: refused before a datetime overflows on it.
MAX_SECONDS = 10**12
_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


@dataclass(frozen=True, slots=True)
class Rules:
    """What a schedule is checked against."""

    tz: ZoneInfo
    min_interval: int = 60
    run_timeout: float = 600.0  # cron.run_timeout: a job's default bound on one run

    @property
    def tz_name(self) -> str:
        return str(self.tz.key)


@dataclass(frozen=True, slots=True)
class Schedule:
    kind: str  # cron, interval, once
    cron: str = ""
    seconds: int = 0
    at: datetime | None = None  # once: naive, in the local zone

    def next_after(
        self, now: datetime, tz: ZoneInfo, *, anchor: datetime | None = None
    ) -> datetime | None:
        """The first run time after ``now`` (aware, UTC), or None (a once job past its
        time). An interval keeps its phase from ``anchor`` (the last planned run).
        CronError(invalid_cron_schedule) when no run can be planned: a cron expression
        naming a date that never comes (``0 0 31 2 *``), a time past what a datetime
        holds."""
        try:
            return self._next_after(now, tz, anchor)
        except (ValueError, OverflowError):  # croniter's errors are ValueErrors
            if self.kind == "cron":
                raise _unplannable("cron.cron_never", tz, value=self.cron) from None
            raise _unplannable("cron.too_far", tz, value=self.text) from None

    def _next_after(self, now: datetime, tz: ZoneInfo, anchor: datetime | None) -> datetime | None:
        if self.kind == "once":
            assert self.at is not None
            due = self.at.replace(tzinfo=tz).astimezone(UTC)
            return due if due > now else None
        if self.kind == "interval":
            step = timedelta(seconds=self.seconds)
            if anchor is None:
                return now.astimezone(UTC) + step
            if anchor > now:
                return anchor.astimezone(UTC)
            due = anchor + step * int((now - anchor) / step)
            while due <= now:
                due += step
            return due.astimezone(UTC)
        from croniter import croniter

        local = now.astimezone(tz)
        found: datetime = croniter(self.cron, local).get_next(datetime)
        return found.astimezone(UTC)

    def to_dict(self, tz_name: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "timezone": tz_name}
        if self.kind == "once":
            assert self.at is not None
            out["at"] = self.at.isoformat(timespec="minutes" if not self.at.second else "seconds")
        elif self.kind == "interval":
            out["every"] = format_seconds(self.seconds)
            out["seconds"] = self.seconds
        else:
            out["cron"] = self.cron
        return out

    @property
    def text(self) -> str:
        """The text form that parses back to this schedule."""
        if self.kind == "once":
            assert self.at is not None
            return self.at.isoformat(timespec="minutes" if not self.at.second else "seconds")
        if self.kind == "interval":
            return f"every {format_seconds(self.seconds)}"
        return self.cron


def format_seconds(seconds: int) -> str:
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def _unplannable(key: str, tz: ZoneInfo, **values: Any) -> CronError:
    return CronError(INVALID, t(key, tz=tz.key, **values), timezone=tz.key)


def check_plannable(schedule: Schedule, rules: Rules, now: datetime) -> None:
    """CronError naming the fix when no run of ``schedule`` can be planned from ``now``
    (checked when a job is saved, so start-up and the loop never meet it)."""
    schedule.next_after(now, rules.tz)


def _invalid(key: str, rules: Rules, **values: Any) -> CronError:
    return CronError(INVALID, t(key, tz=rules.tz_name, **values), timezone=rules.tz_name)


def _forms(rules: Rules) -> str:
    return t("cron.schedule_forms", tz=rules.tz_name, min=format_seconds(rules.min_interval))


def parse_text(text: str, rules: Rules, now: datetime | None = None) -> Schedule:
    """A schedule from its text form; ``now`` given: a once time must be after it (not
    given: a stored job being loaded, see :func:`cron`)."""
    value = " ".join(str(text).split())
    if not value:
        raise CronError(INVALID, _forms(rules))
    every = _EVERY.match(value)
    if every:
        return interval(every.group(1), rules)
    if value[:1].isdigit() and ("-" in value[:5] or "T" in value):
        return once(value, rules, now)
    if value.startswith("@") or len(value.split(" ")) == 5:
        return cron(value, rules, parsed=now is not None)  # (no ``now``: a stored job)
    raise CronError(INVALID, t("cron.schedule_unknown", value=value[:80]) + " " + _forms(rules))


def interval(value: Any, rules: Rules) -> Schedule:
    if isinstance(value, bool):
        raise _invalid("cron.bad_interval", rules, value=str(value), min=rules.min_interval)
    if isinstance(value, int):
        seconds = value
        shown = str(value) if value <= MAX_SECONDS else f">{MAX_SECONDS}s"
    else:
        raw = value if isinstance(value, str) else str(value)
        text = raw[: TEXT_LIMIT + 1].strip().lower().replace(" ", "")
        shown = text[:40]
        if len(raw) > TEXT_LIMIT or not _INTERVAL.fullmatch(text):
            raise _invalid("cron.bad_interval", rules, value=shown, min=rules.min_interval)
        if text.isascii() and text.isdigit():
            seconds = int(text)
        else:
            seconds = sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))
    if seconds > MAX_SECONDS:
        raise _invalid("cron.too_far", rules, value=f"every {shown}")
    if seconds < rules.min_interval:
        raise _invalid("cron.bad_interval", rules, value=shown, min=rules.min_interval)
    return Schedule("interval", seconds=seconds)


def once(value: Any, rules: Rules, now: datetime | None = None) -> Schedule:
    text = str(value)[: TEXT_LIMIT + 1].strip()
    if len(text) > TEXT_LIMIT or not (text.isascii() and text.isprintable()):
        raise _invalid("cron.bad_once", rules, value=text[:40])
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        parsed = None
    if parsed is None or (parsed.tzinfo is None and not _LOCAL.match(text)):
        raise _invalid("cron.bad_once", rules, value=text[:40])
    if parsed.tzinfo is not None:  # an explicit offset: the same instant, locally
        try:
            parsed = parsed.astimezone(rules.tz).replace(tzinfo=None)
        except OverflowError:
            raise _invalid("cron.too_far", rules, value=text[:40]) from None
    parsed = parsed.replace(microsecond=0)
    if now is not None and parsed.replace(tzinfo=rules.tz) <= now:
        local_now = now.astimezone(rules.tz).strftime("%Y-%m-%dT%H:%M")
        raise _invalid("cron.once_past", rules, value=parsed.isoformat(), now=local_now)
    return Schedule("once", at=parsed)


def cron(value: Any, rules: Rules, *, parsed: bool = True) -> Schedule:
    """A cron schedule; ``parsed`` False (a stored job being loaded, checked when it
    was saved): its shape only, without croniter, which (with dateutil, ~0.9 MiB) is
    then imported only when a cron job is planned (issue 37: a resting Kernel whose
    only cron job is the disabled default never imports it)."""
    raw = str(value)
    text = " ".join(raw[: CRON_LIMIT + 1].split())
    if len(raw) > CRON_LIMIT or not text.isascii() or not text.isprintable():
        raise _invalid("cron.bad_cron", rules, value=text[:80])
    fields = text.split(" ")
    valid = len(fields) == 5 or (len(fields) == 1 and text in _DESCRIPTORS)
    if valid and parsed:
        from croniter import croniter

        valid = croniter.is_valid(text)
    if not valid:
        raise _invalid("cron.bad_cron", rules, value=text[:80])
    return Schedule("cron", cron=text)


def from_dict(data: Any, rules: Rules, now: datetime | None = None) -> Schedule:
    """A schedule from the API's object form (or its text form as a string)."""
    if isinstance(data, str):
        return parse_text(data, rules, now)
    if not isinstance(data, dict):
        raise CronError(INVALID, _forms(rules))
    kind = str(data.get("type") or "").lower()
    if kind == "cron":
        return cron(data.get("cron") or "", rules, parsed=now is not None)
    if kind == "interval":
        value = data.get("every", data.get("seconds", data.get("cron")))
        if value is None:
            raise _invalid("cron.bad_interval", rules, value="", min=rules.min_interval)
        return interval(value, rules)
    if kind in ("once", "at"):
        return once(data.get("at") or "", rules, now)
    raise CronError(INVALID, t("cron.schedule_type", kinds=", ".join(KINDS)) + " " + _forms(rules))
