"""Memory scopes (issue 18) on a real SQLite file with real jieba: the upgrade from v11,
adding and deduplicating per scope, and search, recall, listing and deleting that see
global plus the chat's project and persona, never another project's (FTS5 and LIKE)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from kernel.core import i18n
from kernel.memory import scopes
from kernel.memory.memories import Memories
from kernel.memory.remember import Fact
from kernel.store.migrations import MIGRATIONS, migrate
from tests.memory.test_memories import TS, open_memories

KERNEL = scopes.visible("kernel", "poet")  # a chat in project kernel, persona poet
OTHER = scopes.visible("garden")  # a chat in another project


@pytest.fixture(params=["fts5", "like"])
async def memories(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memories]:
    store, mem = await open_memories(tmp_path / "kernel.db", fts5=request.param == "fts5")
    assert mem.search_mode == request.param
    yield mem
    await store.close()


async def texts(mem: Memories, query: str, visible: tuple[str, ...] | None) -> list[str]:
    return sorted(m.text for m in await mem.search(query, 10, visible))


async def seed(mem: Memories) -> None:
    await mem.add("likes green tea", "user")
    await mem.add("the kernel repo lives in ~/src/kernel", "project", "project:kernel")
    await mem.add("the garden tea plants need water on Sundays", None, "project:garden")
    await mem.add("answers in haiku about tea", "feedback", "persona:poet")


def test_the_scope_vocabulary() -> None:
    assert scopes.visible() == ("global",)
    assert KERNEL == ("global", "project:kernel", "persona:poet")
    assert scopes.visible(persona_name="poet") == ("global", "persona:poet")
    assert (scopes.default(), scopes.default("kernel")) == ("global", "project:kernel")
    assert scopes.split("persona:poet") == ("persona", "poet")
    assert scopes.split("global") == ("global", "")
    for bad in ("", "Global", "project:", "project:../x", "projects:x", "persona:a b", "x:y"):
        with pytest.raises(ValueError):
            scopes.check_scope(bad)
    for bad_name in ("", "../etc", "a/b", "-x", "a" * 65):
        with pytest.raises(ValueError):
            scopes.project(bad_name)
    i18n.set_language("en")
    try:
        words = [scopes.word(s) for s in KERNEL]
        assert words == ["global", "project kernel", "persona poet"]
    finally:
        i18n.set_language("zh")
    assert scopes.word("project:kernel") == "项目 kernel"


async def test_a_chat_sees_global_its_project_and_its_persona(memories: Memories) -> None:
    await seed(memories)
    assert await texts(memories, "tea", KERNEL) == ["answers in haiku about tea", "likes green tea"]
    assert await texts(memories, "tea", OTHER) == [
        "likes green tea",
        "the garden tea plants need water on Sundays",
    ]
    assert await texts(memories, "repo kernel", OTHER) == []
    assert await texts(memories, "repo kernel", KERNEL) == ["the kernel repo lives in ~/src/kernel"]
    assert await texts(memories, "haiku", ("global",)) == []
    assert await texts(memories, "tea", ()) == []  # no scope: nothing
    assert len(await memories.search("tea", 10)) == 3  # None: every scope, as before
    [repo] = await memories.search("repo", 1, KERNEL)
    assert (repo.scope, repo.category) == ("project:kernel", "project")


async def test_substring_fallback_stays_within_the_scopes(memories: Memories) -> None:
    await memories.add("uses neovim with lazyvim", None, "project:garden")
    await memories.add("runs vimtutor every year", None, "persona:poet")
    # "vim" is no token of either memory: the LIKE fallback finds only the visible one
    assert await texts(memories, "vim", KERNEL) == ["runs vimtutor every year"]
    assert await texts(memories, "vim", ("global",)) == []


async def test_recall_and_listing_are_scoped(memories: Memories) -> None:
    assert await memories.recall("tea", 3, KERNEL) == []
    await seed(memories)
    recalled = [m.text for m in await memories.recall("repo", 5, KERNEL)]
    assert recalled == ["the kernel repo lives in ~/src/kernel"]
    # nothing matches: the most recent the chat may see, never another project's
    recent = [m.scope for m in await memories.recall("zebra crossing", 5, KERNEL)]
    assert recent == ["persona:poet", "project:kernel", "global"]
    assert [m.scope for m in await memories.recent(10, OTHER)] == ["project:garden", "global"]
    assert (await memories.count(KERNEL), await memories.count(OTHER)) == (3, 2)
    assert (await memories.count(), await memories.count(())) == (4, 0)
    assert await memories.recall("tea", 5, ()) == []


async def test_the_same_fact_in_its_scope_or_in_global_is_one_memory(
    memories: Memories,
) -> None:
    tea, created = await memories.add("likes green tea")
    assert created and tea.scope == "global"
    # in a project: the global memory already says it
    again, created = await memories.add("Likes  GREEN tea", "user", "project:kernel")
    assert (again.id, again.scope, created) == (tea.id, "global", False)
    repo, created = await memories.add("repo in ~/src", None, "project:kernel")
    assert created and repo.scope == "project:kernel"
    same, created = await memories.add("REPO in ~/src", None, "project:kernel")
    assert (same.id, created) == (repo.id, False)
    # another project, or a persona, is another place: its own memory
    garden, created = await memories.add("repo in ~/src", None, "project:garden")
    assert created and garden.id != repo.id and garden.scope == "project:garden"
    poet, created = await memories.add("repo in ~/src", None, "persona:poet")
    assert created and poet.scope == "persona:poet"
    assert await memories.count() == 4
    for bad in ("", "everything", "project:", "project:a/b", "global' OR 1=1 --"):
        with pytest.raises(ValueError):
            await memories.add("a fact", None, bad)
    assert await memories.count() == 4


async def test_remembered_facts_go_to_the_scope_given(memories: Memories) -> None:
    await memories.add("likes oolong tea")
    facts = [Fact("likes OOLONG tea", "user"), Fact("deploys on Fridays", "project")]
    saved = await memories.save_facts(facts, scope="project:kernel")
    assert [(m.text, m.scope) for m in saved] == [("deploys on Fridays", "project:kernel")]
    assert await texts(memories, "fridays", OTHER) == []
    assert await texts(memories, "fridays", KERNEL) == ["deploys on Fridays"]
    # global: the project's memory of it becomes global, one row (issue 39)
    saved = await memories.save_facts([Fact("deploys on Fridays", None)])
    assert [m.scope for m in saved] == ["global"]


async def test_deleting_only_touches_visible_memories(memories: Memories) -> None:
    await seed(memories)
    [garden] = await memories.search("garden", 1, OTHER)
    assert await memories.delete([garden.id], KERNEL) == 0
    assert await memories.delete([garden.id], ()) == 0
    assert await texts(memories, "garden", OTHER) == ["the garden tea plants need water on Sundays"]
    assert await memories.delete([garden.id], OTHER) == 1
    assert await texts(memories, "garden", None) == []


async def test_hostile_scope_strings_filter_nothing_in(memories: Memories) -> None:
    await seed(memories)
    for hostile in ("global' OR '1'='1", "project:%", "project:*", "%"):
        found = await memories.search("tea", 10, (hostile,))
        assert found == [], hostile
        assert await memories.recent(10, (hostile,)) == []


def make_v11_database(path: Path) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        assert migrate(conn, MIGRATIONS[:11]) == 11
        # One memory as v11 indexed it, one still in the backlog (from before FTS5).
        conn.execute(
            "INSERT INTO memories (text, category, created_at, key, tokens)"
            " VALUES ('我喜欢昭和时期的音乐', 'user', ?, '我喜欢昭和时期的音乐', ?)",
            (TS, "我 喜欢 昭和 时期 的 音乐"),
        )
        conn.execute("INSERT INTO memories_fts (rowid, tokens) SELECT id, tokens FROM memories")
        conn.execute(
            "INSERT INTO memories (text, category, created_at, key)"
            " VALUES ('The owner drinks oolong tea', NULL, ?, 'the owner drinks oolong tea')",
            (TS,),
        )


async def test_upgrade_from_v11_makes_every_memory_global(tmp_path: Path) -> None:
    path = tmp_path / "kernel.db"
    make_v11_database(path)
    store, mem = await open_memories(path)
    try:
        assert store.schema_version == len(MIGRATIONS) and store.fts5_available
        assert {m.scope for m in await mem.recent()} == {"global"}
        # every chat sees them, through the full-text index
        for visible in (KERNEL, OTHER, ("global",)):
            assert await texts(mem, "昭和的歌", visible) == ["我喜欢昭和时期的音乐"]
            assert await texts(mem, "oolong", visible) == ["The owner drinks oolong tea"]
        fts = await store.search_memories_fts('"昭和" OR "oolong"', scopes=("global",))
        assert len(fts) == 2
        # a project's fact beside them, the same fact as a global one is no new memory
        _, created = await mem.add("the owner drinks OOLONG tea", None, "project:kernel")
        assert not created
    finally:
        await store.close()
    with closing(sqlite3.connect(path)) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO memories (text, created_at, key, scope) VALUES ('x', ?, 'x', 'nowhere')",
            (TS,),
        )
