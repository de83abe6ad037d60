"""Voice and replies in context, approvals a person can read (issue 34, items 11 and 12):
what a voice note was heard as, shown beside it; answers given late quote the message
they answer; 🔁 after a restart runs in the session the message belonged to; the first
answer after a restart says a new conversation began; an approval names the tool and
what it will do, the full arguments one tap away. In-process Kernels against the
simulators, real SQLite; a restart is one Kernel stopped and another started on the
same data folder."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.delegate.conftest import cli_section
from tests.delegate.standins import make_cli
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import owner_words
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, BotCall, ChatMessage, TelegramSim
from tests.telegram.conftest import CONV, BotHarness, Factory, asking
from tests.telegram.test_inbox import notices, offline, rows, states_become
from tests.telegram.test_voice import send_voice, voice_config
from tests.voice.audio import tone

HINT = "Kernel restarted, so this is a new conversation · /resume to go back to an earlier one"


def sent(h: BotHarness, text: str) -> BotCall:
    """The (one) successful sendMessage whose text starts with ``text``."""
    [call] = [
        c for c in h.tg.calls_to("sendMessage") if c.ok and str(c.params["text"]).startswith(text)
    ]
    return call


def quoted(call: BotCall) -> Any:
    return call.params.get("reply_parameters")


def history(request: Any) -> str:
    """Everything the model was sent in one request, as text."""
    return json.dumps(request.body["messages"], ensure_ascii=False)


async def stop(h: BotHarness) -> None:
    await h.channel.stop()
    await h.kernel.stop()


# ----- voice -------------------------------------------------------------------------


async def test_a_voice_note_is_shown_as_heard_in_a_silent_reply_before_the_answer(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription("明天 上海 天气 怎么样")
    h.model.enqueue(text_reply("多云，20 度。"))
    await send_voice(h, tone("ogg"))

    [voice] = [m for m in h.tg.chat(OWNER, from_bot=False) if m.kind == "voice"]
    heard = sent(h, "🎤")
    assert heard.params["text"] == "🎤 明天 上海 天气 怎么样"
    assert heard.params["disable_notification"] is True  # the owner's own words: no buzz
    assert quoted(heard) == {"message_id": voice.message_id, "allow_sending_without_reply": True}
    texts = h.texts()
    assert texts == ["🎤 明天 上海 天气 怎么样", "多云，20 度。"]  # heard, then the answer
    assert owner_words(h.model.requests[-1]) == "[voice: 明天 上海 天气 怎么样]"


async def test_with_the_setting_off_the_transcript_is_not_shown(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra="show_transcript = false\n" + voice_config(openai_sim))
    assert h.kernel.config.telegram.show_transcript is False  # a setting of [telegram]
    openai_sim.enqueue_transcription("what time is it")
    h.model.enqueue(text_reply("Nine."))
    await send_voice(h, tone("ogg"))

    assert h.texts() == ["Nine."]
    assert not any("🎤" in str(c.params.get("text")) for c in h.tg.calls_to("sendMessage"))
    assert owner_words(h.model.requests[-1]) == "[voice: what time is it]"


# ----- answers given late ------------------------------------------------------------


async def test_answers_to_what_arrived_while_down_quote_their_messages(bot: Factory) -> None:
    tg = await TelegramSim().start()
    first = offline(tg, "first while down", ago=300)
    second = offline(tg, "second while down", ago=60)
    h = await bot(tg=tg)
    await tg.wait_until(lambda: bool(notices(h)))

    h.model.enqueue(text_reply("live answer"))
    assert await h.converse("live one") == "live answer"
    h.model.enqueue(text_reply("answer one"), text_reply("answer two"))
    tg.inject_callback("waiting:run", message_id=notices(h)[0].message_id)
    await tg.wait_until(lambda: "answer two" in h.texts())
    await h.settle()

    lenient = {"allow_sending_without_reply": True}
    assert quoted(sent(h, "answer one")) == {"message_id": first["message"]["message_id"]} | lenient
    assert (
        quoted(sent(h, "answer two")) == {"message_id": second["message"]["message_id"]} | lenient
    )
    [live] = [m for m in h.bot_messages() if m.text == "live answer"]
    assert live.reply_to is None  # answered as it came: no quote
    shown = [m for m in h.bot_messages() if m.text == "answer one"]
    assert [m.reply_to["text"] for m in shown if m.reply_to] == ["first while down"]
    assert "Working on a reply…" not in h.texts()  # the placeholder made way for the reply


async def test_a_quoted_answer_still_comes_when_the_original_was_deleted(bot: Factory) -> None:
    tg = await TelegramSim().start()
    gone = offline(tg, "deleted before it was handled")
    h = await bot(tg=tg)
    await tg.wait_until(lambda: bool(notices(h)))
    original = tg.message(OWNER, gone["message"]["message_id"])
    assert original is not None
    original.deleted = True  # the owner deleted it meanwhile

    h.model.enqueue(text_reply("answered anyway"))
    tg.inject_callback("waiting:run", message_id=notices(h)[0].message_id)
    await tg.wait_until(lambda: "answered anyway" in h.texts())
    await h.settle()
    assert quoted(sent(h, "answered anyway"))["message_id"] == gone["message"]["message_id"]
    [answer] = [m for m in h.bot_messages() if m.text == "answered anyway"]
    assert answer.reply_to is None  # sent without the quote rather than refused
    await states_become(h, ["answered", "answered"])  # the message, the press


# ----- 🔁 after a restart, and the restart hint --------------------------------------


def crashed(data_dir: Path) -> None:
    """What a crash mid-turn leaves behind a stop: the message's row still open (and its
    session on record), so the next start tells the owner with 🔁."""
    db = sqlite3.connect(data_dir / "kernel.db")
    try:
        with db:
            db.execute(
                "UPDATE inbox SET state = 'open', closed_at = NULL WHERE kind = 'text'"
                " AND state = 'interrupted'"
            )
            db.execute("DELETE FROM outbox WHERE state != 'sent'")
    finally:
        db.close()


@pytest.mark.parametrize("end", ["stop", "crash"])
async def test_again_after_a_restart_runs_in_the_messages_session_and_quotes_it(
    bot: Factory, end: str
) -> None:
    tg = await TelegramSim().start()
    model = await AnthropicSim().start()
    first = await bot(tg=tg, model=model)
    model.enqueue(text_reply("noted: blue"))
    assert await first.converse("my favourite colour is blue") == "noted: blue"  # no hint yet
    session = first.kernel.agent.sessions.current_session(CONV)
    model.enqueue(Reply(Text("never finished", chunks=["never ", "finished"]), stall_after=3))
    cut = tg.inject_text("what is my favourite colour?")
    await first.under_way(requests=2)
    await stop(first)
    if end == "crash":
        crashed(first.kernel.config.data_dir)
        # The stop's notice never came (and no placeholder stood: issue 37).
        for message in first.bot_messages():
            if "interrupted" in message.text:
                message.deleted = True

    second = await bot(tg=tg, model=model)
    told = "restarted before" if end == "crash" else "interrupted"
    await tg.wait_until(lambda: any(told in m.text for m in second.bot_messages()))
    [notice] = [m for m in second.bot_messages() if told in m.text]
    [row] = [r for r in await rows(second) if r.state == "interrupted"]
    assert row.session_id == session  # recorded while the turn ran
    # A restart starts a new conversation, and its first answer says so, once.
    model.enqueue(text_reply("hello again"), text_reply("still here"))
    assert await second.converse("hi") == f"hello again\n\n🆕 {HINT}"
    assert "blue" not in history(model.requests[-1])  # a fresh session indeed
    assert await second.converse("you there?") == "still here"
    fresh = second.kernel.agent.sessions.current_session(CONV)
    assert fresh != session

    model.enqueue(text_reply("it is blue"))
    tg.inject_callback(f"again:{row.id}", message_id=notice.message_id)
    await tg.wait_until(lambda: any(x.startswith("it is blue") for x in second.texts()))
    await second.settle()
    # The chat moved to that session: the answer says so, naming it.
    [answer] = [x for x in second.texts() if x.startswith("it is blue")]
    assert answer == (
        f"it is blue\n\n↪ Answered in session #{session} “my favourite colour is blue”; your"
        " next messages continue it · /resume to switch to another"
    )
    request = model.requests[-1]
    assert owner_words(request) == "what is my favourite colour?"
    assert "my favourite colour is blue" in history(request)  # the session's own history
    assert "you there?" not in history(request)  # not the fresh one's
    assert second.kernel.agent.sessions.current_session(CONV) == session  # the chat is back there
    message_id = cut["message"]["message_id"]
    lenient = {"message_id": message_id, "allow_sending_without_reply": True}
    assert quoted(sent(second, "it is blue")) == lenient
    assert sum(HINT in text for text in second.texts()) == 1


async def test_a_session_command_after_a_restart_means_no_restart_hint(bot: Factory) -> None:
    tg = await TelegramSim().start()
    model = await AnthropicSim().start()
    first = await bot(tg=tg, model=model)
    model.enqueue(text_reply("noted"))
    assert await first.converse("remember this") == "noted"
    await stop(first)

    second = await bot(tg=tg, model=model)
    await second.ask("/new")  # the owner chose a new conversation themselves
    await second.settle()
    model.enqueue(text_reply("hello"))
    assert await second.converse("hi") == "hello"
    assert not any(HINT in text for text in second.texts())


async def test_a_message_run_again_in_the_current_session_says_nothing_of_sessions(
    bot: Factory,
) -> None:
    h = await bot()
    h.model.enqueue(text_reply("first answer"))
    assert await h.converse("first") == "first answer"
    h.model.enqueue(Reply(Text("never finished", chunks=["never ", "finished"]), stall_after=3))
    h.tg.inject_text("second")
    await h.tg.wait_until(lambda: len(h.model.requests) == 2)
    await h.ask("/cancel")
    await h.settle()
    [row] = [r for r in await rows(h) if r.kind == "text" and r.state == "cancelled"]
    h.model.enqueue(text_reply("second answer"))
    h.tg.inject_callback(f"again:{row.id}", message_id=h.bot_messages()[-1].message_id)
    await h.tg.wait_until(lambda: any(x.startswith("second answer") for x in h.texts()))
    await h.settle()
    assert [x for x in h.texts() if x.startswith("second answer")] == ["second answer"]


# ----- approvals ---------------------------------------------------------------------


def question_of(h: BotHarness) -> ChatMessage:
    return next(m for m in h.bot_messages() if asking(m))


def details_quote(message: ChatMessage) -> str:
    """The text of the message's expandable quote (the part one tap opens)."""
    [entity] = [e for e in message.entities if e["type"] == "expandable_blockquote"]
    start, length = int(entity["offset"]), int(entity["length"])
    encoded = message.text.encode("utf-16-le")
    return encoded[start * 2 : (start + length) * 2].decode("utf-16-le")


