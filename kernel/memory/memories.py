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
from typing import TYPE_CHECKING, Any, Literal

from kernel.core.tasks import TaskSet
from kernel.memory.facts import (
    JUDGE_SECONDS,
    JUDGED,
    Changed,
    Judge,
    Replaced,
    Saved,
    normal,
)
from kernel.memory.fusion import fuse
from kernel.memory.remember import Fact
from kernel.memory.scopes import GLOBAL, check_scope
from kernel.memory.tokens import Tokenizer, fts_query
from kernel.store.db import DuplicateMemory, MemoryRow, Store
from kernel.store.memories import How
from kernel.store.memory_versions import MemoryVersion, Moved
from kernel.store.migrations import memory_key
from kernel.store.vectors import Ranked

if TYPE_CHECKING:
    from kernel.memory.vectors import VectorIndex

log = logging.getLogger(__name__)

BACKLOG_BATCH = 500
LIKE_WINDOW = 5000  # the most recent memories the LIKE fallback of an FTS5 search scans
MAX_REMEMBERED_PER_TURN = 3  # seed 001: at most 3 facts saved from one turn's tags
MAX_FACTS_CONSIDERED = 10  # a reply full of tags costs a bounded number of writes
SETTLE_SECONDS = 5.0  # at stop, how long the facts being judged may take to fold
CANDIDATES = 20  # hybrid recall: each ranking's best this many (at least k) are fused


