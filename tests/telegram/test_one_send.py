"""Issue 37, item 5: an exchange costs one token of the chat's rate budget, its answer.

Progress is shown by what costs no token (the typing action, drafts: the tool line and
the retry line too); with drafts off, a silent placeholder comes only once there is a
line to show. The 🔁 the previous answer carried is taken away when the chat's budget
has a token to spare: back to back, answers never wait behind it, and once the chat
is quiet only the newest answer keeps one.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kernel.telegram import drafts, view
from tests.sim.script import Error, Reply, Text, ToolUse, text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, BotCall, ChatMessage
from tests.telegram.conftest import BotHarness, Factory

# Calls that leave something in the chat: each takes a token of the chat's budget.
BILLED = ("sendMessage", "editMessageText", "editMessageReplyMarkup", "deleteMessage")
FREE = ("sendChatAction", "sendMessageDraft")


def retry_buttons(message: ChatMessage) -> bool:
    markup: Any = message.reply_markup or {}
    if isinstance(markup, str):
        markup = json.loads(markup)
    data = [str(b.get("callback_data")) for row in markup.get("inline_keyboard", []) for b in row]
    return any(d.startswith(("retry:", "again:")) for d in data)


def live_retries(h: BotHarness) -> list[str]:
    return [m.text for m in h.bot_messages() if retry_buttons(m)]


def chat_calls(h: BotHarness, since: int) -> list[BotCall]:
    return [c for c in h.tg.calls[since:] if str(c.params.get("chat_id")) == str(OWNER)]


async def test_a_plain_exchange_is_typing_drafts_and_one_send(bot: Factory) -> None:
    h = await bot()
    chunks = [f"part {i} " for i in range(6)]
    h.model.enqueue(text_reply("the first answer"))
    h.model.enqueue(Reply(Text("".join(chunks), chunks=chunks), chunk_delay=0.35))
    await h.converse("first")
    since = len(h.tg.calls)

    answer = await h.converse("second")

    calls = chat_calls(h, since)
    assert {c.method for c in calls} <= {*FREE, "sendMessage", "editMessageReplyMarkup"}
    assert h.tg.calls_to("sendMessageDraft")  # the reply streamed, silently
    # One message: the answer, the one that notifies (nothing silent came before it).
    [send] = [c for c in calls if c.method == "sendMessage"]
    assert send.params["text"] == answer and not send.params.get("disable_notification")
    # The first answer's 🔁 went after the answer (the tidy-up), and only it.
    [tidy] = [c for c in calls if c.method == "editMessageReplyMarkup"]
    assert calls.index(tidy) > calls.index(send)
    first = next(m for m in h.bot_messages() if m.text == "the first answer")
    assert tidy.params["message_id"] == first.message_id
    assert live_retries(h) == [answer]
    assert [m.text for m in h.tg.history(OWNER) if m.from_bot] == ["the first answer", answer]


async def test_an_answer_whole_before_its_first_draft_comes_without_one(
    bot: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The answer is in hand before its first draft would go (an instant model): the
    # answer alone (issue 37: the answer would replace that draft at once), and no
    # typing either (it shows only once a turn runs past TYPING_AFTER). Long holds, so
    # that only "whole", not the machine's pace, decides.
    monkeypatch.setattr(drafts, "FIRST_TEXT_WAIT", 60.0, raising=False)
    monkeypatch.setattr(view, "TYPING_AFTER", 60.0)
    h = await bot()
    h.model.enqueue(text_reply("all at once"))
    since = len(h.tg.calls)

    assert await h.converse("quick one") == "all at once"

    calls = chat_calls(h, since)
    assert [c.method for c in calls] == ["sendMessage"]
    assert h.tg.drafts(OWNER) == []
    assert [m.text for m in h.tg.history(OWNER) if m.from_bot] == ["all at once"]


async def test_typing_shows_once_the_turn_runs_past_its_grace(
    bot: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn still running after TYPING_AFTER shows typing (free: no token), refreshed
    every ``typing_interval``, until its answer comes; the answer is still its one
    billed call."""
    monkeypatch.setattr(view, "TYPING_AFTER", 0.05)
    h = await bot(extra="typing_interval = 0.05\n")
    gate = asyncio.Event()
    h.model.enqueue(text_reply("took a while", gate=gate))
    since = len(h.tg.calls)
    h.tg.inject_text("think it over")
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendChatAction")) >= 2)
    assert h.bot_messages() == []  # typing while the model is still at it
    gate.set()
    await h.tg.wait_until(lambda: [m.text for m in h.bot_messages()] == ["took a while"])

    calls = chat_calls(h, since)
    assert {c.params["action"] for c in calls if c.method == "sendChatAction"} == {"typing"}
    assert [c.method for c in calls if c.method in BILLED] == ["sendMessage"]


