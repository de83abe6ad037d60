"""Issue 34, items 4, 5, 8 and 12 (second half): how one answer looks in the chat.

The answer is the message that notifies (progress is silent and goes), one 🔁 stands on
the newest answer only, a 🔁 after a model error asks the model once, /cancel keeps
what was written, and a finished tool's progress does not stay as a message of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.delegate.conftest import cli_section
from tests.delegate.standins import make_cli
from tests.sim.script import Error, Reply, Text, text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, BotCall, ChatMessage
from tests.telegram.conftest import BotHarness, Factory

SENDS = ("sendMessage", "sendPhoto", "sendDocument", "sendVoice")


def loud(call: BotCall) -> bool:
    """A message that makes the owner's phone ring (edits never do)."""
    return call.method in SENDS and not call.params.get("disable_notification")


def buttons(message: ChatMessage) -> list[str]:
    markup: Any = message.reply_markup or {}
    if isinstance(markup, str):
        markup = json.loads(markup)
    return [str(b.get("callback_data")) for row in markup.get("inline_keyboard", []) for b in row]


def retry_buttons(h: BotHarness) -> list[tuple[str, list[str]]]:
    """The live messages that still carry a 🔁 (retry:…), with their text."""
    return [
        (m.text, buttons(m))
        for m in h.bot_messages()
        if any(data.startswith("retry:") for data in buttons(m))
    ]


async def test_a_model_error_then_again_asks_the_model_once(bot: Factory) -> None:
    h = await bot()
    question = "模型挂了的时候我问一句"
    h.model.enqueue(*[Error(529, "overloaded_error", "Overloaded")] * 3)
    await h.converse(question)
    notice = h.bot_messages()[-1]
    (again,) = buttons(notice)
    assert again.startswith("again:")

    h.model.enqueue(text_reply("终于答上了"))
    h.tg.inject_callback(again, message_id=notice.message_id)
    await h.tg.wait_until(lambda: "终于答上了" in h.texts())
    await h.settle()
    sent = h.model.requests[-1].body["messages"]
    assert json.dumps(sent, ensure_ascii=False).count(question) == 1
    assert h.texts()[-1] == "终于答上了"


def turn_sends(h: BotHarness, since: int) -> list[BotCall]:
    return [c for c in h.tg.calls[since:] if c.method in SENDS and c.ok]


async def test_the_answer_is_the_message_that_notifies(bot: Factory) -> None:
    h = await bot()
    chunks = [f"part {i} " for i in range(6)]
    h.model.enqueue(Reply(Text("".join(chunks), chunks=chunks), chunk_delay=0.35))
    since = len(h.tg.calls)

    answer = await h.converse("stream please")

    assert answer.startswith("part 0 part 1")
    sends = turn_sends(h, since)
    # The lock screen shows the answer: it is the first (and only) message that notifies.
    assert [str(c.params["text"]) for c in sends if loud(c)] == [answer]
    # Progress costs no message (issue 37): the drafts stream it, silently; the answer
    # is the turn's only message, and nothing was left to delete.
    assert [str(c.params["text"]) for c in sends] == [answer]
    assert h.tg.calls_to("sendMessageDraft")
    assert [m.text for m in h.tg.history(OWNER) if m.from_bot] == [answer]
    assert [m.text for m in h.bot_messages()] == [answer]


async def test_a_long_answer_notifies_once_with_its_first_chunk(bot: Factory) -> None:
    h = await bot()
    long = "\n\n".join(f"Paragraph {i}: " + "word " * 150 for i in range(12))
    h.model.enqueue(text_reply(long))
    since = len(h.tg.calls)

    await h.converse("a long one")

    sends = turn_sends(h, since)  # no placeholder before them (issue 37)
    assert len(sends) >= 2
    assert str(sends[0].params["text"]).startswith("Paragraph 0:") and loud(sends[0])
    assert not any(loud(c) for c in sends[1:])
    assert retry_buttons(h) and retry_buttons(h)[0][0] == h.texts()[-1]  # 🔁 on the last


