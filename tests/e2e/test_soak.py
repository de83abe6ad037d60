"""The seeded soak, bounded: 60 exchanges with kills, outages, 429s and lost answers at
random points (tests/e2e/soak.py), in one piece on one Kernel and one data folder, so
every step meets what the earlier kills and outages left behind. Nothing lost, no
unmarked duplicate, the database sound after every kill. It is marked ``long``: collected
first, it runs beside the rest of the suite instead of at its end. bench/soak.py runs the
300-exchange version."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.soak import plan, shard_of, soak

pytestmark = [pytest.mark.posix]
# posix: SIGKILL/SIGTERM of the service process

SEED = 15
EXCHANGES = 60


def test_the_plan_is_the_seeded_soak_with_its_faults_and_shards_cover_it() -> None:
    steps = plan(SEED, EXCHANGES)
    assert len(steps) == EXCHANGES
    assert sum(step.kind != "none" for step in steps) >= 10
    shards = [shard_of(steps, (number, 6)) for number in range(6)]
    assert [step for shard in shards for step in shard] == steps


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1800)
async def test_seeded_soak_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    figures = await soak(tmp_path, exchanges=EXCHANGES, seed=SEED)
    report = figures.report()
    assert figures.exchanges == EXCHANGES, report
    assert not figures.stopped_early, report
    assert sum(v for k, v in figures.faults.items() if k != "none") >= 10, report
    assert figures.lost == [], report
    assert figures.unmarked_duplicates == 0, report
    assert figures.integrity_failures == 0, report
