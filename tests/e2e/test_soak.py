"""The seeded soak, bounded: 60 exchanges with kills, outages, 429s and lost answers at
random points (tests/e2e/soak.py). Nothing lost, no unmarked duplicate, the database
sound after every kill. bench/soak.py runs the 300-exchange version."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.soak import soak

pytestmark = [pytest.mark.slow, pytest.mark.posix]
# posix: SIGKILL/SIGTERM of the service process

SEED = 15
EXCHANGES = 60


@pytest.mark.timeout(1800)
async def test_seeded_soak_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    figures = await soak(tmp_path, exchanges=EXCHANGES, seed=SEED)
    report = figures.report()
    assert not figures.stopped_early, report
    assert sum(v for k, v in figures.faults.items() if k != "none") >= 10, report
    assert figures.lost == [], report
    assert figures.unmarked_duplicates == 0, report
    assert figures.integrity_failures == 0, report