class Memories:
    def __init__(self, store: Store, cache_dir: Path) -> None:
        self.store = store
        self.tokenizer = Tokenizer(cache_dir)
        self._index_lock = asyncio.Lock()
        self.vectors: VectorIndex | None = None  # set when [memory.embeddings] is configured
        self.judge: Judge | None = None  # names the memory a new fact replaces (facts.py)
        self.changed: Changed | None = None  # told of every edit, move, forget, supersede
        self._settling = TaskSet("memories")  # a turn's new facts checked against kept ones

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
        self,
        memory_id: int,
        text: str | None = None,
        category: str | None = None,
        how: How = "edited",
        replacing: int | None = None,
    ) -> MemoryRow | None:
        """Change a memory's text and/or category in place; None when there is no such
        memory. Raises ValueError for empty text or an unknown category, DuplicateMemory
        when the new text is already a memory of its scope (or of global). ``replacing``:
        the newer memory whose fact it takes, deleted in the same transaction."""
        tokens = None
        if text is not None and text.strip() and self.store.fts5_available:
            await self._ready()
            tokens = await asyncio.to_thread(self.tokenizer.index_text, text.strip())
        row = await self.store.update_memory(
            memory_id, text=text, category=category, tokens=tokens, how=how, replacing=replacing
        )
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
        """Store facts from ``<remember>`` tags in ``scope`` (:meth:`remember`):
        duplicates of each other or of memories already in that scope or in global are
        skipped, and at most ``limit`` memories are made or updated."""
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
            done = await self.remember(fact.text, fact.category, scope, actor="model", settle=False)
            if done.written:
                saved.append(done.row)
                if len(saved) >= limit:
                    break
        return saved

    # ----- facts that change (issue 39, kernel/memory/facts.py) -------------------------

    async def remember(
        self,
        text: str,
        category: str | None = None,
        scope: str = GLOBAL,
        *,
        actor: str,
        settle: bool = True,
    ) -> Saved:
        """Save a fact in ``scope`` as every save path does: the same fact in global or
        ``scope`` is that memory (``exists``); saved globally while it is a memory of
        another scope, that memory moves to global (``promoted``); one that restates or
        replaces a memory recall finds updates that memory, its text before kept as a
        version (``restated``, ``superseded``); otherwise a new memory (``created``).
        With ``settle`` False (a turn's ``<remember>`` tags: the reply does not wait for
        the judge) the new memory is kept at once and folded into the one it replaces in
        the background. Raises ValueError as :meth:`add` does."""
        check_scope(scope)
        if scope == GLOBAL and text.strip():
            elsewhere = await self.store.same_fact_elsewhere(text, scope)
            if elsewhere:
                try:
                    moved = await self.move(elsewhere[0].id, GLOBAL, actor=actor)
                except DuplicateMemory:  # global holds it too: that one is the fact
                    moved = None
                if moved is not None:
                    return Saved(moved.row, "promoted")
        row, created = await self.add(text, category, scope)
        if not created:
            return Saved(row, "exists")
        if not settle:  # the fact is kept; whether it replaces one is settled meanwhile
            self._settling.spawn(self._settle(row, scope, actor), "memory settle")
            return Saved(row, "created")
        return await self._settle(row, scope, actor)

    async def _settle(self, row: MemoryRow, scope: str, actor: str) -> Saved:
        """A new memory ``row`` that restates or replaces a kept one is folded into it
        (the kept one takes its text, the text before kept as a version, the new row
        deleted in the same transaction); else it stays as it is."""
        found = await self._replaced(row, scope)
        if found is None:
            return Saved(row, "created")
        old, how = found
        try:
            kept = await self.update(old.id, row.text, row.category, how=how, replacing=row.id)
        except (ValueError, DuplicateMemory):
            kept = None
        if kept is None:  # gone meanwhile: the new memory stays, the fact is never lost
            return Saved(row, "created")
        self._tell(how, actor, memory=old.id, scope=old.scope, chars=len(kept.text))
        return Saved(kept, how, old.text)

    async def close(self) -> None:
        """Wait briefly for the facts being settled, then stop (each is kept already)."""
        await self._settling.wait(SETTLE_SECONDS)
        await self._settling.close()

    async def _replaced(self, row: MemoryRow, scope: str) -> tuple[MemoryRow, Replaced] | None:
        """The memory (of global or ``scope``) that ``row``'s new fact restates or
        replaces, and how; None when there is none or the judge failed."""
        visible = (GLOBAL,) if scope == GLOBAL else (GLOBAL, scope)
        recalled = await self.recall(row.text, JUDGED + 1, visible)
        known = [m for m in recalled if m.id != row.id][:JUDGED]
        same = normal(row.text)
        for memory in known:
            if normal(memory.text) == same:
                return memory, "restated"
        if self.judge is None or not known:
            return None
        try:
            chosen = await asyncio.wait_for(self.judge(row.text, known), JUDGE_SECONDS)
        except Exception as exc:  # late or failed: the fact stays a memory of its own
            log.warning("memory judge failed (%s): saved as a new memory", type(exc).__name__)
            return None
        replaced = next((m for m in known if m.id == chosen), None)
        return None if replaced is None else (replaced, "superseded")

    async def edit(
        self,
        memory_id: int,
        text: str | None = None,
        category: str | None = None,
        *,
        actor: str,
        scopes: Sequence[str] | None = None,
    ) -> MemoryRow | None:
        """The owner's edit: :meth:`update` within ``scopes`` (None: any), its text
        before kept as a version, told to :attr:`changed`."""
        if scopes is not None:
            found = await self.get(memory_id)
            if found is None or found.scope not in scopes:
                return None
        row = await self.update(memory_id, text, category)
        if row is not None:
            self._tell("edited", actor, memory=memory_id, scope=row.scope, chars=len(row.text))
        return row

    async def move(
        self,
        memory_id: int,
        scope: str,
        *,
        actor: str,
        scopes: Sequence[str] | None = None,
    ) -> Moved | None:
        """Move a memory within ``scopes`` to ``scope``; None when there is no such
        memory. Raises ValueError for an invalid scope, DuplicateMemory when the fact is
        already there (kernel/store/memory_versions.py)."""
        check_scope(scope)
        moved = await self.store.move_memory(memory_id, scope, scopes=scopes)
        if moved is not None and moved.before != scope:
            self._tell(
                "moved",
                actor,
                memory=memory_id,
                scope=scope,
                before=moved.before,
                absorbed=list(moved.absorbed),
            )
        return moved

    async def forget(
        self, ids: Sequence[int], scopes: Sequence[str] | None = None, *, actor: str
    ) -> list[int]:
        """:meth:`delete`, each memory deleted told to :attr:`changed`; returns their ids."""
        gone = []
        for memory_id in dict.fromkeys(ids):
            if await self.store.delete_memories([memory_id], scopes=scopes):
                gone.append(memory_id)
        for memory_id in gone:
            self._tell("forgotten", actor, memory=memory_id)
        return gone

    async def versions(self, memory_id: int) -> list[MemoryVersion]:
        """A memory's earlier versions, the latest first."""
        return await self.store.memory_versions(memory_id)

    def _tell(self, action: str, actor: str, **facts: Any) -> None:
        if self.changed is not None:
            self.changed(action, actor, **facts)
