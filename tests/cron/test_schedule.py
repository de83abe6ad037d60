"""Schedules and workflows as written by people and models: what each form means in the
local zone, and what a refusal says."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from kernel.core.errors import CronError
from kernel.core.i18n import get_language, set_language
from kernel.cron import schedule
from kernel.cron.schedule import Rules
from kernel.cron.workflow import parse_workflow
from kernel.plugins import default_plugins

SHANGHAI = Rules(ZoneInfo("Asia/Shanghai"))
NOW = datetime(2025, 12, 31, 23, 30, tzinfo=ZoneInfo("Asia/Shanghai"))


@pytest.fixture(autouse=True)
def english() -> Iterator[None]:
    before = get_language()
    set_language("en")
    yield
    set_language(before)


def test_a_cron_expression_runs_in_local_time_across_the_year_end() -> None:
    weekly = schedule.parse_text("0 9 * * 1", SHANGHAI)
    first = weekly.next_after(NOW, SHANGHAI.tz)
    assert first == datetime(2026, 1, 5, 1, 0, tzinfo=UTC)  # Monday 09:00 +08:00
    assert first is not None
    second = weekly.next_after(first, SHANGHAI.tz)
    assert second is not None and (second - first).days == 7  # no DST: exactly a week
    daily = schedule.parse_text("@daily", SHANGHAI)
    assert daily.next_after(NOW, SHANGHAI.tz) == datetime(2025, 12, 31, 16, 0, tzinfo=UTC)


def test_intervals_and_one_shot_times() -> None:
    every = schedule.parse_text("every 1h30m", SHANGHAI)
    assert (every.kind, every.seconds, every.text) == ("interval", 5400, "every 1h30m")
    anchor = datetime(2025, 12, 31, 14, 0, tzinfo=UTC)
    later = datetime(2025, 12, 31, 18, 10, tzinfo=UTC)
    assert every.next_after(later, SHANGHAI.tz, anchor=anchor) == datetime(
        2025, 12, 31, 18, 30, tzinfo=UTC
    )
    once = schedule.parse_text("2026-01-01 08:00", SHANGHAI, NOW)
    assert (
        once.at == datetime(2026, 1, 1, 8, 0, tzinfo=SHANGHAI.tz).replace(tzinfo=None)
        and once.text == "2026-01-01T08:00"
    )
    assert once.next_after(NOW, SHANGHAI.tz) == datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
    assert once.next_after(datetime(2026, 1, 2, tzinfo=UTC), SHANGHAI.tz) is None
    offset = schedule.parse_text("2026-01-01T00:00:00Z", SHANGHAI, NOW)
    local = datetime(2026, 1, 1, 8, 0, tzinfo=SHANGHAI.tz)
    assert offset.at == local.replace(tzinfo=None)  # the same instant, in local time


@pytest.mark.parametrize(
    ("text", "hints"),
    [
        ("tomorrow 9am", ["not understood", "YYYY-MM-DDTHH:MM", "every 30m", "Asia/Shanghai"]),
        ("every 10s", ["at least 60"]),
        ("2025-12-31T09:00", ["in the past", "2025-12-31T23:30", "Asia/Shanghai"]),
        ("0 25 * * *", ["5 fields", "Asia/Shanghai"]),
        ("2025-13-01T09:00", ["YYYY-MM-DDTHH:MM"]),
    ],
)
def test_refusals_say_what_to_write(text: str, hints: list[str]) -> None:
    with pytest.raises(CronError) as info:
        schedule.parse_text(text, SHANGHAI, NOW)
    assert info.value.code == "invalid_cron_schedule"
    for hint in hints:
        assert hint in str(info.value), (hint, str(info.value))


def test_workflows_linear_or_with_edges() -> None:
    default_plugins()  # the built-in node types register like an extension's
    linear = parse_workflow(
        {"nodes": [{"type": "text_event", "text": "a"}, {"type": "delay", "delay_seconds": 5}]}
    )
    assert [n.type for n in linear.order] == ["text_event", "delay"]
    assert linear.to_dict()["nodes"][0] == {"id": "start", "type": "start"}
    assert [(s, d) for _, s, d in linear.edges] == [("start", "n1"), ("n1", "n2")]
    for bad, hint in (
        ({"nodes": []}, "1 to 50"),
        ({"nodes": [{"type": "start"}, {"type": "start"}]}, "exactly one start"),
        ({"nodes": [{"type": "delay", "delay_seconds": -1}]}, "delay_seconds"),
        ({"nodes": [{"type": "if_event", "if_condition": "mood == happy"}]}, "'mood'"),
        (
            {
                "nodes": [
                    {"id": "s", "type": "start"},
                    {"id": "a", "type": "text_event", "text": "x"},
                    {"id": "b", "type": "text_event", "text": "y"},
                ],
                "edges": [{"source": "s", "target": "a"}],
            },
            "cannot be reached",
        ),
    ):
        with pytest.raises(CronError) as info:
            parse_workflow(bad)
        assert info.value.code == "invalid_cron_workflow" and hint in str(info.value), str(
            info.value
        )


def test_schedules_that_cannot_be_planned_name_the_fix() -> None:
    new_york = Rules(ZoneInfo("America/New_York"))
    cases = [
        ("9999-12-31T23:59", "before the year 9999"),  # UTC-5: past what a datetime holds
        ("0 0 31 2 *", "never fires"),  # croniter.is_valid accepts it
        ("every 99999999999d", "shorter interval"),
    ]
    for text, hint in cases:
        with pytest.raises(CronError) as info:  # when parsed, or when planned
            parsed = schedule.parse_text(text, new_york, NOW)
            schedule.check_plannable(parsed, new_york, NOW)
        assert info.value.code == "invalid_cron_schedule"
        assert hint in str(info.value) and "America/New_York" in str(info.value), str(info.value)


def test_the_default_jobs_schedule_is_a_valid_cron_expression() -> None:
    """The scheduler builds the default job's schedule without checking it (croniter is
    not imported at rest): the constant must be one ``cron`` accepts."""
    from kernel.cron.jobs import DEFAULT_SCHEDULE

    assert schedule.cron(DEFAULT_SCHEDULE, SHANGHAI) == schedule.Schedule("cron", DEFAULT_SCHEDULE)


def test_a_stored_cron_expression_is_checked_in_shape_and_fully_when_planned() -> None:
    """Loading a stored job (no ``now``) checks the expression's shape only; one croniter
    refuses still fails when the job is planned, as a schedule that cannot be planned."""
    stored = schedule.from_dict({"type": "cron", "cron": "61 9 * * *"}, SHANGHAI)
    assert stored.cron == "61 9 * * *"
    with pytest.raises(CronError):
        schedule.from_dict({"type": "cron", "cron": "61 9 * * *"}, SHANGHAI, NOW)
    with pytest.raises(CronError):
        stored.next_after(NOW, ZoneInfo("UTC"))
    with pytest.raises(CronError):  # a wrong shape is refused either way
        schedule.from_dict({"type": "cron", "cron": "9 * *"}, SHANGHAI)
    assert schedule.from_dict("61 9 * * *", SHANGHAI).cron == "61 9 * * *"  # text form
    with pytest.raises(CronError):
        schedule.from_dict("61 9 * * *", SHANGHAI, NOW)
