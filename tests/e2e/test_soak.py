"""The seeded soak, bounded: 60 exchanges with kills, outages, 429s and lost answers at
random points (tests/e2e/soak.py). It runs as two shards of 30 steps, each in one piece on
its own Kernel and data folder, so every step meets what the shard's earlier kills and
outages left behind; each shard meets ten faults or more, and the two together are the
whole seeded plan. Nothing lost, no unmarked duplicate, the database sound after every
kill. Marked ``long``: collected first, the two shards run beside each other and the rest
of the suite (one piece took 6.5 minutes, longer than the rest of the suite together).
bench/soak.py runs the 300-exchange version in one piece."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.soak import plan, shard_of, soak

pytestmark = [pytest.mark.posix]
# posix: SIGKILL/SIGTERM of the service process

SEED = 15
EXCHANGES = 60
SHARDS = 2


def test_the_plan_is_the_seeded_soak_with_its_faults_and_shards_cover_it() -> None:
    steps = plan(SEED, EXCHANGES)
    assert len(steps) == EXCHANGES
    assert sum(step.kind != "none" for step in steps) >= 10
    for count in (SHARDS, 6):
        shards = [shard_of(steps, (number, count)) for number in range(count)]
        assert [step for shard in shards for step in shard] == steps


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("shard", range(SHARDS))
async def test_seeded_soak_loses_nothing_and_duplicates_nothing(shard: int, tmp_path: Path) -> None:
    steps = shard_of(plan(SEED, EXCHANGES), (shard, SHARDS))
    figures = await soak(tmp_path, exchanges=EXCHANGES, seed=SEED, shard=(shard, SHARDS))
    report = figures.report()
    assert figures.exchanges == len(steps), report
    assert not figures.stopped_early, report
    assert figures.faults == Counter(step.kind for step in steps), report
    assert sum(v for k, v in figures.faults.items() if k != "none") >= 10, report
    assert figures.lost == [], report
    assert figures.unmarked_duplicates == 0, report
    assert figures.integrity_failures == 0, report
