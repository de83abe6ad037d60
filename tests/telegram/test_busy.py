"""Busy, never silent (issue 34, item 7): what arrives while a turn runs is counted by one
notice with ▶/🗑 and kept on record until the owner chooses; a batch delivered late
after an outage waits like what arrived while Kernel was down; a message while the turn
waits on the owner's button answers the question or stops the turn and runs; after
/cancel the chat is free at once. Real PTB against the Bot API simulator, the real
anthropic SDK against the model simulator, SQLite on disk."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kernel.store.mailbox import InboxState
from tests.delegate.conftest import cli_section
from tests.delegate.standins import make_cli
from tests.sim.context import owner_words
from tests.sim.script import Reply, Text, text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import CONV, BotHarness, Factory, asking
from tests.telegram.test_approval import APPROVAL
from tests.telegram.test_inbox import asked, buttons, notices, rows, states_become
from tests.telegram.test_inbox_faults import crash
from tests.telegram.test_spend_ask import PRICED, spend_most_of_today

BUSY = "Still working on the previous message"


def busy_notices(h: BotHarness) -> list[ChatMessage]:
    return [m for m in h.bot_messages() if m.text.startswith(BUSY)]


async def states(h: BotHarness, kind: str = "text") -> list[InboxState]:
    return [r.state for r in await rows(h) if r.kind == kind]


async def question(h: BotHarness) -> ChatMessage:
    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    return next(m for m in h.bot_messages() if asking(m))


async def three_held(h: BotHarness) -> ChatMessage:
    """A slow turn (its answer waits for a gate the test holds), then three texts: the
    one notice of the busy window."""
    h.tg.inject_text("first")
    await h.under_way()
    for text in ("second", "third", "fourth"):
        h.tg.inject_text(text)
    await h.tg.wait_until(lambda: any("new messages received: 3" in x for x in h.texts()))
    [notice] = busy_notices(h)
    return notice


async def test_three_messages_in_a_busy_window_are_counted_and_run_after_the_turn(
    bot: Factory,
) -> None:
    h = await bot()
    gate = asyncio.Event()
    h.model.enqueue(Reply(Text("slow answer"), gate=gate))
    h.model.enqueue(text_reply("answer 2"), text_reply("answer 3"), text_reply("answer 4"))
    notice = await three_held(h)

    assert notice.text == (
        "Still working on the previous message; new messages received: 3. "
        "Handle them in order after this answer, or drop them?"
    )
    assert buttons(notice) == ["busy:run", "busy:drop"]
    assert await states(h) == ["open", "waiting", "waiting", "waiting"]  # none failed
    sent = [c for c in h.tg.calls_to("sendMessage") if str(c.params["text"]).startswith(BUSY)]
    assert len(sent) == 1  # one notice, edited as more came

    h.tg.inject_callback("busy:run", message_id=notice.message_id)
    await h.tg.wait_until(lambda: bool(h.tg.calls_to("answerCallbackQuery")))
    toast = h.tg.calls_to("answerCallbackQuery")[-1].params["text"]
    assert toast == "These 3 messages will be handled in order after this answer"
    assert len(h.model.requests) == 1  # nothing runs before the turn ends

    gate.set()
    await h.tg.wait_until(lambda: "answer 4" in h.texts())
    await h.settle()
    assert asked(h) == ["first", "second", "third", "fourth"]
    texts = h.texts()
    assert texts.index("slow answer") < texts.index("answer 2") < texts.index("answer 4")
    assert await states(h) == ["answered"] * 4
    shown = h.tg.message(OWNER, notice.message_id)
    assert shown is not None and buttons(shown) == []  # the choice is made
    assert shown.text.endswith("These 3 messages will be handled in order after this answer")


async def test_dropping_the_held_messages_says_so_and_runs_none(bot: Factory) -> None:
    h = await bot()
    gate = asyncio.Event()
    h.model.enqueue(Reply(Text("slow answer"), gate=gate))
    notice = await three_held(h)

    h.tg.inject_callback("busy:drop", message_id=notice.message_id)
    await h.tg.wait_until(lambda: bool(h.tg.calls_to("answerCallbackQuery")))
    dropped = "Dropped 3 messages (they are not in the history)"
    assert h.tg.calls_to("answerCallbackQuery")[-1].params["text"] == dropped
    gate.set()
    await h.tg.wait_until(lambda: "slow answer" in h.texts())
    await h.settle()
    assert asked(h) == ["first"]
    assert await states(h) == ["answered", "dropped", "dropped", "dropped"]
    shown = h.tg.message(OWNER, notice.message_id)
    assert shown is not None and buttons(shown) == [] and shown.text.endswith(dropped)


FORGOTTEN = (
    "Kernel restarted since this notice and no longer knows which messages it held; every"
    " waiting message is listed in the notice below: choose there"
)
MOVED = "↪ Answered in session #{n}"


async def test_held_messages_outlive_a_crash_and_run_in_their_own_session(
    bot: Factory,
) -> None:
    """After a restart the old busy notice acts on none (which rows it held died with
    the process) and says so; the offline notice counts them and runs them in the
    session they were sent in, not the fresh one."""
    h = await bot()
    gate = asyncio.Event()
    h.model.enqueue(Reply(Text("never shown"), gate=gate))
    notice = await three_held(h)
    session = h.kernel.agent.sessions.current_session(CONV)
    await h.tg.wait_until(lambda: not h.channel.outbox.backlog(OWNER))
    await crash(h)
    gate.set()

    again = await bot(tg=h.tg, model=h.model)
    await again.tg.wait_until(lambda: any("restarted before" in x for x in again.texts()))
    assert await states(again) == ["interrupted", "waiting", "waiting", "waiting"]
    assert [r.session_id for r in await rows(again) if r.state == "waiting"] == [session] * 3
    again.model.enqueue(text_reply("fresh"))
    assert (await again.converse("meanwhile")).startswith("fresh")  # a new session
    assert again.kernel.agent.sessions.current_session(CONV) != session

    again.tg.inject_callback("busy:run", message_id=notice.message_id)
    await again.tg.wait_until(lambda: any(m.text.endswith(FORGOTTEN) for m in busy_notices(again)))
    await again.tg.wait_until(lambda: bool(again.tg.calls_to("answerCallbackQuery")))
    toast = again.tg.calls_to("answerCallbackQuery")[-1].params["text"]
    assert toast == FORGOTTEN
    assert buttons(busy_notices(again)[0]) == []
    await again.tg.wait_until(lambda: any("offline: 3" in m.text for m in notices(again)))
    assert len(again.model.requests) == 2  # nothing ran blindly
    offline = [m for m in notices(again) if "offline: 3" in m.text][-1]
    again.model.enqueue(text_reply("a2"), text_reply("a3"), text_reply("a4"))
    again.tg.inject_callback("waiting:run", message_id=offline.message_id)
    await again.tg.wait_until(lambda: any(x.startswith("a4") for x in again.texts()))
    await again.settle()
    assert asked(again)[-3:] == ["second", "third", "fourth"]
    assert "meanwhile" not in json.dumps(again.model.requests[-3].body["messages"])
    [a2] = [x for x in again.texts() if x.startswith("a2")]
    assert MOVED.format(n=session) in a2  # the chat went back there, and says so
    assert await states(again) == ["interrupted", "answered", "answered", "answered", "answered"]


async def test_the_busy_notice_drops_only_what_it_held_not_the_offline_batch(
    bot: Factory,
) -> None:
    h = await bot()
    h.model.enqueue(text_reply("before"))
    assert await h.converse("hello") == "before"
    # The outage must catch only incoming messages: were the first turn's last outbox row
    # still due, it would back off through the outage.
    await h.settle()
    h.tg.fail_everything(502)  # an outage: three messages wait under the offline notice
    for text, ago in (("one", 300), ("two", 240), ("three", 180)):
        update = h.tg.inject_text(text)
        update["message"]["date"] -= ago
    h.tg.stop_failing()
    await h.tg.wait_until(lambda: bool(notices(h)))
    [offline] = notices(h)
    gate = asyncio.Event()
    h.model.enqueue(Reply(Text("slow answer"), gate=gate))
    h.tg.inject_text("first")
    # The turn is at the model (held by the gate).
    await h.tg.wait_until(lambda: len(h.model.requests) == 2)
    h.tg.inject_text("second")
    await h.tg.wait_until(lambda: any("new messages received: 1" in x for x in h.texts()))
    [notice] = busy_notices(h)

    h.tg.inject_callback("busy:drop", message_id=notice.message_id)
    await h.tg.wait_until(lambda: bool(h.tg.calls_to("answerCallbackQuery")))
    dropped = "Dropped 1 messages (they are not in the history)"
    assert h.tg.calls_to("answerCallbackQuery")[-1].params["text"] == dropped
    gate.set()
    await h.tg.wait_until(lambda: "slow answer" in h.texts())
    await h.settle()
    waited = ["waiting"] * 3
    assert await states(h) == ["answered", *waited, "answered", "dropped"]

    h.model.enqueue(text_reply("a1"), text_reply("a2"), text_reply("a3"))
    h.tg.inject_callback("waiting:run", message_id=offline.message_id)
    await h.tg.wait_until(lambda: "a3" in h.texts())
    await h.settle()
    assert asked(h) == ["hello", "first", "one", "two", "three"]


async def test_cancel_while_a_message_waits_for_the_stopped_turn_cancels_it(
    bot: Factory,
) -> None:
    h = await bot(extra="stream = false\n")  # drafts off: a tool's line needs a message
    # The held call waits for the test, not PTB's 5 s read timeout (the request's default).
    h.channel.bot.request._read = 300.0  # type: ignore[attr-defined]
    release = h.tg.hold("sendMessage")  # the tool line's placeholder: the view outlives its turn
    gate = asyncio.Event()
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea"}))
    h.model.enqueue(Reply(Text("never shown"), gate=gate))
    h.tg.inject_text("first")
    await h.tg.wait_until(lambda: len(h.model.requests) == 2)
    h.tg.inject_text("/cancel")
    await h.tg.wait_until(lambda: not h.kernel.agent.sessions.is_busy(CONV))
    h.tg.inject_text("second")  # to run once the stopped turn's view is done
    h.tg.inject_text("/cancel")  # handled after it (in order): the owner cancels it too
    # Both /cancel handled (their replies queued: the held placeholder blocks sending);
    # the first turn's row stays open while its view waits, the second's is cancelled.
    expected = [("text", "open"), ("command", "answered")] + [("text", "cancelled")]
    await states_become(h, [*expected, ("command", "answered")], kinds=True)
    release.set()
    await h.settle()
    # The model saw "first" (then its tool's result), never "second".
    assert len(h.model.requests) == 2 and owner_words(h.model.requests[0]) == "first"
    assert await states(h) == ["cancelled", "cancelled"]  # none left for "restarted before"


async def test_a_host_clock_running_fast_holds_no_live_message(bot: Factory) -> None:
    """Telegram's dates two minutes behind the host's clock: every message is live."""
    h = await bot()
    await h.tg.wait_until(lambda: h.channel.bot.stats.answered >= 1)
    h.model.enqueue(text_reply("one"), text_reply("two"))
    for text, answer in (("first", "one"), ("second", "two")):
        update = h.tg.inject_text(text)
        update["message"]["date"] -= 120
        await h.tg.wait_until(lambda answer=answer: answer in h.texts())  # type: ignore[misc]
    await h.settle()
    assert not notices(h) and asked(h) == ["first", "second"]
    assert await states(h) == ["answered", "answered"]


async def test_a_command_delivered_late_after_an_outage_still_acts(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("before"))
    assert await h.converse("hello") == "before"
    h.tg.fail_everything(502)
    update = h.tg.inject_text("/help")
    update["message"]["date"] -= 300
    h.tg.stop_failing()
    await h.tg.wait_until(lambda: any("/resume" in x for x in h.texts()))
    await h.settle()
    assert not notices(h)
    assert await states(h, "command") == ["answered"]


async def test_a_batch_delivered_late_after_an_outage_waits_like_offline_messages(
    bot: Factory,
) -> None:
    h = await bot()
    h.model.enqueue(text_reply("before"))
    assert await h.converse("hello") == "before"
    # Kernel has been up for an hour: these messages are late, not sent before its start.
    assert h.channel.mailroom.since is not None
    h.channel.mailroom.since -= 3600
    h.tg.fail_everything(502)  # the Bot API is down; the owner writes meanwhile
    for text, ago in (("one from the tunnel", 300), ("two", 240), ("three", 180)):
        update = h.tg.inject_text(text)
        update["message"]["date"] -= ago
    h.tg.stop_failing()  # they arrive together, long after they were sent

    await h.tg.wait_until(lambda: bool(notices(h)))
    [notice] = notices(h)
    assert "offline: 3, the earliest at" in notice.text
    assert buttons(notice) == ["waiting:run", "waiting:drop"]
    await h.settle()
    assert not busy_notices(h)
    assert asked(h) == ["hello"]  # nothing handled blindly
    assert await states(h) == ["answered", "waiting", "waiting", "waiting"]

    h.model.enqueue(text_reply("a1"), text_reply("a2"), text_reply("a3"))
    h.tg.inject_callback("waiting:run", message_id=notice.message_id)
    await h.tg.wait_until(lambda: "a3" in h.texts())
    await h.settle()
    assert asked(h) == ["hello", "one from the tunnel", "two", "three"]


async def test_a_message_during_a_pending_approval_declines_it_and_runs(bot: Factory) -> None:
    h = await bot(extra=APPROVAL.format(timeout=300))
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea"}), text_reply("Hi there."))
    h.tg.inject_text("remember that I like tea")
    pending = await question(h)

    h.tg.inject_text("never mind, just say hi")
    await h.tg.wait_until(lambda: "Hi there." in h.texts())
    await h.settle()
    declined = (
        "Declined the pending approval and stopped the previous turn; handling your new message now"
    )
    assert declined in h.texts()
    assert not busy_notices(h)
    assert await h.kernel.store.list_memories() == []  # nothing ran unasked
    closed = h.tg.message(OWNER, pending.message_id)
    assert closed is not None and closed.reply_markup is None
    assert asked(h)[-1] == "never mind, just say hi"
    assert await states(h) == ["cancelled", "answered"]


async def test_a_text_during_ask_user_is_its_answer(bot: Factory) -> None:
    h = await bot()
    choose = {"question": "Which colour?", "options": ["red", "blue"]}
    h.model.enqueue(tool_reply("ask_user", choose), text_reply("Green it is."))
    h.tg.inject_text("paint the shed")
    pending = await question(h)

    h.tg.inject_text("green, actually")
    await h.tg.wait_until(lambda: "Green it is." in h.texts())
    await h.settle()
    assert not busy_notices(h)
    closed = h.tg.message(OWNER, pending.message_id)
    assert closed is not None and closed.reply_markup is None
    assert closed.text == "Which colour?\n\n✏️ Your answer: green, actually"
    blocks = h.model.requests[1].body["messages"][-1]["content"]
    [result] = [b for b in blocks if b["type"] == "tool_result"]
    content = result["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    assert json.loads(text) == {"answered": True, "reply": "green, actually"}
    assert len(h.model.requests) == 2  # the answer went to the question, not a new turn
    assert await states(h) == ["answered", "answered"]


async def test_a_message_during_the_budget_question_stops_that_turn_and_runs(
    bot: Factory,
) -> None:
    """Chosen: the new message is the owner moving on, like a press of "Stop": the limit
    is not raised and the message runs; over the limit still, its own turn asks again."""
    h = await bot(extra=PRICED.format(daily=2.0, step=2.0))
    await spend_most_of_today(h)
    h.tg.inject_text("again")
    first = await question(h)

    h.tg.inject_text("something else")
    stopped = (
        "Today's spending limit was not raised and the previous turn stopped; "
        "handling your new message now"
    )
    await h.tg.wait_until(lambda: stopped in h.texts())
    await h.tg.wait_until(
        lambda: any(asking(m) and m.message_id != first.message_id for m in h.bot_messages())
    )
    closed = h.tg.message(OWNER, first.message_id)
    assert closed is not None and closed.reply_markup is None
    assert (await h.kernel.agent.meter.limits()).daily == 2.0  # not raised
    again = next(m for m in h.bot_messages() if asking(m))
    h.model.enqueue(text_reply("Something else, then."))
    raise_it = again.reply_markup["inline_keyboard"][0][0]["callback_data"]  # type: ignore[index]
    h.tg.inject_callback(raise_it, message_id=again.message_id)
    await h.tg.wait_until(lambda: "Something else, then." in h.texts())
    await h.settle()
    assert not busy_notices(h)
    assert asked(h)[-1] == "something else"
    assert await states(h) == ["answered", "cancelled", "answered"]


@pytest.mark.posix  # a stand-in CLI: a #!python script made executable
async def test_a_message_right_after_cancelling_a_delegate_is_answered(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {"STANDIN_MODE": "step_then_hang", "STANDIN_IGNORE_TERM": "1"}.items():
        monkeypatch.setenv(key, value)  # the CLI takes a while to stop: the turn winds down
    command = make_cli(tmp_path / "bin", "claude_code")
    extra = "progress_interval = 0.2\n" + cli_section("claude_code", command=str(command))
    h = await bot(extra=extra)
    h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "refactor everything"}), text_reply("Hello again.")
    )
    h.tg.inject_text("refactor my project")
    await h.tg.wait_until(
        lambda: any("Now: Let me look around." in x for x in h.texts()), timeout=30
    )
    assert await h.ask("/cancel") == "Cancelled; stopped claude_code"
    h.tg.inject_text("are you there?")  # at once, while the stopped CLI's line still moves

    await h.tg.wait_until(lambda: "Hello again." in h.texts())
    await h.settle()
    assert not busy_notices(h)
    assert asked(h)[-1] == "are you there?"
    assert await states(h) == ["cancelled", "answered"]