async def test_one_retry_button_on_the_newest_answer(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("one"), text_reply("two"))
    await h.converse("first")
    assert [text for text, _ in retry_buttons(h)] == ["one"]
    await h.converse("second")
    assert [text for text, _ in retry_buttons(h)] == ["two"]  # "one" lost its 🔁

    # /undo supersedes the newest answer: its 🔁 goes too.
    assert (await h.ask("/undo")).startswith("Undone")
    await h.tg.wait_until(lambda: retry_buttons(h) == [])
    assert "two" in h.texts()  # the message stays, without the button

    # /retry: the new answer carries the only 🔁.
    h.model.enqueue(text_reply("three"), text_reply("three again"))
    await h.converse("third")
    h.tg.inject_text("/retry")
    await h.tg.wait_until(lambda: "three again" in h.texts())
    await h.settle()
    assert [text for text, _ in retry_buttons(h)] == ["three again"]


async def test_cancel_keeps_what_was_written_marked_cancelled(bot: Factory) -> None:
    h = await bot()
    chunks = [f"word{i} " for i in range(20)]
    # 15 of the 20 pieces stream (two events come first), then the model goes silent.
    reply = Reply(Text("".join(chunks), chunks=chunks), stall_after=17, chunk_delay=0.3)
    h.model.enqueue(reply)
    h.tg.inject_text("tell me")
    drafts = h.tg.calls_to
    await h.tg.wait_until(
        lambda: any("word3" in str(c.params["text"]) for c in drafts("sendMessageDraft"))
    )

    assert await h.ask("/cancel") == "Cancelled"
    await h.settle()

    (kept,) = [m.text for m in h.bot_messages() if m.text.startswith("word0")]
    written, mark = kept.split("\n\n")
    assert written.startswith("word0 word1 word2 word3") and "word19" not in written
    assert mark == "⏹ Cancelled: the reply stops here"
    # The command's reply says it; the partial (a message of its own now: no
    # placeholder stood, issue 37) comes silently, in whichever order they land.
    assert h.texts().count("Cancelled") == 1 and len(h.texts()) == 2
    [partial] = [c for c in h.tg.calls_to("sendMessage") if "word0" in str(c.params["text"])]
    assert partial.params.get("disable_notification") is True
    assert "Working on a reply…" not in h.texts()


@pytest.mark.posix  # a stand-in CLI: a #!python script made executable
async def test_a_finished_delegation_is_folded_into_the_answer(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_DELAY", "0.3")
    command = make_cli(tmp_path / "bin", "claude_code")
    h = await bot(
        extra="progress_interval = 0.2\n" + cli_section("claude_code", command=str(command))
    )
    h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "count the files"}),
        text_reply("There are **two** files."),
    )

    answer = await h.converse("how many files are in my project?")

    text, ran = answer.split("\n\n")
    assert text == "There are two files."
    assert ran.startswith("✅ claude_code finished (")  # one short line of what ran
    assert h.texts() == [answer]  # the progress message went when the answer came
    shown = [m for m in h.tg.history(OWNER) if m.text.startswith(("⏳", "✅"))]
    assert shown and all(m.deleted for m in shown)


def any_retry(h: BotHarness) -> list[str]:
    """The live messages carrying a 🔁 of either kind (retry:… or again:…)."""
    return [
        m.text
        for m in h.bot_messages()
        if any(data.startswith(("retry:", "again:")) for data in buttons(m))
    ]


async def test_a_model_error_notice_carries_the_only_retry_button(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("one"), *[Error(529, "overloaded_error", "Overloaded")] * 3)
    await h.converse("first")
    await h.converse("second")
    await h.settle()
    [notice] = any_retry(h)  # the error notice's again:, and "one" lost its retry:
    assert notice != "one" and "one" in h.texts()

    h.model.enqueue(text_reply("three"))
    await h.converse("third")
    await h.settle()
    assert any_retry(h) == ["three"]  # the notice's 🔁 went too
