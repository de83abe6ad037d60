"""Fusing recall's two rankings (issue 39): reciprocal-rank fusion of the ranking by
words (FTS5/jieba) and the ranking by meaning (vectors). ``bench/recall.py`` measures
it against each ranking alone and other constants."""

from __future__ import annotations

from collections.abc import Sequence

from kernel.store.db import MemoryRow

RRF_K = 60  # the usual constant (Cormack et al. 2009): a rank's weight is 1 / (RRF_K + rank)


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Ids by their fused score, best first; a tie goes to the id ranked first by the
    earlier ranking."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking, start=1):
            score[memory_id] = score.get(memory_id, 0.0) + 1.0 / (k + rank)
    order = {memory_id: i for i, memory_id in enumerate(dict.fromkeys(_flat(rankings)))}
    return sorted(score, key=lambda memory_id: (-score[memory_id], order[memory_id]))


def fuse(words: Sequence[MemoryRow], meaning: Sequence[MemoryRow], limit: int) -> list[MemoryRow]:
    """The best ``limit`` of both rankings, fused."""
    rows = {row.id: row for row in (*words, *meaning)}
    ids = rrf([[row.id for row in words], [row.id for row in meaning]])
    return [rows[memory_id] for memory_id in ids[:limit]]


def _flat(rankings: Sequence[Sequence[int]]) -> list[int]:
    return [memory_id for ranking in rankings for memory_id in ranking]