async def test_back_to_back_answers_never_wait_behind_a_tidy_up(bot: Factory) -> None:
    """Under the chat's real budget at its real pace (1 token a second, a burst of 3;
    a compressed pace would hand the tidy-up's own wait to the answers as tokens): the
    owner writes again as soon as each answer lands; while the exchanges run, every
    token goes to an answer, the superseded 🔁s go once the chat is quiet, and then
    only the newest answer keeps one."""
    h = await bot(real_pace=True)
    exchanges = 6
    h.model.enqueue(*[text_reply(f"answer {n}") for n in range(exchanges)])
    since = len(h.tg.calls)
    asked: list[int] = []  # the call count when each message was written
    for n in range(exchanges):
        asked.append(len(h.tg.calls))
        h.tg.inject_text(f"question {n}")
        await h.tg.wait_until(lambda n=n: f"answer {n}" in h.texts())
    running = chat_calls(h, since)
    await h.settle()
    calls = chat_calls(h, since)

    billed = [c for c in calls if c.method in BILLED]
    answers = [c for c in billed if c.method == "sendMessage"]
    tidies = [c for c in billed if c.method == "editMessageReplyMarkup"]
    assert [c.params["text"] for c in answers] == [f"answer {n}" for n in range(exchanges)]
    assert len(tidies) == exchanges - 1 and len(billed) == 2 * exchanges - 1
    # No tidy-up went while an answer was on its way (written → delivered).
    for n, answer in enumerate(answers):
        between = h.tg.calls[asked[n] : h.tg.calls.index(answer)]
        assert not [c for c in between if c.method == "editMessageReplyMarkup"], n
    # Back to back, the answers took every token: the tidy-ups waited for the quiet.
    assert [c.method for c in running if c.method in BILLED] == ["sendMessage"] * exchanges
    assert live_retries(h) == [f"answer {exchanges - 1}"]


