"""/branches in the owner's chat (issue 38, seed 002 ``siblingNav``): what /rewind and
/undo cut is kept as a branch, listed with its fork, first words and size; a tap makes
it the live history (the history left kept as a branch, so switching back works), and
the next request the strict Anthropic simulator receives holds the branch's messages,
not the other's. Refused while a turn runs; with no branch, the refusal says how one
comes to exist.

Real PTB against the Bot API simulator, the real anthropic SDK, SQLite on disk.
"""

from __future__ import annotations

import json

from tests.sim.script import Reply, Text, text_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import CONV, BotHarness, Factory
from tests.telegram.test_pickers import labels, picker, rows, tap


def sent(h: BotHarness) -> str:
    return json.dumps(h.model.requests[-1].body["messages"], ensure_ascii=False)


async def rewind_to(h: BotHarness, message_id: int) -> str:
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_text("/rewind", reply_to_message_id=message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    return h.texts()[-1]


async def test_a_rewound_branch_is_listed_switched_to_and_back(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(*(text_reply(f"answer {n}") for n in ("one", "two", "three", "four")))
    await h.converse("q-one")
    first = h.bot_messages()[-1]
    await h.converse("q-two")
    await h.converse("q-three")
    assert "Rewound: 4 messages" in await rewind_to(h, first.message_id)
    assert await h.converse("q-other") == "answer four"
    four = h.bot_messages()[-1]
    assert four.reply_markup is not None  # its 🔁

    # The cut branch is listed: where it forks, its first words, its size; one button.
    shown = await picker(h, "/branches")
    assert "#1 · " in shown.text and "4 messages" in shown.text
    assert "after “answer one”" in shown.text and "“q-two”" in shown.text
    assert labels(shown) == ["#1 “q-two” (4)"]

    # A tap switches: the branch is what the model sees, the history left is a branch.
    switched = await tap(h, shown, "#1 “q-two” (4)")
    assert "Switched to branch #1" in switched.text and "kept as branch #2" in switched.text
    assert "answer three" in switched.text  # where the branch leaves off
    left = h.tg.message(OWNER, four.message_id)
    assert left is not None and left.reply_markup is None  # no longer the latest answer
    h.model.enqueue(text_reply("answer five"))
    assert await h.converse("q-four") == "answer five"
    raw = sent(h)
    assert "q-two" in raw and "answer three" in raw and "q-one" in raw
    assert "q-other" not in raw and "answer four" not in raw
    assert raw.count("q-one") == 1

    # Switching back (typed): the other branch again, nothing lost.
    listing = await h.converse("/branches")
    assert "#2 · " in listing and "“q-other”" in listing and "left by a switch" in listing
    reply = await h.converse("/branches 2")
    assert "Switched to branch #2" in reply and "kept as branch #1" in reply
    h.model.enqueue(text_reply("answer six"))
    assert await h.converse("q-five") == "answer six"
    raw = sent(h)
    assert "q-other" in raw and "answer four" in raw
    assert "q-two" not in raw and "q-four" not in raw and "answer five" not in raw

    # Each switch is in the audit trail, as the owner's.
    await h.kernel.audit.settled()
    rows = await h.kernel.audit.events(limit=1000)
    switches = [(r.actor, r.data) for r in rows if r.kind == "history.switched"]
    assert [(actor, data and data["branch"]) for actor, data in switches] == [
        ("owner", 1),
        ("owner", 2),
    ]


async def test_no_branches_says_how_they_come_to_exist(bot: Factory) -> None:
    h = await bot()
    reply = await h.converse("/branches")
    assert "no branches yet" in reply and "/undo" in reply and "/rewind" in reply
    h.model.enqueue(text_reply("an answer"))
    await h.converse("q")
    assert "no branches yet" in await h.converse("/branches")
    assert "no branch #7" in await h.converse("/branches 7")
    assert "takes a branch's number" in await h.converse("/branches two")
    refusals = h.tg.calls_to("sendMessage")[-3:]
    assert [c.params.get("reply_markup") for c in refusals] == [None] * 3  # no picker


async def test_a_switch_is_refused_while_a_turn_runs(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("answer one"), text_reply("answer two"))
    await h.converse("q-one")
    await h.converse("q-two")
    assert "Undone" in await h.converse("/undo")
    shown = await picker(h, "/branches")
    h.model.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=1))
    h.tg.inject_text("q-three")
    await h.under_way(requests=3)

    # Typed and tapped: both refused with the fix; the picker stays to tap later.
    assert "A turn is running" in await h.ask("/branches 1")
    button = next(b for row in rows(shown) for b in row if b["text"] == labels(shown)[0])
    answered = len(h.tg.calls_to("answerCallbackQuery"))
    h.tg.inject_callback(button["callback_data"], message_id=shown.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) > answered)
    answer = h.tg.calls_to("answerCallbackQuery")[-1].params
    assert "A turn is running" in answer["text"] and answer.get("show_alert")
    still = h.tg.message(OWNER, shown.message_id)
    assert still is not None and still.reply_markup == shown.reply_markup
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None
    assert (await h.kernel.agent.control.list_branches(session)).active == 0

    await h.ask("/cancel")
    await h.settle()
    reply = await h.converse("/branches 1")
    assert "Switched to branch #1" in reply
    h.model.enqueue(text_reply("answer three"))
    assert await h.converse("q-four") == "answer three"
    assert "answer two" in sent(h) and "q-three" not in sent(h)
