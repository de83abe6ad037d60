"""Pickers (issue 34): a bare /resume, /model, /provider, /persona or /project answers
with inline buttons, the current choice marked and paged when long; one tap acts and the
picker becomes the command's reply. A stale tap is refused in words; a stranger's does
nothing.

Real PTB against the Bot API simulator, the real anthropic (and openai) SDK against the
model simulators, SQLite on disk; personas and projects are files beside config.toml.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernel.core.messages import Message, TextBlock
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, text_reply
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import CONV, BotHarness, Factory

STRANGER = 777001


def rows(message: ChatMessage) -> list[list[dict[str, Any]]]:
    markup = message.reply_markup or {}
    if isinstance(markup, str):
        markup = json.loads(markup)
    return list(markup.get("inline_keyboard", []))


def labels(message: ChatMessage) -> list[str]:
    """The choices' buttons (the ◀ n/m ▶ row left out)."""
    return [b["text"] for row in rows(message) for b in row if not _nav(b)]


def nav(message: ChatMessage) -> list[str]:
    return [b["text"] for row in rows(message) for b in row if _nav(b)]


def _nav(button: dict[str, Any]) -> bool:
    data = str(button["callback_data"])
    return data == "pick:-" or data.split(":")[-1].startswith("p")


async def picker(h: BotHarness, command: str) -> ChatMessage:
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_text(command)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    return h.bot_messages()[-1]


async def tap(h: BotHarness, message: ChatMessage, text: str) -> ChatMessage:
    """Press the button labelled ``text``; the message as the chat shows it after."""
    button = next(b for row in rows(message) for b in row if b["text"] == text)
    assert len(button["callback_data"].encode()) <= 64
    answered = len(h.tg.calls_to("answerCallbackQuery"))
    h.tg.inject_callback(button["callback_data"], message_id=message.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) > answered)
    await h.settle()
    shown = h.tg.message(OWNER, message.message_id)
    assert shown is not None
    return shown


def last_answer(h: BotHarness) -> dict[str, Any]:
    return h.tg.calls_to("answerCallbackQuery")[-1].params


def write_personas(base: Path, *names: str) -> None:
    folder = base / "personas"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / f"{name}.md").write_text(f"---\ndescription: the {name}\n---\nBe {name}.\n")


async def test_model_picker_marks_the_current_and_a_tap_switches(bot: Factory) -> None:
    h = await bot()
    shown = await picker(h, "/model")
    assert shown.text.startswith("Current model: model-a")
    assert labels(shown) == ["✅ model-a", "model-b"]
    assert nav(shown) == []  # one page

    sends = len(h.tg.calls_to("sendMessage"))
    after = await tap(h, shown, "model-b")

    assert after.text == "Switched to model model-b"
    assert after.reply_markup is None  # the buttons are gone
    assert len(h.tg.calls_to("sendMessage")) == sends  # edited, not a new message
    assert last_answer(h).get("text") is None  # no toast on success
    h.model.enqueue(text_reply("from b"))
    assert await h.converse("which model?") == "from b"
    assert h.model.requests[-1].body["model"] == "model-b"
    assert labels(await picker(h, "/model")) == ["model-a", "✅ model-b", "auto"]


async def test_provider_picker_switches_the_provider(bot: Factory, openai_sim: OpenAISim) -> None:
    second = (
        f'\n[providers.second]\ntype = "openai_compat"\napi_base = "{openai_sim.base_url}"\n'
        'api_key = "sk-second-0123456789"\ndefault_model = "gpt-x"\nmodels = ["gpt-x", "gpt-y"]\n'
    )
    h = await bot(extra=second)
    shown = await picker(h, "/provider")
    assert shown.text.startswith("Current provider: main (model model-a)")
    assert labels(shown) == ["✅ main", "second"]

    after = await tap(h, shown, "second")

    assert after.text == "Switched to provider second (model gpt-x)"
    assert after.reply_markup is None
    openai_sim.enqueue(text_reply("from the second provider"))
    assert await h.converse("which one?") == "from the second provider"
    assert openai_sim.requests[-1].body["model"] == "gpt-x"


