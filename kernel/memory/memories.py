"""The memory service every caller uses (tools, commands, the agent's recall and
``<remember>`` tags): tokens with jieba, rows and the full-text index in the store.

Search is FTS5 with BM25 rank when SQLite has FTS5 (detected at start), else LIKE; an
FTS5 search that finds nothing tries LIKE over the most recent memories too (substrings
find what whole tokens miss).
jieba loads on the first operation that needs tokens (search, recall, add with FTS5),
never at start; listing, counting and deleting do not need it. Memories that are not in the
full-text index yet (those there before the FTS5 migration, or added while FTS5 was
unavailable) are indexed then, in batches, before the first search.

With ``[memory.embeddings]`` (issue 39) a :class:`~kernel.memory.vectors.VectorIndex` is
attached (``vectors``): a save wakes it, and recall fuses the ranking by words with the
ranking by meaning (kernel/memory/fusion.py); without one, or while it cannot answer
within its timeout, recall is exactly the words' recall.

Scopes (kernel/memory/scopes.py): a memory is added to one scope; every read takes
``scopes``, the scopes the reader may see (None = all of them, as for the owner's own
tools before issue 18), and the store filters by them in SQL.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kernel.memory.fusion import fuse
from kernel.memory.remember import Fact
from kernel.memory.scopes import GLOBAL, check_scope
from kernel.memory.tokens import Tokenizer, fts_query
from kernel.store.db import MemoryRow, Store
from kernel.store.migrations import memory_key
from kernel.store.vectors import Ranked

if TYPE_CHECKING:
    from kernel.memory.vectors import VectorIndex

log = logging.getLogger(__name__)

BACKLOG_BATCH = 500
LIKE_WINDOW = 5000  # the most recent memories the LIKE fallback of an FTS5 search scans
MAX_REMEMBERED_PER_TURN = 3  # seed 001: at most 3 facts saved from one turn's tags
MAX_FACTS_CONSIDERED = 10  # a reply full of tags costs a bounded number of writes
CANDIDATES = 20  # hybrid recall: each ranking's best this many (at least k) are fused


class Memories:
    def __init__(self, store: Store, cache_dir: Path) -> None:
        self.store = store
        self.tokenizer = Tokenizer(cache_dir)
        self._index_lock = asyncio.Lock()
        self.vectors: VectorIndex | None = None  # set when [memory.embeddings] is configured

    @property
    def search_mode(self) -> Literal["fts5", "like"]:
        return "fts5" if self.store.fts5_available else "like"

    async def _ready(self) -> None:
        await self.tokenizer.load()
        if self.store.fts5_available and self.store.memory_index_pending:
            await self._index_backlog()

    async def _index_backlog(self) -> None:
        async with self._index_lock:
            total = 0
            while self.store.memory_index_pending:
                rows = await self.store.memory_backlog(BACKLOG_BATCH)
                pairs = await asyncio.to_thread(self._cut_rows, rows)
                total += await self.store.index_memories(pairs)
                if not rows:
                    break
            if total:
                log.info("indexed %d earlier memories for full-text search", total)

    def _cut_rows(self, rows: list[tuple[int, str]]) -> list[tuple[int, str]]:
        return [(memory_id, self.tokenizer.index_text(text)) for memory_id, text in rows]

    async def add(
        self, text: str, category: str | None = None, scope: str = GLOBAL
    ) -> tuple[MemoryRow, bool]:
        """Save a fact in ``scope``; returns (row, created): the same fact again, in the
        same scope or in global, returns the first row.
        Raises ValueError for empty text, an unknown category or an invalid scope."""
        check_scope(scope)
        if not text.strip():
            raise ValueError("memory text is empty")
        tokens = None
        if self.store.fts5_available:
            await self._ready()
            tokens = await asyncio.to_thread(self.tokenizer.index_text, text)
        row, created = await self.store.add_memory(text, category, tokens=tokens, scope=scope)
        if created and self.vectors is not None:
            self.vectors.poke()
        return row, created

    async def search(
        self, query: str, limit: int = 5, scopes: Sequence[str] | None = None
    ) -> list[MemoryRow]:
        """The best matches for ``query`` within ``scopes``; [] when nothing matches.
        With vectors (issue 39), by words and by meaning fused, as :meth:`recall`."""
        if limit <= 0 or not query.strip() or (scopes is not None and not scopes):
            return []
        await self._ready()
        terms = await asyncio.to_thread(self.tokenizer.query_terms, query)
        if not terms:
            return []
        vector = await self.vectors.query(query) if self.vectors is not None else None
        if vector is not None:  # by words and by meaning (issue 39)
            ranked = await self._ranked(terms, fts_query(terms), vector, limit, scopes)
            if not ranked.meaning:
                return ranked.words[:limit]
            return fuse(ranked.words, [row for row, _ in ranked.meaning], limit)
        if not self.store.fts5_available:
            return await self.store.search_memories_like(terms, limit=limit, scopes=scopes)
        found = await self.store.search_memories_fts(fts_query(terms), limit=limit, scopes=scopes)
        if found:
            return found
        # Substrings find what whole tokens miss ("vim" in "neovim"), within a window so
        # that a query matching nothing costs little even with 100K memories.
        return await self.store.search_memories_like(
            terms, limit=limit, newest=LIKE_WINDOW, scopes=scopes
        )

    async def recall(
        self, query: str, k: int, scopes: Sequence[str] | None = None
    ) -> list[MemoryRow]:
        """Memories for the model's context: the top ``k`` matches for the owner's
        message within ``scopes``, or, when nothing matches, the ``k`` most recent of
        them (seed 004)."""
        if k <= 0:
            return []
        # With no memories to see there is nothing to search: jieba stays unloaded.
        if not self.tokenizer.loaded and await self.store.count_memories(scopes=scopes) == 0:
            return []
        terms: list[str] = []
        meaning = None
        if query.strip() and (scopes is None or scopes):
            if self.vectors is not None:  # the endpoint works while jieba cuts
                meaning = asyncio.ensure_future(self.vectors.query(query))
            try:
                await self._ready()
                terms = await asyncio.to_thread(self.tokenizer.query_terms, query)
            except BaseException:
                if meaning is not None:
                    meaning.cancel()
                raise
        # :meth:`search`'s steps and the fallback, in one store call (one hop).
        match = fts_query(terms) if terms else ""
        vector = await meaning if meaning is not None else None
        if vector is None or self.vectors is None:
            return await self.store.recall_memories(
                terms, match, limit=k, newest=LIKE_WINDOW, scopes=scopes
            )
        ranked = await self._ranked(terms, match, vector, k, scopes)
        if not ranked.meaning:  # nothing close enough: the words' recall, as before
            return ranked.words[:k] or ranked.newest[:k]
        return fuse(ranked.words, [row for row, _ in ranked.meaning], k)

    async def _ranked(
        self,
        terms: list[str],
        match: str,
        vector: list[float],
        k: int,
        scopes: Sequence[str] | None,
    ) -> Ranked:
        """Both rankings' candidates (the words' as :meth:`search` finds them)."""
        assert self.vectors is not None
        return await self.store.recall_ranked(
            terms,
            match,
            vector,
            self.vectors.model,
            limit=max(k, CANDIDATES),
            newest=LIKE_WINDOW,
            floor=self.vectors.cfg.min_similarity,
            scopes=scopes,
        )

    async def recent(
        self, limit: int = 200, scopes: Sequence[str] | None = None
    ) -> list[MemoryRow]:
        """Newest first."""
        return await self.store.list_memories(limit=limit, scopes=scopes)

    async def listed(
        self,
        limit: int,
        offset: int = 0,
        scopes: Sequence[str] | None = None,
        category: str | None = None,
    ) -> list[MemoryRow]:
        """A page of memories, newest first, optionally of one ``category``."""
        return await self.store.list_memories(
            limit=limit, offset=offset, scopes=scopes, category=category
        )

    async def get(self, memory_id: int) -> MemoryRow | None:
        return await self.store.get_memory(memory_id)

    async def update(
        self, memory_id: int, text: str | None = None, category: str | None = None
    ) -> MemoryRow | None:
        """Change a memory's text and/or category in place; None when there is no such
        memory. Raises ValueError for empty text or an unknown category, DuplicateMemory
        when the new text is already a memory of its scope (or of global)."""
        tokens = None
        if text is not None and text.strip() and self.store.fts5_available:
            await self._ready()
            tokens = await asyncio.to_thread(self.tokenizer.index_text, text.strip())
        row = await self.store.update_memory(memory_id, text=text, category=category, tokens=tokens)
        if row is not None and text is not None and self.vectors is not None:
            self.vectors.poke()  # new text lost its vector (migration 22's trigger)
        return row

    async def count(self, scopes: Sequence[str] | None = None) -> int:
        return await self.store.count_memories(scopes=scopes)

    async def delete(self, ids: Sequence[int], scopes: Sequence[str] | None = None) -> int:
        """Delete the memories among ``ids`` that are in ``scopes``; returns how many."""
        return await self.store.delete_memories(ids, scopes=scopes)

    async def save_facts(
        self,
        facts: Sequence[Fact],
        limit: int = MAX_REMEMBERED_PER_TURN,
        scope: str = GLOBAL,
    ) -> list[MemoryRow]:
        """Store facts from ``<remember>`` tags in ``scope``: duplicates of each other or
        of memories already in that scope or in global are skipped, and at most ``limit``
        new rows are made."""
        saved: list[MemoryRow] = []
        if limit <= 0:
            return saved
        seen: set[str] = set()
        for fact in facts:
            key = memory_key(fact.text)
            if key in seen:
                continue
            if len(seen) == MAX_FACTS_CONSIDERED:
                break
            seen.add(key)
            row, created = await self.add(fact.text, fact.category, scope)
            if created:
                saved.append(row)
                if len(saved) >= limit:
                    break
        return saved
