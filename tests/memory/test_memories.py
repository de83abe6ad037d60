"""The memory service on a real SQLite file with real jieba: Chinese and English, BM25,
the LIKE fallback, recall, the backlog after an upgrade, <remember> facts, and FTS5
query injection."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel.memory.memories import Memories
from kernel.memory.remember import Fact
from kernel.memory.tokens import Tokenizer, fts_query
from kernel.store.db import Store
from kernel.store.migrations import MIGRATIONS, migrate

TS = "2024-05-01T12:00:00+00:00"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


async def open_memories(path: Path, *, fts5: bool = True) -> tuple[Store, Memories]:
    store = Store(path, clock=Clock(), fts5=fts5)
    await store.start()
    return store, Memories(store, path.parent / "cache")


@pytest.fixture(params=["fts5", "like"])
async def memories(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memories]:
    """Each test using this runs with FTS5 and with the LIKE fallback."""
    store, mem = await open_memories(tmp_path / "kernel.db", fts5=request.param == "fts5")
    assert mem.search_mode == request.param
    yield mem
    await store.close()


@pytest.fixture
async def fts(tmp_path: Path) -> AsyncIterator[Memories]:
    store, mem = await open_memories(tmp_path / "kernel.db")
    yield mem
    await store.close()


async def texts(mem: Memories, query: str, limit: int = 5) -> list[str]:
    return [m.text for m in await mem.search(query, limit)]


async def test_chinese_and_english_facts_are_found(memories: Memories) -> None:
    await memories.add("我喜欢昭和时期的音乐", "user")
    await memories.add("The owner drinks oolong tea every morning", "user")
    await memories.add("项目 Kernel 的代码在 ~/src/kernel", "project")
    await memories.add("有一只叫 Miso 的猫")

    assert await texts(memories, "推荐一些昭和的歌") == ["我喜欢昭和时期的音乐"]
    assert await texts(memories, "what TEA do I like?") == [
        "The owner drinks oolong tea every morning"
    ]
    assert await texts(memories, "kernel 代码在哪") == ["项目 Kernel 的代码在 ~/src/kernel"]
    assert await texts(memories, "miso 今天吃了吗") == ["有一只叫 Miso 的猫"]
    assert await texts(memories, "完全无关的问题 zebra") == []
    assert await texts(memories, "   ") == []
    assert await memories.search("昭和", 0) == []


async def test_english_is_stemmed_and_ranked_by_bm25(fts: Memories) -> None:
    await fts.add("runs a marathon every spring")
    await fts.add("tea tea tea: a tea person through and through")
    await fts.add("likes green tea")
    assert await texts(fts, "running") == ["runs a marathon every spring"]
    found = await texts(fts, "tea")
    assert found[0] == "tea tea tea: a tea person through and through"
    assert set(found) == {"tea tea tea: a tea person through and through", "likes green tea"}


async def test_substrings_fts_misses_are_found_by_like(fts: Memories) -> None:
    await fts.add("uses neovim with lazyvim")
    # "vim" is no token of the memory, but a substring of one
    assert await texts(fts, "vim") == ["uses neovim with lazyvim"]


async def test_recall_falls_back_to_the_most_recent(memories: Memories) -> None:
    assert await memories.recall("anything", 3) == []
    for n in range(5):
        await memories.add(f"fact number {n}")
    await memories.add("我喜欢昭和时期的音乐")
    assert [m.text for m in await memories.recall("昭和的音乐", 3)] == ["我喜欢昭和时期的音乐"]
    recent = [m.text for m in await memories.recall("zebra crossing", 3)]
    assert recent == ["我喜欢昭和时期的音乐", "fact number 4", "fact number 3"]
    assert [m.text for m in await memories.recall("", 2)] == recent[:2]
    assert await memories.recall("昭和", 0) == []


async def test_deleted_memories_are_not_found(memories: Memories) -> None:
    tea, _ = await memories.add("likes green tea")
    await memories.add("likes black tea")
    assert await memories.delete([tea.id, 999]) == 1
    assert await texts(memories, "green tea") == ["likes black tea"]


async def test_remembered_facts_are_deduplicated_and_capped(memories: Memories) -> None:
    await memories.add("Likes oolong tea")
    facts = [
        Fact("likes OOLONG tea", "user"),  # an existing memory
        Fact("works at ACME", "user"),
        Fact("works  at acme", "user"),  # the same fact twice
        Fact("prefers short answers", "feedback"),
        Fact("repo is ~/src/kernel", "project"),
        Fact("a fourth new fact", "user"),
    ]
    saved = await memories.save_facts(facts)
    assert [(m.text, m.category) for m in saved] == [
        ("works at ACME", "user"),
        ("prefers short answers", "feedback"),
        ("repo is ~/src/kernel", "project"),
    ]
    assert await memories.count() == 4
    assert await memories.save_facts([Fact("more", "user")], limit=0) == []


INJECTIONS = [
    '"',
    '" OR 1=1 --',
    "tea OR",
    "AND OR NOT",
    "NEAR(tea coffee, 2)",
    "tea*",
    "*",
    "^tea",
    "-tea",
    "tokens:tea",
    "(tea",
    "tea)",
    "{tokens}: tea",
    "'); DROP TABLE memories; --",
    "%_%",
    "\\",
    "😀 🍵",
    "‮tea",
]


@pytest.mark.parametrize("query", INJECTIONS)
async def test_query_syntax_cannot_break_or_inject(memories: Memories, query: str) -> None:
    await memories.add("likes green tea")
    await memories.add("has a NEAR-sighted cat")
    found = await texts(memories, query)
    # a query matches on its words only: never everything, never an error
    assert set(found) <= {"likes green tea", "has a NEAR-sighted cat"}
    if "tea" in query.lower():
        assert "likes green tea" in found
    assert await memories.count() == 2


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(terms=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6))
def test_any_terms_make_a_valid_fts5_query(terms: list[str]) -> None:
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute(
            "CREATE VIRTUAL TABLE f USING fts5(tokens, content='',"
            " tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.execute("INSERT INTO f (rowid, tokens) VALUES (1, 'likes green tea')")
        rows = conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (fts_query(terms),)).fetchall()
    assert rows in ([], [(1,)])


async def test_query_terms_are_lowercased_and_mixed(tmp_path: Path) -> None:
    tokenizer = Tokenizer(tmp_path / "cache")
    await tokenizer.load()
    assert tokenizer.query_terms("我喜欢 Showa-era MUSIC, 和 jazz!") == [
        "喜欢",
        "showa",
        "era",
        "music",
        "jazz",
    ]
    assert tokenizer.query_terms("the 的 a") == ["the", "的", "a"]  # only stopwords: kept
    assert tokenizer.query_terms("?!。，") == []
    assert tokenizer.index_text("我喜欢昭和时期的音乐") == "我 喜欢 昭和 时期 的 音乐"
    assert len(tokenizer.query_terms(" ".join(f"word{n}" for n in range(100)))) == 32


# ----------------------------------------------------------------- upgrades and fallbacks


def make_v2_database(path: Path) -> None:
    """A database as Kernel left it at schema v2 (before FTS5), with memories."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        migrate(conn, MIGRATIONS[:2])
        for text, category in [
            ("我喜欢昭和时期的音乐", "user"),
            ("The owner drinks oolong tea", None),
            ("项目代码在 ~/src/kernel", "project"),
        ]:
            conn.execute(
                "INSERT INTO memories (text, category, created_at) VALUES (?, ?, ?)",
                (text, category, TS),
            )


