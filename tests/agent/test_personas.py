"""A chat's persona in real turns (issue 18): its instructions layered over SOUL.md, its
allow-list limiting what is offered AND what runs, its model and reasoning routed, and
its name as a routing-rule condition. Personas are files the test writes beside
config.toml, as the owner would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.agent.agent import UserInput
from kernel.agent.scope import PERSONA
from kernel.app import Kernel
from kernel.core.errors import ProfileError
from kernel.core.events import Completed, ErrorEvent
from tests.conftest import KernelFactory
from tests.routing.kit import FALLBACK, reply_of, two_models
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, ToolUse, text_reply

CONV = "console:persona"


def write_profile(kernel_or_base: Kernel | Path, folder: str, name: str, text: str) -> Path:
    base = kernel_or_base.config.base_dir if isinstance(kernel_or_base, Kernel) else kernel_or_base
    path = base / folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


READER = """---
name: reader
description: reads memories, changes nothing
tools: [memory_search, ask_*]
---
Answer like a librarian: short and exact.
"""


async def test_the_allow_list_limits_what_is_offered_and_what_runs(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    write_profile(kernel, "personas", "reader", READER)
    row, _ = await kernel.memories.add("The owner's bike is blue")
    await kernel.agent.scopes.set(CONV, PERSONA, "reader")
    # The model asks for a tool outside the list (one that would delete a memory).
    anthropic_sim.enqueue(
        Reply(Text("Let me tidy."), ToolUse("memory_delete", {"id": row.id})),
        text_reply("I cannot do that here."),
    )
    final = await kernel.agent.start_turn(CONV, UserInput("forget my bike")).wait()

    assert isinstance(final, Completed)
    first = anthropic_sim.requests[0].body
    assert sorted(t["name"] for t in first["tools"]) == ["ask_user", "memory_search"]
    system = json.dumps(first["system"], ensure_ascii=False)
    assert "Answer like a librarian" in system
    assert system.index("Answer like a librarian") > system.index("Kernel")  # over SOUL.md
    result = anthropic_sim.requests[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True and "reader" in result["content"]
    assert [m.id for m in await kernel.store.list_memories()] == [row.id]  # never ran

    # Another chat has no persona: every tool, no librarian.
    anthropic_sim.enqueue(text_reply("hi"))
    await kernel.agent.start_turn("console:other", UserInput("hi")).wait()
    other = anthropic_sim.requests[2].body
    assert "memory_delete" in [t["name"] for t in other["tools"]]
    assert "librarian" not in json.dumps(other["system"], ensure_ascii=False)


async def test_a_new_session_inherits_the_persona_and_off_clears_it(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    write_profile(kernel, "personas", "reader", READER)
    await kernel.agent.scopes.set(CONV, PERSONA, "reader")
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
    await kernel.agent.start_turn(CONV, UserInput("a")).wait()
    first_session = kernel.agent.sessions.current_session(CONV)
    kernel.agent.sessions.new_session(CONV)
    await kernel.agent.start_turn(CONV, UserInput("b")).wait()
    assert kernel.agent.sessions.current_session(CONV) != first_session
    assert "librarian" in json.dumps(anthropic_sim.requests[1].body["system"], ensure_ascii=False)
    assert (await kernel.agent.scopes.current(CONV)).persona == "reader"

    await kernel.agent.scopes.set(CONV, PERSONA, None)
    await kernel.agent.start_turn(CONV, UserInput("c")).wait()
    assert "librarian" not in json.dumps(anthropic_sim.requests[2].body["system"])
    assert (await kernel.agent.scopes.current(CONV)).persona == ""


async def test_unknown_and_broken_personas_are_refused_by_name(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    write_profile(kernel, "personas", "reader", READER)
    write_profile(kernel, "personas", "typo", "---\nname: typo\ndescription: x\ntool: [a]\n---\n")
    write_profile(
        kernel,
        "personas",
        "elsewhere",
        "---\nname: elsewhere\ndescription: x\nmodel: nope:m\n---\n",
    )
    with pytest.raises(ProfileError) as unknown:
        await kernel.agent.scopes.set(CONV, PERSONA, "writer")
    assert "writer" in str(unknown.value) and "reader" in str(unknown.value)
    with pytest.raises(ProfileError) as typo:
        await kernel.agent.scopes.set(CONV, PERSONA, "typo")
    assert "tool" in str(typo.value)  # the misspelt key is named, never ignored
    with pytest.raises(ProfileError) as model:
        await kernel.agent.scopes.set(CONV, PERSONA, "elsewhere")
    assert "nope:m" in str(model.value) and "main" in str(model.value)
    assert (await kernel.agent.scopes.current(CONV)).persona == ""


async def test_a_persona_deleted_after_it_was_chosen_leaves_the_chat_working(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    path = write_profile(kernel, "personas", "reader", READER)
    await kernel.agent.scopes.set(CONV, PERSONA, "reader")
    path.unlink()
    anthropic_sim.enqueue(text_reply("still here"))
    final = await kernel.agent.start_turn(CONV, UserInput("hi")).wait()
    assert isinstance(final, Completed) and final.reply == "still here"
    assert "memory_delete" in [t["name"] for t in anthropic_sim.requests[0].body["tools"]]


async def test_the_personas_model_and_reasoning_win_over_the_rules(tmp_path: Path) -> None:
    rules = [{"name": "everything to main", "pattern": ".", "primary": "main:model-a"}]
    async with two_models(tmp_path, rules=rules) as pair:
        write_profile(
            tmp_path,
            "personas",
            "cheap",
            f"---\nname: cheap\ndescription: the small model\nmodel: {FALLBACK}\n---\nBe brief.\n",
        )
        await pair.kernel.agent.scopes.set(CONV, PERSONA, "cheap")
        pair.backup.enqueue(text_reply("from backup"))
        events = await pair.turn("hello", CONV)
        assert reply_of(events) == "from backup"
        assert not pair.main.requests and len(pair.backup.requests) == 1
        decision = await pair.last_decision()
        assert decision.why == "persona" and decision.chosen == FALLBACK

        # Without the persona the rule decides again.
        await pair.kernel.agent.scopes.set(CONV, PERSONA, None)
        pair.main.enqueue(text_reply("from main"))
        assert reply_of(await pair.turn("hello", CONV)) == "from main"
        assert (await pair.last_decision()).why == "rule"


async def test_a_rule_can_match_the_persona(tmp_path: Path) -> None:
    rules = [{"name": "reader to backup", "persona": ["reader"], "primary": FALLBACK}]
    async with two_models(tmp_path, rules=rules) as pair:
        write_profile(tmp_path, "personas", "reader", READER)
        pair.main.enqueue(text_reply("main answers"))
        assert reply_of(await pair.turn("hi", CONV)) == "main answers"
        await pair.kernel.agent.scopes.set(CONV, PERSONA, "reader")
        pair.backup.enqueue(text_reply("backup answers"))
        assert reply_of(await pair.turn("hi", CONV)) == "backup answers"
        decision = await pair.last_decision()
        assert decision.why == "rule" and decision.rule == "reader to backup"


async def test_the_personas_reasoning_reaches_the_wire(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    write_profile(
        kernel,
        "personas",
        "deep",
        "---\nname: deep\ndescription: thinks\nreasoning: high\n---\nThink it through.\n",
    )
    await kernel.agent.scopes.set(CONV, PERSONA, "deep")
    anthropic_sim.enqueue(text_reply("done"))
    await kernel.agent.start_turn(CONV, UserInput("prove it")).wait()
    body = anthropic_sim.requests[0].body
    assert body.get("thinking", {}).get("type") == "adaptive"
    assert body.get("output_config", {}).get("effort") == "high"


async def test_a_persona_broken_after_it_was_chosen_refuses_the_turn_by_name(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    path = write_profile(kernel, "personas", "reader", READER)
    await kernel.agent.scopes.set(CONV, PERSONA, "reader")
    path.write_text(READER.replace("tools:", "tool:"), encoding="utf-8")  # a typo
    final = await kernel.agent.start_turn(CONV, UserInput("forget my bike")).wait()

    assert isinstance(final, ErrorEvent) and final.code == "profile_invalid"
    assert "reader" in final.message and "tool" in final.message
    assert not anthropic_sim.requests  # nothing sent without its allow-list
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None and not await kernel.store.load_messages(session)


async def test_a_personas_model_no_longer_configured_is_ignored_not_the_persona(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    path = write_profile(kernel, "personas", "reader", READER)
    await kernel.agent.scopes.set(CONV, PERSONA, "reader")
    path.write_text(READER.replace("tools:", "model: gone:model\ntools:"), encoding="utf-8")
    anthropic_sim.enqueue(text_reply("ok"))
    final = await kernel.agent.start_turn(CONV, UserInput("hi")).wait()
    assert isinstance(final, Completed) and final.reply == "ok"
    first = anthropic_sim.requests[0].body
    assert sorted(t["name"] for t in first["tools"]) == ["ask_user", "memory_search"]


async def audit_kinds(kernel: Kernel) -> list[str]:
    rows = await kernel.store.read(
        "kinds", lambda conn: conn.execute("SELECT kind FROM audit_events ORDER BY id").fetchall()
    )
    return [row[0] for row in rows]


async def test_a_persona_chosen_between_two_turns_is_read_fresh(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    """Issue 37: a turn's start assumes the session as the turn before read it and checks
    that in the job that stores its message; a persona chosen since is found there, and
    the turn goes on with it (its message stored once, its audit row once)."""
    kernel = await make_kernel(anthropic_sim)
    write_profile(kernel, "personas", "reader", READER)
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"))
    assert await kernel.agent.start_turn(CONV, UserInput("first")).wait() == Completed(1, "one")
    await kernel.agent.scopes.set(CONV, PERSONA, "reader")
    assert await kernel.agent.start_turn(CONV, UserInput("second")).wait() == Completed(1, "two")

    body = anthropic_sim.requests[1].body
    assert sorted(t["name"] for t in body["tools"]) == ["ask_user", "memory_search"]
    assert "librarian" in json.dumps(body["system"], ensure_ascii=False)
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    stored = [m.role for m in await kernel.store.load_messages(session)]
    assert stored == ["user", "assistant"] * 2
    assert (await audit_kinds(kernel)).count("message.received") == 2


async def test_a_persona_broken_after_a_turn_refuses_the_next_with_nothing_stored(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    path = write_profile(kernel, "personas", "reader", READER)
    await kernel.agent.scopes.set(CONV, PERSONA, "reader")
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"))
    assert await kernel.agent.start_turn(CONV, UserInput("first")).wait() == Completed(1, "one")
    kinds = await audit_kinds(kernel)
    path.write_text(READER.replace("tools:", "tool:"), encoding="utf-8")  # a typo
    final = await kernel.agent.start_turn(CONV, UserInput("second")).wait()

    assert isinstance(final, ErrorEvent) and final.code == "profile_invalid"
    assert len(anthropic_sim.requests) == 1
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    assert [m.role for m in await kernel.store.load_messages(session)] == ["user", "assistant"]
    assert (await audit_kinds(kernel))[: len(kinds)] == kinds
    assert "message.received" not in (await audit_kinds(kernel))[len(kinds) :]

    # Left since (the broken one no longer named): the turn the stale one would refuse
    # goes on, as the session is now.
    await kernel.agent.scopes.set(CONV, PERSONA, None)
    assert await kernel.agent.start_turn(CONV, UserInput("third")).wait() == Completed(1, "two")
    assert len(anthropic_sim.requests[1].body["tools"]) > 2
