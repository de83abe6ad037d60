"""Memory that stays true (issue 39): a fact that contradicts a kept one supersedes it
(judged by the [titles] model) and `/memory #n` shows the earlier version, which recall
never offers; `/memory edit #n`, and the buttons under /memory and a memory (edit,
move, forget), each change in the audit trail; a press for a memory changed since it
was shown is refused in words.

Real PTB against the Bot API simulator, the real SDKs against the model simulators
(the judge is the titles model on the OpenAI simulator), SQLite on disk."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kernel.audit import kinds
from tests.sim.context import recalled_of
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, text_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import CONV, BotHarness, Factory
from tests.telegram.test_pickers import labels, last_answer, picker, tap
from tests.telegram.test_titles import titles_section
from tests.waiting import wait_until


async def changes(h: BotHarness) -> list[tuple[str, str, Any]]:
    """(action, actor, memory id) of the memory.changed audit rows, oldest first."""
    await h.kernel.audit.settled()
    rows = await h.kernel.audit.rows.events(limit=100, kinds=(kinds.MEMORY_CHANGED,))
    return [(r.data["action"], r.actor, r.data["memory"]) for r in rows if r.data]


async def test_a_contradicting_fact_supersedes_and_its_old_version_is_shown_not_recalled(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=titles_section(openai_sim))
    assert await h.ask("/remember My cat is called Mochi") == "Remembered (/memory lists them all)"
    assert openai_sim.requests == []  # nothing to compare with: no judge call
    openai_sim.enqueue(text_reply("1"))

    answer = await h.ask("/remember My cat is called Tofu now")

    assert answer == (
        "Memory updated: “My cat is called Tofu now” (it was “My cat is called Mochi”;"
        " the earlier version is kept: /memory #n shows it)"
    )
    [judged] = openai_sim.requests
    assert "1. My cat is called Mochi" in str(judged.body["messages"])
    [memory] = await h.kernel.store.list_memories()
    assert memory.text == "My cat is called Tofu now"
    listing = await h.ask("/memory")
    assert "Tofu" in listing and "Mochi" not in listing
    card = (await h.ask("/memory #1")).splitlines()
    assert card[0].startswith("Memory #1 · global · ")
    assert card[1:3] == ["My cat is called Tofu now", "Earlier versions:"]
    assert card[3].startswith("· until ") and card[3].endswith(
        ": My cat is called Mochi (replaced by a newer fact)"
    )
    h.model.enqueue(text_reply("Tofu."))
    openai_sim.enqueue(text_reply("The cat's name"))  # the new session's title
    await h.converse("What is my cat called?")
    layer = recalled_of(h.model.requests[-1])
    assert "Tofu" in layer and "Mochi" not in layer
    assert await changes(h) == [("superseded", "owner", memory.id)]
    # the judge's call is in the ledger as the memory's own purpose
    await h.kernel.audit.settled()
    calls = await h.kernel.audit.rows.events(limit=100, kinds=(kinds.MODEL_CALL,))
    purposes = [c.data["purpose"] for c in calls if c.data and c.data["model"] == "tiny"]
    assert purposes.count("memory") == 1


async def test_edit_move_and_forget_by_command_and_buttons_are_audited(
    bot: Factory, tmp_path: Path
) -> None:
    projects = tmp_path / "projects"
    projects.mkdir()
    (projects / "garden.md").write_text("---\ndescription: the garden\n---\n")
    h = await bot()
    await h.ask("/remember drinks green tea")
    await h.ask("/remember waters the roses on Sundays")
    await h.ask("/project garden")

    listing = await picker(h, "/memory")
    assert labels(listing) == ["#1", "#2"]
    card = await tap(h, listing, "#1")  # the listing becomes the memory's card
    assert card.text.splitlines()[1:] == ["waters the roses on Sundays", "No earlier versions"]
    assert labels(card) == ["✏️ Edit", "📁 To project garden", "🗑 Forget"]
    old_tea = await tap(h, await picker(h, "/memory"), "#2")

    edited = await h.ask("/memory edit #2 drinks jasmine tea")
    assert edited.splitlines()[0] == "Edited (the earlier version is kept)"
    assert "drinks green tea (edited)" in edited
    # the card shown before the edit is stale: its forget changes nothing
    await tap(h, old_tea, "🗑 Forget")
    assert last_answer(h)["show_alert"] is True
    assert last_answer(h)["text"].startswith("That memory was deleted, changed")
    assert await h.kernel.memories.count() == 2

    moved = await tap(h, card, "📁 To project garden")
    assert moved.text.startswith("Moved to project garden\nMemory #")
    [roses] = await h.kernel.memories.search("roses", 1)
    assert roses.scope == "project:garden"
    assert labels(moved) == ["✏️ Edit", "📁 To global", "🗑 Forget"]
    hint = await tap(h, moved, "✏️ Edit")
    assert hint.text.startswith("Send /memory edit #1 <new text> to change this memory")
    forgotten = await tap(h, hint, "🗑 Forget")
    assert forgotten.text == "Deleted 1 memory(ies)"
    assert [m.text for m in await h.kernel.store.list_memories()] == ["drinks jasmine tea"]
    assert [(action, actor) for action, actor, _ in await changes(h)] == [
        ("edited", "owner"),
        ("moved", "owner"),
        ("forgotten", "owner"),
    ]
    assert (await h.kernel.agent.scopes.current(CONV)).project == "garden"
    assert h.tg.chat(OWNER)  # the chat holds what was said


async def test_a_turns_remembered_fact_does_not_wait_for_the_judge(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    """A `<remember>` tag's fact is kept at once; whether it replaces a kept one is judged
    after the reply went (a slow judge never holds the owner's answer)."""
    h = await bot(extra=titles_section(openai_sim))
    await h.ask("/remember My cat is called Mochi")
    gate = asyncio.Event()
    openai_sim.enqueue_for("You compare a new fact", Reply(Text("1"), gate=gate))  # judge
    openai_sim.enqueue(text_reply("Cat names"))  # the session's title
    h.model.enqueue(text_reply("Noted.<remember>My cat is called Tofu now</remember>"))

    assert await h.converse("My cat is called Tofu now") == "Noted."
    await wait_until(lambda: any("Mochi" in str(r.body) for r in openai_sim.requests))
    texts = sorted(m.text for m in await h.kernel.store.list_memories())
    assert texts == ["My cat is called Mochi", "My cat is called Tofu now"]  # both kept

    gate.set()

    async def folded() -> bool:
        return len(await h.kernel.store.list_memories()) == 1

    await wait_until(folded)
    [memory] = await h.kernel.store.list_memories()
    assert memory.text == "My cat is called Tofu now"
    [old] = await h.kernel.store.memory_versions(memory.id)
    assert (old.text, old.how) == ("My cat is called Mochi", "superseded")
    assert await changes(h) == [("superseded", "model", memory.id)]


async def test_the_next_page_of_a_listing_longer_than_one_message_is_shown(
    bot: Factory,
) -> None:
    """A listing over Telegram's 4096 characters came as two messages; ▶ cannot edit
    it into one, so the next page comes as new messages, its buttons under the last."""
    h = await bot()
    for n in range(7):
        await h.kernel.memories.remember(f"fact {n} " + "x" * 700, scope="global", actor="t")
    listing = await picker(h, "/memory")
    assert len(h.bot_messages()) == 2 and labels(listing)[-1] == "▶"

    await tap(h, listing, "▶")

    last = h.bot_messages()[-1]
    assert last.message_id != listing.message_id
    assert labels(last) == ["◀", "#7"]
    assert last.text.endswith("fact 0 " + "x" * 700)


async def test_an_edit_into_another_memorys_fact_names_it_by_its_number(bot: Factory) -> None:
    """The refusal names the other memory as /forget knows it (#n of the listing), not
    by its database id (here 1, while /forget #1 would delete the memory edited)."""
    h = await bot()
    await h.ask("/remember drinks green tea")
    await h.ask("/remember waters the roses")
    await h.ask("/memory")  # #1 the roses, #2 the tea

    answer = await h.ask("/memory edit #1 drinks green tea")

    assert answer == (
        "The same fact is already memory #2: nothing changed; change that one,"
        " or forget it first with /forget #2"
    )