async def test_a_tool_line_shows_in_the_draft(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(tool_reply("memory_add", {"text": "likes rain"}), text_reply("noted"))
    since = len(h.tg.calls)

    assert await h.converse("I like rain") == "noted"

    drafts = [str(c.params["text"]) for c in h.tg.calls_to("sendMessageDraft")]
    assert "⚙ Running memory_add…" in drafts
    assert [c.method for c in chat_calls(h, since) if c.method in BILLED] == ["sendMessage"]


async def test_the_retry_line_shows_in_the_draft(bot: Factory) -> None:
    h = await bot()
    overloaded = Error(529, "overloaded_error", "Overloaded")
    h.model.enqueue(Error(529, "overloaded_error", "Overloaded", retry_after=2), overloaded)
    h.model.enqueue(text_reply("made it"))
    since = len(h.tg.calls)

    assert await h.converse("hello") == "made it"

    drafts = [str(c.params["text"]) for c in h.tg.calls_to("sendMessageDraft")]
    assert "main: overloaded, retrying (2/2)…" in drafts
    assert [c.method for c in chat_calls(h, since) if c.method in BILLED] == ["sendMessage"]


async def test_without_drafts_a_plain_exchange_is_still_one_send(bot: Factory) -> None:
    h = await bot(extra="stream = false\n")
    h.model.enqueue(text_reply("just this"))
    since = len(h.tg.calls)

    assert await h.converse("hi") == "just this"

    billed = [c for c in chat_calls(h, since) if c.method in BILLED]
    assert [(c.method, c.params.get("disable_notification")) for c in billed] == [
        ("sendMessage", None)
    ]


async def test_without_drafts_a_tool_line_comes_in_a_silent_placeholder(bot: Factory) -> None:
    h = await bot(extra="stream = false\n")
    h.model.enqueue(tool_reply("memory_add", {"text": "likes rain"}), text_reply("noted"))
    since = len(h.tg.calls)

    assert await h.converse("I like rain") == "noted"

    sends = [c for c in chat_calls(h, since) if c.method == "sendMessage"]
    assert [(c.params["text"], c.params.get("disable_notification")) for c in sends] == [
        ("⚙ Running memory_add…", True),  # silent, and it says what runs
        ("noted", None),  # the answer notifies
    ]
    [line] = [m for m in h.tg.history(OWNER) if m.text == "⚙ Running memory_add…"]
    assert line.deleted  # it went once the answer came
    assert h.texts() == ["noted"]
    assert h.tg.calls_to("sendMessageDraft") == []


async def test_the_tool_line_shows_below_what_was_written(bot: Factory) -> None:
    from tests.mcp.conftest import mcp_toml, stdio_server

    h = await bot(extra=mcp_toml([stdio_server("test")]))
    chunks = ["Let me ", "check."]
    h.model.enqueue(
        Reply(Text("Let me check.", chunks=chunks), ToolUse("mcp_test__nap", {"seconds": 1.5})),
        text_reply("Checked."),
    )

    assert await h.converse("check it") == "Let me check.\n\nChecked."

    drafts = [str(c.params["text"]) for c in h.tg.calls_to("sendMessageDraft") if c.ok]
    assert "Let me check.\n\n⚙ Running mcp_test__nap…" in drafts


async def test_after_a_draft_error_a_tool_line_comes_in_a_silent_placeholder(
    bot: Factory,
) -> None:
    h = await bot()
    h.tg.fail("sendMessageDraft", status=400, description="Bad Request: draft failed", times=1)
    chunks = ["Let me ", "save that."]
    h.model.enqueue(
        Reply(
            Text("Let me save that.", chunks=chunks),
            ToolUse("memory_add", {"text": "tea"}),
            chunk_delay=0.35,
        ),
        text_reply("Saved."),
    )
    since = len(h.tg.calls)

    assert await h.converse("remember tea") == "Let me save that.\n\nSaved."

    calls = chat_calls(h, since)
    assert [c.status for c in calls if c.method == "sendMessageDraft"] == [400]  # then off
    sends = [c for c in calls if c.method == "sendMessage"]
    assert [(c.params["text"], c.params.get("disable_notification")) for c in sends] == [
        ("⚙ Running memory_add…", True),
        ("Let me save that.\n\nSaved.", None),
    ]
    assert h.texts() == ["Let me save that.\n\nSaved."]  # the line went with the answer


async def test_taking_the_old_retry_off_marks_nothing_first_and_is_recorded_sent(
    bot: Factory,
) -> None:
    """A tidy row's first try takes no ``sending`` mark (taking buttons off twice is the
    same as once): its message is known from this process's delivery, so the only store
    call it costs is the record that it was sent (issue 37: one hop less per exchange)."""
    h = await bot()
    h.model.enqueue(text_reply("one"), text_reply("two"))
    await h.converse("first")
    mailbox = h.channel.outbox.mailbox
    claimed: list[int] = []
    claim = mailbox.claim

    async def watched(row_id: int, of_row: int | None = None) -> tuple[bool, int | None]:
        claimed.append(row_id)
        return await claim(row_id, of_row)

    mailbox.claim = watched  # type: ignore[method-assign]
    await h.converse("second")
    await h.settle()

    [tidy] = h.tg.calls_to("editMessageReplyMarkup")
    first = next(m for m in h.bot_messages() if m.text == "one")
    assert tidy.params["message_id"] == first.message_id
    [(state, attempts)] = await h.kernel.store.read(
        "the tidy row",
        lambda conn: conn.execute(
            "SELECT state, attempts FROM outbox WHERE kind = 'edit' ORDER BY id DESC LIMIT 1"
        ).fetchall(),
    )
    assert (state, attempts) == ("sent", 1)
    # The answer's send is claimed as it is put (no store call of its own either).
    assert claimed == []
