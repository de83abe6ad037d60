"""Facts that change (issue 39), on the memory service over a real SQLite file with real
jieba: a fact that restates or replaces a kept one updates that memory and keeps its
earlier text as a version, which recall and search never offer; a judge that fails or
is late leaves the new fact a memory of its own; a fact saved globally while a project
holds it becomes that one memory, global; each change is told to ``changed``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kernel.memory import memories as memories_module
from kernel.memory.memories import Memories
from kernel.store.db import MemoryRow
from tests.memory.test_memories import open_memories


class Told:
    """What ``Memories.changed`` was told: (action, actor, facts)."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, action: str, actor: str, **facts: Any) -> None:
        self.changes.append((action, actor, facts))


@pytest.fixture
async def memories(tmp_path: Path) -> AsyncIterator[Memories]:
    store, mem = await open_memories(tmp_path / "kernel.db")
    mem.changed = Told()
    yield mem
    await store.close()


def told(memories: Memories) -> list[tuple[str, str, dict[str, Any]]]:
    assert isinstance(memories.changed, Told)
    return memories.changed.changes


async def test_a_judged_contradiction_supersedes_and_recall_never_offers_the_old(
    memories: Memories,
) -> None:
    asked: list[tuple[str, list[str]]] = []

    async def judge(fact: str, known: Sequence[MemoryRow]) -> int | None:
        asked.append((fact, [m.text for m in known]))
        where = "lives in" in fact  # the same subject as the kept "lives in Lisbon"
        return next((m.id for m in known if where and "Lisbon" in m.text), None)

    memories.judge = judge
    lisbon = await memories.remember("The owner lives in Lisbon", "user", actor="owner")
    await memories.remember("The owner's cat is called Mochi", "user", actor="owner")
    porto = await memories.remember("The owner lives in Porto", actor="model")

    assert (porto.outcome, porto.row.id, porto.replaced) == (
        "superseded",
        lisbon.row.id,
        "The owner lives in Lisbon",
    )
    assert "The owner lives in Lisbon" in asked[-1][1]
    assert porto.row.category == "user"  # the new fact said none: the kept one's stays
    assert sorted(m.text for m in await memories.recent()) == [
        "The owner lives in Porto",
        "The owner's cat is called Mochi",
    ]
    for query in ("Lisbon", "where does the owner live", "lives"):
        for found in (await memories.recall(query, 5), await memories.search(query, 5)):
            assert all("Lisbon" not in m.text for m in found)
    [version] = await memories.versions(lisbon.row.id)
    assert (version.text, version.how, version.category) == (
        "The owner lives in Lisbon",
        "superseded",
        "user",
    )
    assert told(memories) == [
        ("superseded", "model", {"memory": lisbon.row.id, "scope": "global", "chars": 24})
    ]


async def test_the_same_words_restate_without_a_judge(memories: Memories) -> None:
    first = await memories.remember("Likes oolong tea.", actor="owner")
    again = await memories.remember("likes  OOLONG tea", actor="owner")
    assert (again.outcome, again.row.id, again.row.text) == (
        "restated",
        first.row.id,
        "likes  OOLONG tea",
    )
    assert await memories.count() == 1
    assert [v.how for v in await memories.versions(first.row.id)] == ["restated"]
    other = await memories.remember("Likes green tea", actor="owner")
    assert other.outcome == "created"  # another fact: no judge, a memory of its own


async def test_a_failing_or_late_judge_saves_the_fact_as_new(
    memories: Memories, monkeypatch: pytest.MonkeyPatch
) -> None:
    await memories.remember("The owner lives in Lisbon", actor="owner")

    async def broken(fact: str, known: Sequence[MemoryRow]) -> int | None:
        raise RuntimeError("the judge broke")

    memories.judge = broken
    saved = await memories.remember("The owner lives in Porto", actor="owner")
    assert saved.outcome == "created"

    never = asyncio.Event()

    async def late(fact: str, known: Sequence[MemoryRow]) -> int | None:
        await never.wait()
        return known[0].id

    memories.judge = late
    monkeypatch.setattr(memories_module, "JUDGE_SECONDS", 0)
    saved = await memories.remember("The owner lives in Faro", actor="owner")
    assert saved.outcome == "created"
    assert await memories.count() == 3
    assert told(memories) == []


async def test_a_global_save_of_a_project_fact_makes_it_global_not_a_second_row(
    memories: Memories,
) -> None:
    garden = await memories.remember("Deploys on Fridays", scope="project:garden", actor="owner")
    await memories.add("deploys on fridays", scope="project:kernel")  # the same, elsewhere

    saved = await memories.remember("deploys on  Fridays", actor="model")

    assert (saved.outcome, saved.row.id, saved.row.scope) == (
        "promoted",
        garden.row.id,
        "global",
    )
    assert [(m.text, m.scope) for m in await memories.recent()] == [
        ("Deploys on Fridays", "global")
    ]
    assert (await memories.remember("Deploys on Fridays", actor="owner")).outcome == "exists"
    # held by global and by a project (made before issue 39): the global one answers
    await memories.add("Waters the roses", scope="project:garden")
    kept, _ = await memories.add("waters the roses")
    assert (await memories.remember("Waters the roses", actor="owner")).row.id == kept.id
    [(action, actor, facts)] = told(memories)
    assert (action, actor, facts["before"], facts["scope"]) == (
        "moved",
        "model",
        "project:garden",
        "global",
    )
    assert len(facts["absorbed"]) == 1
