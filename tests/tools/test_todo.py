"""The todo_write tool through the real registry: its replies, its refusals (each naming
the item and the fix), the plan kept per session in memory, and the plan hook."""

from __future__ import annotations

from typing import Any

import pytest

from kernel.agent.scope import Outlook
from kernel.core.errors import ToolError
from kernel.tools import todo
from kernel.tools.registry import ToolContext, ToolOutcome, ToolRegistry
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim

PLAN = [
    {"content": "Read the config", "status": "completed"},
    {"content": "Fix the parser", "status": "in_progress", "active_form": "Fixing the parser"},
    {"content": "Run the tests", "status": "pending"},
]


def setup() -> tuple[ToolRegistry, todo.Plans, list[list[dict[str, str]]]]:
    registry, plans = ToolRegistry(), todo.Plans()
    todo.register(registry, plans)
    return registry, plans, []


def context(session: int, shown: list[list[dict[str, str]]]) -> ToolContext:
    return ToolContext(session_id=session, plan=shown.append)


async def write(registry: ToolRegistry, ctx: ToolContext, items: Any) -> ToolOutcome:
    return await registry.call("todo_write", {"items": items}, ctx)


async def test_a_plan_is_set_updated_and_closed_with_replies_the_model_can_act_on() -> None:
    registry, plans, shown = setup()
    ctx = context(1, shown)

    first = await write(registry, ctx, PLAN)
    assert first.ok
    assert first.content == (
        'plan set: 1/3 done; in progress: "Fix the parser"; next: "Run the tests"'
    )
    assert shown == [
        [
            {"content": "Read the config", "status": "completed"},
            {
                "content": "Fix the parser",
                "status": "in_progress",
                "active_form": "Fixing the parser",
            },
            {"content": "Run the tests", "status": "pending"},
        ]
    ]

    waiting = [{**item, "status": "pending"} for item in PLAN[1:]]
    second = await write(registry, ctx, [PLAN[0], *waiting])
    assert second.content == (
        "plan updated: 1/3 done; nothing in progress: mark the item you start as "
        'in_progress; next: "Fix the parser"'
    )
    two = [{**item, "status": "in_progress"} for item in PLAN]
    assert "keep one item in_progress at a time" in (await write(registry, ctx, two)).content

    done = [{**item, "status": "completed"} for item in PLAN]
    closed = await write(registry, ctx, done)
    assert closed.content.startswith("plan updated: 3/3 done; every item is completed")
    assert shown[-1] == [
        {"content": "Read the config", "status": "completed"},
        {"content": "Fix the parser", "status": "completed", "active_form": "Fixing the parser"},
        {"content": "Run the tests", "status": "completed"},
    ]
    assert plans.get(1) == []  # a finished plan is forgotten: the next one starts anew
    assert (await write(registry, ctx, PLAN)).content.startswith("plan set: ")
    assert (await write(registry, ctx, [])).content == "plan cleared"
    assert shown[-1] == [] and plans.get(1) == []


async def test_each_session_has_its_own_plan_and_a_new_one_starts_empty() -> None:
    registry, plans, shown = setup()
    await write(registry, context(1, shown), PLAN)
    other = await write(registry, context(2, shown), PLAN[:1] + PLAN[2:])
    assert other.content.startswith("plan set: 1/2 done")
    assert [i.content for i in plans.get(2)] == ["Read the config", "Run the tests"]
    assert [i.content for i in plans.get(1)] == [i["content"] for i in PLAN]
    assert (await write(registry, context(1, shown), PLAN)).content.startswith("plan updated")
    assert plans.get(3) == []


async def test_refusals_name_the_item_and_the_fix_and_show_nothing() -> None:
    registry, plans, shown = setup()
    ctx = context(1, shown)
    cases: list[tuple[Any, str]] = [
        (
            [PLAN[0], {"content": "  ", "status": "pending"}],
            "item 1: content is empty; say in a few words what the step is",
        ),
        (
            [{"content": "Ship it", "status": "done"}],
            'item 0 ("Ship it"): status "done" is not one of pending, in_progress, completed',
        ),
        (
            [{"content": "Ship it"}],
            'item 0 ("Ship it"): status missing is not one of pending, in_progress, completed',
        ),
        (["Ship it"], "parameter 'items' item 0 must be an object, got a string"),
        ([{"content": 7, "status": "pending"}], "item 0: content must be a string"),
        (
            [{"content": "x" * 301, "status": "pending"}],
            "item 0: content has 301 characters; keep it within 300",
        ),
        (
            [{"content": "one\ntwo", "status": "pending"}],
            "item 0: content holds a control character",
        ),
        (
            [{"content": "evil\u202etxt.exe", "status": "pending"}],
            "item 0: content holds a control character",
        ),
        (
            [{"content": "step \ud83d", "status": "pending"}],  # a broken surrogate
            "item 0: content holds a control character",
        ),
        (
            [{"content": "Ship", "status": "pending", "active_form": "Ship\tping"}],
            "item 0: active_form holds a control character",
        ),
        (
            [{"content": f"step {n}", "status": "pending"} for n in range(31)],
            "the plan has 31 items; keep it within 30",
        ),
    ]
    for items, words in cases:
        outcome = await write(registry, ctx, items)
        assert not outcome.ok, items
        assert words in outcome.content, (words, outcome.content)
    assert shown == [] and len(plans) == 0


async def test_content_is_trimmed_and_claude_codes_active_form_is_understood() -> None:
    registry, plans, shown = setup()
    items = [
        {"content": "  Run the tests \u00a0", "status": "in_progress", "activeForm": "Running"}
    ]
    outcome = await write(registry, context(1, shown), items)
    assert outcome.ok and 'in progress: "Run the tests"' in outcome.content
    assert shown == [
        [{"content": "Run the tests", "status": "in_progress", "active_form": "Running"}]
    ]
    longest = [{"content": "é" * 300, "status": "pending"} for _ in range(30)]
    assert (await write(registry, context(2, shown), longest)).ok


async def test_without_a_hook_or_session_the_plan_is_still_kept() -> None:
    registry, plans, _ = setup()
    outcome = await registry.call("todo_write", {"items": PLAN}, None)
    assert outcome.ok and len(plans) == 1


def test_plans_are_bounded_least_recent_first() -> None:
    plans = todo.Plans(limit=2)
    item = [todo.PlanItem("a", "pending")]
    for key in (1, 2, 1, 3):
        plans.put(key, item)
    assert len(plans) == 2 and plans.get(2) == [] and plans.get(1) == item


async def test_offered_to_the_owner_and_to_guests_only_when_listed(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    prompt = kernel.agent.prompt
    assert "todo_write" in prompt.offered(None, Outlook())
    assert "todo_write" not in prompt.offered(("memory_search",), Outlook())
    assert "todo_write" in prompt.offered(("todo_write",), Outlook())
    spec = next(s for s in kernel.tools.specs() if s.name == "todo_write")
    assert "not for a single step" in spec.description
    assert "not kept across sessions or a restart" in spec.description
    item = spec.parameters["properties"]["items"]["items"]
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]


def test_read_items_refuses_what_the_registry_let_through_in_the_same_words() -> None:
    with pytest.raises(ToolError, match=r'item 1 must be an object like \{"content"'):
        todo.read_items([PLAN[0], "x"])
    with pytest.raises(ToolError, match="items must be an array"):
        todo.read_items({"content": "x"})