async def test_persona_and_project_pickers_switch_this_chat(bot: Factory, tmp_path: Path) -> None:
    write_personas(tmp_path, "editor", "pirate")
    projects = tmp_path / "projects"
    projects.mkdir()
    (projects / "notes.md").write_text("---\ndescription: loose notes\n---\n")
    h = await bot()

    shown = await picker(h, "/persona")
    assert shown.text.startswith("Personas (")
    assert labels(shown) == ["editor", "pirate"]  # none is current: no "off" either
    after = await tap(h, shown, "pirate")
    assert after.text == "Persona: pirate — the pirate"
    assert after.reply_markup is None
    assert (await h.kernel.agent.scopes.current(CONV)).persona == "pirate"
    h.model.enqueue(text_reply("arr"))
    await h.converse("hello")
    assert "Be pirate." in json.dumps(h.model.requests[-1].body["system"])
    assert labels(await picker(h, "/persona")) == ["editor", "✅ pirate", "off"]

    shown = await picker(h, "/project")
    assert labels(shown) == ["notes"]
    after = await tap(h, shown, "notes")
    assert after.text.startswith("Project: notes — loose notes")
    assert after.reply_markup is None
    assert (await h.kernel.agent.scopes.current(CONV)).project == "notes"
    shown = await picker(h, "/project")
    assert labels(shown) == ["✅ notes", "off"]
    after = await tap(h, shown, "off")
    assert after.text == "No project now"
    assert (await h.kernel.agent.scopes.current(CONV)).project == ""


