"""The seeded soak, bounded: 60 exchanges with kills, outages, 429s and lost answers at
random points (tests/e2e/soak.py), run as six shards of ten exchanges, each on its own
Kernel and data folder, so xdist runs them side by side. Together they are the same 60
seeded steps. Nothing lost, no unmarked duplicate, the database sound after every kill.
bench/soak.py runs the 300-exchange version in one piece."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.soak import plan, shard_of, soak

pytestmark = [pytest.mark.posix]
# posix: SIGKILL/SIGTERM of the service process

SEED = 15
EXCHANGES = 60
SHARDS = 6


def test_the_shards_together_are_the_seeded_soak_with_its_faults() -> None:
    steps = plan(SEED, EXCHANGES)
    shards = [shard_of(steps, (number, SHARDS)) for number in range(SHARDS)]
    assert [step for shard in shards for step in shard] == steps
    assert [len(shard) for shard in shards] == [EXCHANGES // SHARDS] * SHARDS
    assert sum(step.kind != "none" for step in steps) >= 10


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("shard", range(SHARDS))
async def test_seeded_soak_loses_nothing_and_duplicates_nothing(tmp_path: Path, shard: int) -> None:
    figures = await soak(tmp_path, exchanges=EXCHANGES, seed=SEED, shard=(shard, SHARDS))
    report = figures.report()
    assert figures.exchanges == EXCHANGES // SHARDS, report
    assert not figures.stopped_early, report
    assert figures.lost == [], report
    assert figures.unmarked_duplicates == 0, report
    assert figures.integrity_failures == 0, report
