"""Fusing recall's two rankings (issue 39): reciprocal-rank fusion of the ranking by
words (FTS5/jieba) and the ranking by meaning (vectors). ``bench/recall.py`` measures
it against each ranking alone and other constants."""

from __future__ import annotations

from collections.abc import Sequence

from kernel.store.db import MemoryRow

# Measured on bench/recall.py's corpus against RRF with k = 60 (Cormack et al. 2009) and
# equal weights, and the vector ranking alone (bench/README.md, issue 39): a rank's
# weight is WEIGHT / (RRF_K + rank), the words' ranking counting less than the vectors'
# (an OR of a message's words matches many memories loosely).
RRF_K = 10
WORDS_WEIGHT = 0.3


def rrf(
    rankings: Sequence[Sequence[int]], k: int = RRF_K, weights: Sequence[float] = ()
) -> list[int]:
    """Ids by their fused score (each ranking's ``1 / (k + rank)``, times its weight:
    1 unless ``weights`` says), best first; a tie goes to the id ranked first by the
    earlier ranking."""
    score: dict[int, float] = {}
    for n, ranking in enumerate(rankings):
        weight = weights[n] if n < len(weights) else 1.0
        for rank, memory_id in enumerate(ranking, start=1):
            score[memory_id] = score.get(memory_id, 0.0) + weight / (k + rank)
    order = {memory_id: i for i, memory_id in enumerate(dict.fromkeys(_flat(rankings)))}
    return sorted(score, key=lambda memory_id: (-score[memory_id], order[memory_id]))


def fuse(words: Sequence[MemoryRow], meaning: Sequence[MemoryRow], limit: int) -> list[MemoryRow]:
    """The best ``limit`` of both rankings, fused (``meaning``: only those close enough,
    so that a turn gets no more than the top-k it got before, and no padding)."""
    rows = {row.id: row for row in (*words, *meaning)}
    ids = rrf([[row.id for row in words], [row.id for row in meaning]], weights=(WORDS_WEIGHT,))
    return [rows[memory_id] for memory_id in ids[:limit]]


def _flat(rankings: Sequence[Sequence[int]]) -> list[int]:
    return [memory_id for ranking in rankings for memory_id in ranking]
