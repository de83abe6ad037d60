"""The memory tools within a chat's scopes (issue 18), called through the real registry
on a real store: the scope argument, its refusals, and reads and deletes that never
reach a memory the chat may not see."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kernel.memory import scopes
from kernel.memory.memories import Memories
from kernel.tools import memory
from kernel.tools.registry import ToolContext, ToolOutcome, ToolRegistry
from tests.memory.test_memories import open_memories

PLAIN = ToolContext()  # no project, no persona: global only
KERNEL = ToolContext(
    project="kernel",
    persona="poet",
    memory_scopes=scopes.visible("kernel", "poet"),
    memory_scope=scopes.project("kernel"),
)
GARDEN = ToolContext(
    project="garden", memory_scopes=scopes.visible("garden"), memory_scope="project:garden"
)


@pytest.fixture
async def tools(tmp_path: Path) -> AsyncIterator[tuple[ToolRegistry, Memories]]:
    store, mem = await open_memories(tmp_path / "kernel.db")
    registry = ToolRegistry()
    memory.register(registry, mem)
    yield registry, mem
    await store.close()


async def call(
    registry: ToolRegistry, name: str, context: ToolContext | None, **arguments: Any
) -> ToolOutcome:
    return await registry.call(name, arguments, context)


def result(outcome: ToolOutcome) -> Any:
    assert outcome.ok, outcome.content
    return json.loads(outcome.content)


async def test_the_scope_argument_is_offered(tools: tuple[ToolRegistry, Memories]) -> None:
    registry, _ = tools
    spec = next(s for s in registry.specs() if s.name == "memory_add")
    scope = spec.parameters["properties"]["scope"]
    assert scope["enum"] == ["global", "project", "persona"]
    assert "project" in scope["description"] and "scope" not in spec.parameters["required"]


async def test_memory_add_goes_to_the_chat_scope_or_the_one_named(
    tools: tuple[ToolRegistry, Memories],
) -> None:
    registry, mem = tools
    ids = {
        "default": result(await call(registry, "memory_add", KERNEL, text="deploys on Fridays")),
        "global": result(
            await call(registry, "memory_add", KERNEL, text="likes tea", scope="global")
        ),
        "persona": result(
            await call(registry, "memory_add", KERNEL, text="speaks in haiku", scope="persona")
        ),
        "project": result(
            await call(registry, "memory_add", GARDEN, text="water plants", scope="project")
        ),
        "plain": result(await call(registry, "memory_add", None, text="has a cat")),
    }
    assert all(set(r) == {"id"} for r in ids.values())  # seed 004: memory_add -> {id}
    by_id = {m.id: m.scope for m in await mem.recent()}
    assert {k: by_id[r["id"]] for k, r in ids.items()} == {
        "default": "project:kernel",
        "global": "global",
        "persona": "persona:poet",
        "project": "project:garden",
        "plain": "global",
    }


@pytest.mark.parametrize("scope", ["project", "persona"])
async def test_a_scope_the_chat_lacks_is_refused(
    tools: tuple[ToolRegistry, Memories], scope: str
) -> None:
    registry, mem = tools
    outcome = await call(registry, "memory_add", PLAIN, text="a fact", scope=scope)
    assert not outcome.ok and f"no active {scope}" in outcome.content
    outcome = await call(registry, "memory_add", GARDEN, text="a fact", scope="everywhere")
    assert not outcome.ok
    assert await mem.count() == 0


async def test_search_and_list_see_only_the_chat_scopes(
    tools: tuple[ToolRegistry, Memories],
) -> None:
    registry, mem = tools
    await mem.add("likes green tea")
    await mem.add("the kernel tea budget is small", None, "project:kernel")
    await mem.add("the garden tea plants need water", None, "project:garden")
    await mem.add("haiku about tea", None, "persona:poet")

    def seen(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return sorted((r["scope"], r["text"]) for r in rows)

    found = seen(result(await call(registry, "memory_search", KERNEL, query="tea", limit=10)))
    assert found == [
        ("global", "likes green tea"),
        ("persona:poet", "haiku about tea"),
        ("project:kernel", "the kernel tea budget is small"),
    ]
    listed = seen(result(await call(registry, "memory_list", GARDEN)))
    assert listed == [
        ("global", "likes green tea"),
        ("project:garden", "the garden tea plants need water"),
    ]
    assert seen(result(await call(registry, "memory_search", None, query="tea"))) == [
        ("global", "likes green tea")
    ]
    assert result(await call(registry, "memory_search", PLAIN, query="garden")) == []


async def test_memory_delete_reaches_only_a_visible_memory(
    tools: tuple[ToolRegistry, Memories],
) -> None:
    registry, mem = tools
    garden, _ = await mem.add("the garden needs water", None, "project:garden")
    outcome = await call(registry, "memory_delete", KERNEL, id=garden.id)
    assert not outcome.ok and f"no memory with id {garden.id}" in outcome.content
    outcome = await call(registry, "memory_delete", None, id=garden.id)
    assert not outcome.ok
    assert await mem.count() == 1
    assert result(await call(registry, "memory_delete", GARDEN, id=garden.id)) == {"ok": True}
    assert await mem.count() == 0
