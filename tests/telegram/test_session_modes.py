"""Plan and read-only modes in the owner's chat (issue 38): the tools that write or act
are hidden from the model and refused when called anyway; the model asks to leave plan
mode with its plan and the owner confirms with a button; ``/mode`` shows and switches
the mode (buttons too), ``/status`` names a mode other than act, and the audit trail
records every change."""

from __future__ import annotations

from typing import Any

from kernel.audit.kinds import MODE_CHANGED
from tests.sim.script import text_reply, tool_reply
from tests.sim.telegram_sim import ChatMessage
from tests.telegram.conftest import BotHarness, Factory, asking


def offered(h: BotHarness, index: int) -> set[str]:
    """The tool names of the model's request ``index``."""
    return {tool["name"] for tool in h.model.requests[index].body.get("tools", [])}


def last_result(h: BotHarness, index: int) -> dict[str, Any]:
    """The tool_result block the model's request ``index`` ends with."""
    blocks = h.model.requests[index].body["messages"][-1]["content"]
    [result] = [b for b in blocks if b["type"] == "tool_result"]
    return dict(result)


def buttons(message: ChatMessage) -> list[dict[str, Any]]:
    assert message.reply_markup is not None
    return [b for row in message.reply_markup["inline_keyboard"] for b in row]


async def mode_changes(h: BotHarness) -> list[tuple[str, str, str, str]]:
    audit = h.kernel.agent.audit
    await audit.settled()
    rows = sorted((r for r in await audit.events(limit=1000) if r.kind == MODE_CHANGED), key=id_of)
    return [(r.actor, r.data["before"], r.data["mode"], r.data["how"]) for r in rows if r.data]


def id_of(row: Any) -> int:
    return int(row.id)


async def test_plan_mode_hides_and_refuses_writes_until_the_owner_confirms(bot: Factory) -> None:
    h = await bot()
    plan = "1. Save that the owner likes tea"
    h.model.enqueue(
        tool_reply("enter_plan_mode", {}),
        tool_reply("memory_add", {"text": "likes tea"}),  # called anyway: refused
        tool_reply("exit_plan_mode", {"plan": plan}),
        tool_reply("memory_add", {"text": "likes tea"}),
        text_reply("Saved."),
    )
    h.tg.inject_text("plan it, then remember that I like tea")

    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    asked = next(m for m in h.bot_messages() if asking(m))
    assert "The plan is ready" in asked.text and plan.removeprefix("1. ") in asked.text
    # Before: every tool; in plan mode: the ones that read and the control tools.
    assert {"memory_add", "memory_search", "enter_plan_mode", "exit_plan_mode"} <= offered(h, 0)
    planning = offered(h, 1)
    assert "memory_add" not in planning and "memory_delete" not in planning
    assert {"memory_search", "web_fetch", "enter_plan_mode", "exit_plan_mode"} <= planning
    assert "Plan mode is on" in str(last_result(h, 1)["content"])
    refused = last_result(h, 2)
    assert refused["is_error"] is True and "plan mode" in str(refused["content"])
    assert "exit_plan_mode" in str(refused["content"])
    assert await h.kernel.store.list_memories() == []

    approve, keep = buttons(asked)
    assert (approve["text"], keep["text"]) == ("✅ Approve and go", "✏️ Keep planning")
    h.tg.inject_callback(approve["callback_data"], message_id=asked.message_id)
    await h.settle()

    assert "memory_add" in offered(h, 3)  # back in act: offered again, and it runs
    assert "back in act mode" in str(last_result(h, 3)["content"])
    assert [m.text for m in await h.kernel.store.list_memories()] == ["likes tea"]
    assert h.texts()[-1] == "Saved."
    assert await mode_changes(h) == [
        ("model", "act", "plan", "tool"),
        ("owner", "plan", "act", "confirm"),
    ]


async def test_mode_command_read_only_holds_across_new_sessions(bot: Factory) -> None:
    h = await bot()
    shown = await h.ask("/mode")
    assert "Work mode: act (every tool)" in shown
    picker = h.bot_messages()[-1]
    labels = [b["text"] for b in buttons(picker)]
    assert labels[:3] == ["✅ act", "plan", "read_only"]

    h.tg.inject_callback(buttons(picker)[2]["callback_data"], message_id=picker.message_id)
    await h.tg.wait_until(lambda: "switched to read_only" in h.texts()[-1])

    h.model.enqueue(tool_reply("memory_add", {"text": "x"}), text_reply("I may not."))
    assert await h.converse("remember x") == "I may not."
    assert "memory_add" not in offered(h, 0) and "memory_search" in offered(h, 0)
    refused = last_result(h, 1)
    assert refused["is_error"] is True and "read-only" in str(refused["content"])
    assert "/mode act" in str(refused["content"])
    assert await h.kernel.store.list_memories() == []
    assert "read_only mode" in await h.ask("/status")

    # A new session (as after /new or a restart) starts in the chat's mode.
    await h.ask("/new")
    h.model.enqueue(tool_reply("exit_plan_mode", {"plan": "p"}), text_reply("Still read-only."))
    assert await h.converse("let me act") == "Still read-only."
    assert "memory_add" not in offered(h, 2)
    assert "only they can change it" in str(last_result(h, 3)["content"])

    assert "switched to act" in await h.ask("/mode act")
    h.model.enqueue(text_reply("ok"))
    await h.converse("hi")
    assert "memory_add" in offered(h, 4)
    assert "mode" not in (await h.ask("/status")).split("\n")[1]
    assert await mode_changes(h) == [
        ("owner", "act", "read_only", "command"),
        ("owner", "read_only", "act", "command"),
    ]


async def test_the_models_plan_mode_is_its_sessions_not_the_chats(bot: Factory) -> None:
    """The model's enter_plan_mode switches its session only: after /new the chat is in
    the mode the owner chose (act), not held in a plan mode nobody chose for it."""
    h = await bot()
    h.model.enqueue(tool_reply("enter_plan_mode", {}), text_reply("Planning first."))
    assert await h.converse("think it through first") == "Planning first."
    assert "plan mode" in await h.ask("/status")

    await h.ask("/new")
    assert "Work mode: act" in await h.ask("/mode")
    assert "mode" not in (await h.ask("/status")).split("\n")[1]


async def test_the_mode_picker_marks_both_current_modes(bot: Factory) -> None:
    """/mode's buttons hold two choices at once, the work mode and the prompt mode: each
    current one is marked (the prompt mode in use had no button at all)."""
    h = await bot()
    await h.ask("/mode")
    labels = [b["text"] for b in buttons(h.bot_messages()[-1])]
    assert labels == ["✅ act", "plan", "read_only", "✅ default", "codex", "claude"]
