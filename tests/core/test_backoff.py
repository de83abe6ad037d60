"""The one backoff: delays grow by the factor to the cap, jitter stays in its bounds and
under the cap, a server's Retry-After wins, and Retrying sleeps on the injected clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kernel.core.backoff import Backoff, Retrying
from tests.clock import InstantClock


def test_delays_grow_by_the_factor_up_to_the_cap() -> None:
    backoff = Backoff(first=1.0, cap=60.0)
    assert [backoff.delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    slow = Backoff(first=1.0, cap=30.0, factor=1.5)
    assert [round(slow.delay(n), 3) for n in range(1, 5)] == [1.0, 1.5, 2.25, 3.375]


def test_a_very_long_run_of_failures_stays_at_the_cap() -> None:
    assert Backoff(first=0.5, cap=300.0).delay(100_000) == 300.0


def test_jitter_stays_within_its_fraction_and_under_the_cap() -> None:
    backoff = Backoff(first=10.0, cap=15.0, jitter=0.2)
    assert backoff.delay(1, rand=lambda: 0.0) == pytest.approx(8.0)
    assert backoff.delay(1, rand=lambda: 0.999999) == pytest.approx(12.0, abs=1e-4)
    assert backoff.delay(2, rand=lambda: 0.999999) == 15.0  # 20 * 1.2 capped
    assert backoff.delay(2, rand=lambda: 0.0) == pytest.approx(12.0)  # 20 capped to 15, * 0.8


def test_retry_after_overrides_whatever_the_cap() -> None:
    backoff = Backoff(first=1.0, cap=5.0, jitter=0.2)
    assert backoff.delay(3, retry_after=42.0) == 42.0
    assert backoff.delay(1, retry_after=-3.0) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"first": -1, "cap": 1},
        {"first": 2, "cap": 1},
        {"first": 1, "cap": 2, "factor": 0.5},
        {"first": 1, "cap": 2, "jitter": 1.0},
    ],
)
def test_nonsense_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)


async def test_retrying_sleeps_on_the_injected_clock_and_starts_over_after_success() -> None:
    clock = InstantClock(datetime(2026, 1, 1, tzinfo=UTC))
    retrying = Retrying(Backoff(first=1.0, cap=4.0), clock)
    for _ in range(4):
        await retrying.pause()
    assert clock.slept == [1.0, 2.0, 4.0, 4.0]
    assert retrying.last_delay == 4.0
    retrying.succeeded()
    assert (retrying.failures, retrying.last_delay) == (0, 0.0)
    assert await retrying.pause(retry_after=7.0) == 7.0
    assert await retrying.pause() == 2.0  # the failure count went on under the override
