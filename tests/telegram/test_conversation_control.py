"""/retry and /undo in the owner's chat (issue 20), against the strict Anthropic
simulator: what is cut never reaches the model again, and the next request is valid."""

from __future__ import annotations

import json

from tests.sim.script import Reply, Text, ToolUse, text_reply
from tests.telegram.conftest import CONV, Factory
from tests.telegram.test_inbox import rows, states_become


async def test_retry_answers_again_and_undo_cuts_one_exchange_with_its_tools(
    bot: Factory,
) -> None:
    h = await bot()
    h.model.enqueue(text_reply("first answer"))
    assert await h.converse("q-one") == "first answer"
    h.model.enqueue(
        Reply(Text("noting"), ToolUse("memory_add", {"text": "likes tea"})),
        text_reply("bad answer"),
    )
    assert (await h.converse("q-two")).endswith("bad answer")

    # /retry: the same message answered again, the old answer out of the request.
    h.model.enqueue(text_reply("better answer"))
    assert (await h.converse("/retry")).endswith("better answer")
    raw = json.dumps(h.model.requests[-1].body["messages"])
    assert "bad answer" not in raw and "memory_add" not in raw, raw
    assert raw.count("q-two") == 1 and "first answer" in raw

    # /undo: the retried exchange goes; then one with a tool pair goes whole.
    h.model.enqueue(
        Reply(Text("noting"), ToolUse("memory_add", {"text": "likes coffee"})),
        text_reply("third answer"),
    )
    assert (await h.converse("q-three")).endswith("third answer")
    reply = await h.converse("/undo")
    assert "Undone" in reply and "(4 messages)" in reply  # message, call, result, answer
    h.model.enqueue(text_reply("fourth answer"))
    assert await h.converse("q-four") == "fourth answer"
    raw = json.dumps(h.model.requests[-1].body["messages"])
    assert "q-three" not in raw and "memory_add" not in raw and "third answer" not in raw
    assert "better answer" in raw and "q-one" in raw

    # /history names the branches kept in the history.
    assert "Cut branches: 2" in await h.converse("/history")


async def test_nothing_to_undo_or_retry_is_refused_with_the_fix(bot: Factory) -> None:
    h = await bot()
    assert "Nothing to undo" in await h.converse("/undo")
    assert "Nothing to retry" in await h.converse("/retry")
    assert "as a reply" in await h.converse("/rewind")
    assert h.model.requests == []


def retry_button(message: object) -> str:
    markup = getattr(message, "reply_markup", None)
    assert markup is not None, "a final reply carries 🔁"
    (button,) = [b for row in markup["inline_keyboard"] for b in row]
    data = str(button["callback_data"])
    assert data.startswith("retry:")
    return data


async def test_the_retry_button_of_the_latest_answer_only(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("old answer"), text_reply("meh answer"))
    await h.converse("q-one")
    old = h.bot_messages()[-1]
    old_data = retry_button(old)
    await h.converse("q-two")
    latest = h.bot_messages()[-1]
    latest_data = retry_button(latest)
    assert old.reply_markup is None  # one 🔁, on the newest answer (issue 34)

    # A stale press of an older answer's 🔁 is told it cannot: nothing reaches the model.
    calls = len(h.model.requests)
    h.tg.inject_callback(old_data, message_id=old.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) >= 1)
    toast = h.tg.calls_to("answerCallbackQuery")[-1].params.get("text")
    assert toast == "Only the latest answer can be retried"
    await h.settle()
    assert len(h.model.requests) == calls

    # The latest one's answers again, without the answer it replaces.
    h.model.enqueue(text_reply("good answer"))
    h.tg.inject_callback(latest_data, message_id=latest.message_id)
    await h.tg.wait_until(lambda: "good answer" in h.texts())
    await h.settle()
    sent = json.dumps(h.model.requests[-1].body["messages"])
    assert "meh answer" not in sent and sent.count("q-two") == 1 and "old answer" in sent
    # A second press of the same (now superseded) button runs nothing.
    calls = len(h.model.requests)
    h.tg.inject_callback(latest_data, message_id=latest.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) >= 3)
    await h.settle()
    assert len(h.model.requests) == calls