async def test_upgrade_from_v2_indexes_the_existing_memories(tmp_path: Path) -> None:
    path = tmp_path / "kernel.db"
    make_v2_database(path)
    store, mem = await open_memories(path)
    try:
        assert store.schema_version == len(MIGRATIONS) and store.fts5_available
        assert store.memory_index_pending  # indexed on the first search, not at start
        assert await texts(mem, "昭和的歌") == ["我喜欢昭和时期的音乐"]
        assert not store.memory_index_pending
        assert await texts(mem, "OOLONG") == ["The owner drinks oolong tea"]
        assert [m.category for m in await mem.search("代码", 1)] == ["project"]
        # the old rows are really in the full-text index now, not found by LIKE
        assert len(await store.search_memories_fts(fts_query(["昭和", "oolong", "代码"]))) == 3
        # and deleting one removes it from the index too
        [tea] = await mem.search("oolong", 1)
        assert await mem.delete([tea.id]) == 1
        assert await store.search_memories_fts('"oolong"') == []
    finally:
        await store.close()


async def test_database_migrated_without_fts5_gets_its_index_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "kernel.db"
    make_v2_database(path)
    # First start on an SQLite without FTS5: the migration and the store both see none.
    monkeypatch.setattr("kernel.store.migrations.fts5_supported", lambda conn: False)
    monkeypatch.setattr("kernel.store.db.fts5_supported", lambda conn: False)
    store, mem = await open_memories(path)
    try:
        assert mem.search_mode == "like"
        await mem.add("likes green tea")
        assert await texts(mem, "昭和") == ["我喜欢昭和时期的音乐"]
        assert (await texts(mem, "green tea"))[0] == "likes green tea"
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "memories_fts" not in names

    monkeypatch.undo()  # the same database on an SQLite with FTS5
    store, mem = await open_memories(path)
    try:
        assert mem.search_mode == "fts5"
        assert await texts(mem, "昭和") == ["我喜欢昭和时期的音乐"]
        assert (await texts(mem, "green tea"))[0] == "likes green tea"
        assert await store.memory_backlog() == []
        assert len(await store.search_memories_fts(fts_query(["昭和", "tea"]))) == 3
    finally:
        await store.close()


async def test_memories_deleted_without_fts5_never_come_back(tmp_path: Path) -> None:
    path = tmp_path / "kernel.db"
    store, mem = await open_memories(path)
    tea, _ = await mem.add("likes green tea")
    await store.close()
    store, mem = await open_memories(path, fts5=False)  # e.g. a Python without FTS5
    assert await mem.delete([tea.id]) == 1
    await mem.add("likes black tea")
    await store.close()
    store, mem = await open_memories(path)
    try:
        assert await texts(mem, "tea") == ["likes black tea"]
        assert await texts(mem, "green") == []
    finally:
        await store.close()