@pytest.mark.posix
async def test_a_delegation_approval_names_the_cli_and_the_task(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_DELAY", "0.1")
    command = make_cli(tmp_path / "bin", "claude_code")
    extra = cli_section("claude_code", command=str(command))
    h = await bot(extra=extra + "\n[tools.delegate_to_cli]\napproval = true\n")
    task = "fix the login page <form> bug\nthen run the tests & report"
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": task}), text_reply("Fixed."))
    h.tg.inject_text("fix the login page")

    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    asked = question_of(h)
    lines = asked.text.splitlines()
    assert lines[:2] == [
        "🔐 Your approval is needed: Hand to Claude Code",
        "fix the login page <form> bug…",
    ]
    assert "delegate_to_cli" not in asked.text and '"task"' not in "\n".join(lines[:2])
    # The full arguments are one tap away: an expandable quote, escaped and whole.
    quote = details_quote(asked)
    assert quote.startswith("Full arguments (tap to open)\n")
    assert json.loads(quote.split("\n", 1)[1]) == {"task": task}
    assert [b["text"] for row in asked.reply_markup["inline_keyboard"] for b in row] == [  # type: ignore[index]
        "✅ Approve",
        "❌ Deny",
    ]
    approve = asked.reply_markup["inline_keyboard"][0][0]["callback_data"]  # type: ignore[index]
    h.tg.inject_callback(approve, message_id=asked.message_id)
    await h.settle()
    closed = h.tg.message(OWNER, asked.message_id)
    assert closed is not None and closed.text.endswith("Chosen: ✅ Approve")
    assert h.texts()[-1].startswith("Fixed.\n\n✅ claude_code finished")  # the run folded in


async def test_an_approval_of_another_tool_shows_its_arguments_in_one_line(
    bot: Factory,
) -> None:
    h = await bot(extra="\n[tools.memory_add]\napproval = true\n")
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea\nand cake"}), text_reply("ok"))
    h.tg.inject_text("remember that")
    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    asked = question_of(h)
    assert asked.text.splitlines()[:2] == [
        "🔐 Your approval is needed: Remember something",
        "text=likes tea…",
    ]
    assert json.loads(details_quote(asked).split("\n", 1)[1]) == {"text": "likes tea\nand cake"}