async def test_rewind_as_a_reply_cuts_what_follows_that_answer(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(
        text_reply("answer one"),
        Reply(Text("noting"), ToolUse("memory_add", {"text": "likes tea"})),
        text_reply("answer two"),
        text_reply("answer three"),
    )
    await h.converse("q-one")
    first = h.bot_messages()[-1]
    await h.converse("q-two")
    await h.converse("q-three")
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_text("/rewind", reply_to_message_id=first.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    assert "Rewound: 6 messages" in h.texts()[-1]
    h.model.enqueue(text_reply("answer four"))
    assert await h.converse("q-four") == "answer four"
    sent = json.dumps(h.model.requests[-1].body["messages"])
    assert "answer one" in sent and "q-two" not in sent and "answer three" not in sent
    # A reply to a message that is no answer of mine (a notice) is refused with the fix.
    notice = h.bot_messages()[-2]  # "Rewound: …" carries no 🔁
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_text("/rewind", reply_to_message_id=notice.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    assert "has no 🔁" in h.texts()[-1]


async def test_a_retry_keeps_its_command_row_open_while_it_runs(bot: Factory) -> None:
    """While the retried turn runs, /retry's inbox row stays open (a crash now is told
    on the next start); a /cancel then settles it, and the old answer is seen again."""
    h = await bot()
    h.model.enqueue(text_reply("first"), Reply(Text("slow", chunks=["sl", "ow"]), stall_after=1))
    assert await h.converse("q") == "first"
    h.tg.inject_text("/retry")
    await h.under_way(requests=2)
    commands = [r for r in await rows(h) if r.kind == "command"]
    assert [r.state for r in commands] == ["open"]
    await h.ask("/cancel")
    await h.settle()
    expected = [("text", "answered"), ("command", "cancelled"), ("command", "answered")]
    await states_become(h, expected, kinds=True)
    h.model.enqueue(text_reply("second"))
    await h.kernel.agent.sessions.wait_idle(CONV, 30)
    assert await h.converse("q2") == "second"
    raw = json.dumps(h.model.requests[-1].body["messages"])
    assert raw.count('"q"') == 1 and "first" in raw  # the cancelled retry gave it back


async def test_a_strangers_press_of_the_retry_button_runs_nothing(bot: Factory) -> None:
    """Someone else pressing 🔁 (a forwarded answer, a group the bot was added to) is
    dropped before any handler: no retry, no cut, nothing sent to the model."""
    h = await bot()
    h.model.enqueue(text_reply("the answer"))
    await h.converse("q")
    answer = h.bot_messages()[-1]
    data = retry_button(answer)
    calls = len(h.model.requests)
    h.tg.inject_callback(data, message_id=answer.message_id, user_id=4242)
    h.tg.inject_callback(data, message_id=answer.message_id, user_id=4242, chat_id=-100)
    await h.settle()
    assert len(h.model.requests) == calls
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None
    assert await h.kernel.agent.control.branches(session) == (0, 0)  # nothing was cut
    h.model.enqueue(text_reply("next"))
    assert await h.converse("q2") == "next"
    assert "the answer" in json.dumps(h.model.requests[-1].body["messages"])


async def test_the_owners_commands_are_audited_as_the_owner(bot: Factory) -> None:
    """/model, /undo, /rewind and /retry from the owner's chat: each audit row they write
    names the owner (the same commands over the sidecar name ``api``)."""
    h = await bot()
    h.model.enqueue(*(text_reply(f"answer {n}") for n in ("one", "two", "three", "four")))
    await h.converse("q-one")
    first = h.bot_messages()[-1]
    await h.converse("q-two")
    assert "model-b" in await h.converse("/model model-b")
    assert "Undone" in await h.converse("/undo")
    await h.converse("q-three")
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_text("/rewind", reply_to_message_id=first.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    assert "Rewound" in h.texts()[-1]
    await h.converse("q-four")
    h.model.enqueue(text_reply("answer four, again"))
    assert (await h.converse("/retry")).endswith("answer four, again")

    rows = await h.kernel.audit.events(limit=1000)
    changed = [r.actor for r in rows if r.kind == "config.changed"]
    cuts = [(r.actor, r.data and r.data["command"]) for r in rows if r.kind == "history.cut"]
    assert changed == ["owner"]
    assert cuts == [("owner", "undo"), ("owner", "rewind"), ("owner", "retry")]
    received = [r.actor for r in rows if r.kind == "message.received"]
    assert received == ["owner"] * 5