async def test_resume_picker_resumes_the_tapped_session(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
    await h.converse("first session")
    await h.ask("/new")
    await h.converse("second session")
    second = h.kernel.agent.sessions.current_session(CONV)

    shown = await picker(h, "/resume")
    assert shown.text.startswith("Sessions (continue one with /resume #n):")
    found = labels(shown)
    assert len(found) == 2
    assert found[0].startswith("✅ #2 “second session” · ")  # this one, newest first
    assert found[1].startswith("#1 “first session” · ")

    after = await tap(h, shown, found[1])

    assert after.text.startswith("Resumed session #1 “first session”")
    assert after.reply_markup is None
    assert h.kernel.agent.sessions.current_session(CONV) != second
    await h.converse("back in the first")
    assert "first session" in json.dumps(h.model.requests[-1].body["messages"])
    assert "second session" not in json.dumps(h.model.requests[-1].body["messages"])


async def test_resume_takes_a_bare_number_like_a_hash_number(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
    for text in ("alpha", "beta", "gamma"):
        await h.converse(text)
        await h.ask("/new")
    listed = await picker(h, "/resume")  # #n is the session's own number
    assert labels(listed)[-1].startswith("#1 “alpha”")

    plain = await h.ask("/resume 1")
    first = h.kernel.agent.sessions.current_session(CONV)
    assert plain.startswith("Resumed session #1")
    assert await h.ask("/resume #1") == plain
    assert h.kernel.agent.sessions.current_session(CONV) == first
    h.model.enqueue(text_reply("four"))
    await h.converse("still there?")
    assert "alpha" in json.dumps(h.model.requests[-1].body["messages"])


async def test_a_long_list_pages_and_opens_on_the_current_choice(
    bot: Factory, tmp_path: Path
) -> None:
    names = [f"p{n:02d}" for n in range(1, 12)]  # eleven: two pages of eight
    write_personas(tmp_path, *names)
    h = await bot()

    shown = await picker(h, "/persona")
    assert labels(shown) == names[:8]
    assert nav(shown) == ["1/2", "▶"]
    paged = await tap(h, shown, "▶")
    assert paged.text == shown.text  # the same list, the next page of buttons
    assert labels(paged) == names[8:]
    assert nav(paged) == ["◀", "2/2"]
    back = await tap(h, paged, "◀")
    assert labels(back) == names[:8]
    paged = await tap(h, back, "▶")

    after = await tap(h, paged, "p10")
    assert after.text == "Persona: p10 — the p10"
    assert (await h.kernel.agent.scopes.current(CONV)).persona == "p10"
    again = await picker(h, "/persona")
    assert labels(again) == ["p09", "✅ p10", "p11", "off"]  # on the current one's page
    assert nav(again) == ["◀", "2/2"]


async def test_a_stale_tap_is_refused_and_changes_nothing(bot: Factory, tmp_path: Path) -> None:
    write_personas(tmp_path, "editor", "pirate")
    h = await bot()
    h.model.enqueue(text_reply("one"), text_reply("two"))
    await h.converse("first session")
    await h.ask("/new")
    await h.converse("second session")

    shown = await picker(h, "/persona")
    (tmp_path / "personas" / "pirate.md").unlink()
    after = await tap(h, shown, "pirate")
    answer = last_answer(h)
    assert answer["text"] == (
        "That choice is gone (removed or changed since this list was shown); nothing was "
        "changed. Send /persona for the current list."
    )
    assert answer["show_alert"] is True
    assert (after.text, after.reply_markup) == (shown.text, shown.reply_markup)
    assert (await h.kernel.agent.scopes.current(CONV)).persona == ""

    listed = await picker(h, "/resume")
    current = h.kernel.agent.sessions.current_session(CONV)
    older = (await h.kernel.agent.sessions.list_sessions())[1].id
    await h.kernel.agent.sessions.delete_sessions([older])
    after = await tap(h, listed, labels(listed)[1])
    assert "That choice is gone" in last_answer(h)["text"]
    assert "Send /resume for the current list" in last_answer(h)["text"]
    assert after.reply_markup == listed.reply_markup
    assert h.kernel.agent.sessions.current_session(CONV) == current


async def test_a_stale_tap_is_refused_in_chinese(bot: Factory, tmp_path: Path) -> None:
    write_personas(tmp_path, "editor")
    h = await bot(language="zh")
    shown = await picker(h, "/persona")
    assert labels(shown) == ["editor"]
    (tmp_path / "personas" / "editor.md").unlink()
    await tap(h, shown, "editor")
    assert last_answer(h)["text"] == (
        "这个选项已经不在了（列表显示之后被删除或更改），什么也没改。发送 /persona 查看现在的列表。"
    )


async def test_a_strangers_tap_does_nothing(bot: Factory) -> None:
    h = await bot()
    shown = await picker(h, "/model")
    button = next(b for row in rows(shown) for b in row if b["text"] == "model-b")

    h.tg.inject_callback(
        button["callback_data"], message_id=shown.message_id, user_id=STRANGER, chat_id=OWNER
    )
    await h.tg.wait_until(lambda: h.channel.dropped["stranger"] == 1)
    await h.settle()

    now = h.tg.message(OWNER, shown.message_id)
    assert now is not None and (now.text, now.reply_markup) == (shown.text, shown.reply_markup)
    assert h.kernel.agent.selection.model == "model-a"
    assert not h.tg.calls_to("answerCallbackQuery")


async def test_a_picker_from_before_a_restart_still_acts(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("one"), text_reply("two"))
    await h.converse("first session")
    await h.ask("/new")
    await h.converse("second session")
    shown = await picker(h, "/resume")
    older = (await h.kernel.agent.sessions.list_sessions())[1].id
    await h.channel.stop()
    await h.kernel.stop()

    again = await bot(tg=h.tg, model=h.model)  # no listing kept: the tap lists again
    after = await tap(again, shown, labels(shown)[1])

    assert after.text.startswith(f"Resumed session #{older}")
    assert after.reply_markup is None
    assert again.kernel.agent.sessions.current_session(CONV) == older


async def test_the_resume_picker_offers_every_session_not_only_the_first_page(
    bot: Factory,
) -> None:
    h = await bot()
    store = h.kernel.store
    for n in range(1, 24):  # more than /history's page of twenty
        row = await store.create_session("telegram", user_id=str(OWNER))
        await store.append_messages(row.id, [Message("user", [TextBlock(f"topic {n}")])])

    shown = await picker(h, "/resume")
    assert nav(shown) == ["1/3", "▶"]
    last = await tap(h, await tap(h, shown, "▶"), "▶")
    assert nav(last) == ["◀", "3/3"]
    assert [x.split(" · ")[0] for x in labels(last)] == [
        f"#{n} “topic {n}”" for n in (7, 6, 5, 4, 3, 2, 1)
    ]
    after = await tap(h, last, labels(last)[-1])
    assert after.text.startswith("Resumed session #1 “topic 1”")
    assert h.kernel.agent.sessions.current_session(CONV) == 1


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_a_pick_that_fails_keeps_the_picker_and_says_why(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("one"), text_reply("two"))
    await h.converse("first session")
    await h.ask("/new")
    await h.converse("second session")
    shown = await picker(h, "/resume")
    h.model.enqueue(Reply(Text("never"), stall_after=0))
    h.tg.inject_text("a slow one")
    await h.tg.wait_until(lambda: len(h.model.requests) == 3)

    after = await tap(h, shown, labels(shown)[1])  # "#1 …", while the turn runs

    answer = last_answer(h)
    assert answer["show_alert"] is True
    assert answer["text"] == "Still working on the previous message; wait or send /cancel"
    assert (after.text, after.reply_markup) == (shown.text, shown.reply_markup)
    await h.ask("/cancel")
    await h.settle()
    again = await tap(h, after, labels(after)[1])  # the picker still works
    assert again.text.startswith("Resumed session #1")
