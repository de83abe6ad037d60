"""``/files`` in Telegram (issue 23): the session's artifacts as buttons, a press sends
one as a document; removed, foreign, unknown and too big ones are refused in words.

Real PTB against the Bot API simulator, the real anthropic SDK against the model
simulator, SQLite on disk; the owner's document and photo are downloaded through the
simulator's getFile and recorded as artifacts.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from kernel.agent.sessions import SessionKey
from kernel.audit.kinds import ARTIFACT_SAVED
from kernel.retention import DAY
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply
from tests.sim.telegram_sim import ChatMessage
from tests.telegram.conftest import CONV, BotHarness, Factory
from tests.telegram.test_media import png
from tests.telegram.test_voice import send_voice, voice_config
from tests.voice.audio import tone

NOTES = "shopping: tea, rice, 橘子\n".encode() * 3


def buttons(message: ChatMessage) -> list[dict[str, Any]]:
    markup = message.reply_markup or {}
    if isinstance(markup, str):
        markup = json.loads(markup)
    return [b for row in markup.get("inline_keyboard", []) for b in row]


async def files_message(h: BotHarness) -> ChatMessage:
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_text("/files")
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    return h.bot_messages()[-1]


async def press(h: BotHarness, data: str, message_id: int) -> None:
    h.tg.inject_callback(data, message_id=message_id)


async def next_text(h: BotHarness, before: int) -> str:
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    return str(h.tg.calls_to("sendMessage")[before].params["text"])


async def with_files(bot: Factory) -> BotHarness:
    h = await bot()
    h.model.enqueue(text_reply("Noted your list."), text_reply("A tiny picture."))
    # The chat's first message (no session yet): recorded once its turn made one.
    await h.ask_document(NOTES, "notes.txt", caption="keep this")
    await h.settle()
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_photo(png(), caption="and this")  # a session now: recorded at once
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    return h


async def test_files_lists_the_downloads_and_a_press_sends_the_document(bot: Factory) -> None:
    h = await with_files(bot)
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None

    listed = await files_message(h)

    assert listed.text.startswith("This conversation's files, newest first")
    found = buttons(listed)
    assert [b["text"].split(" · ")[0] for b in found] == ["📄 photo.jpg", "📄 notes.txt"]
    assert all(" min ago" in b["text"] and " B" in b["text"] for b in found)
    artifacts = await h.kernel.artifacts.list(session)
    assert [b["callback_data"] for b in found] == [f"file:{a.id}" for a in artifacts]
    assert [a.kind for a in artifacts] == ["download", "download"]

    await press(h, found[1]["callback_data"], listed.message_id)
    await h.tg.wait_until(lambda: bool(h.tg.calls_to("sendDocument")))

    sent = h.tg.calls_to("sendDocument")[0]
    assert sent.ok and sent.files["document"] == NOTES
    assert h.bot_messages()[-1].kind == "document"
    assert h.bot_messages()[-1].media["file_name"] == "notes.txt"
    answered = h.tg.calls_to("answerCallbackQuery")
    assert answered and "Sending notes.txt" in str(answered[-1].params.get("text"))

    await press(h, found[0]["callback_data"], listed.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendDocument")) == 2)
    assert h.tg.calls_to("sendDocument")[1].files["document"] == png()
    # The owner's downloads are in the audit as the owner's, facts only.
    saved = [e for e in await h.kernel.audit.events(session) if e.kind == ARTIFACT_SAVED]
    assert [(e.actor, e.data["kind"]) for e in saved if e.data] == [
        ("owner", "download"),
        ("owner", "download"),
    ]
    assert all("notes" not in json.dumps(e.data) for e in saved)
    assert (await h.kernel.audit.verify(session)).ok


async def test_removed_foreign_unknown_and_too_big_files_are_refused_in_words(
    bot: Factory,
) -> None:
    h = await with_files(bot)
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None
    photo, notes = await h.kernel.artifacts.list(session)
    listed = await files_message(h)

    # Retention removed both: the list says so, a press says why and the fix.
    h.kernel.retention.clock = lambda: time.time() + 8 * DAY
    assert (await h.kernel.retention.run_once()).artifacts == 2
    relisted = await files_message(h)
    assert all(b["text"].endswith("· removed") for b in buttons(relisted))
    before = len(h.tg.calls_to("sendMessage"))
    await press(h, f"file:{notes.id}", listed.message_id)
    told = await next_text(h, before)
    assert "retention deleted it" in told and "general.retention_days = 7" in told

    # Another conversation's artifact (an HTTP client's session).
    other = await h.kernel.agent.sessions.open_session(SessionKey("console", "u", "x"))
    assert other is not None
    foreign = await h.kernel.artifacts.add(
        session_id=other.row.id,
        kind="download",
        name="theirs.txt",
        path="downloads/theirs.txt",
        size=3,
        sha256=None,
    )
    (h.kernel.config.data_dir / "downloads" / "theirs.txt").write_bytes(b"abc")
    before = len(h.tg.calls_to("sendMessage"))
    await press(h, f"file:{foreign.id}", listed.message_id)
    assert "belongs to another conversation" in await next_text(h, before)

    # An id that never existed.
    before = len(h.tg.calls_to("sendMessage"))
    await press(h, "file:987654321", listed.message_id)
    assert "No such file" in await next_text(h, before)

    # Over Telegram's 50 MB bot upload limit (as recorded).
    mine = await h.kernel.artifacts.add(
        session_id=session,
        kind="download",
        name="film.mkv",
        path="downloads/film.mkv",
        size=60 * 1024 * 1024,
        sha256=None,
    )
    before = len(h.tg.calls_to("sendMessage"))
    await press(h, f"file:{mine.id}", listed.message_id)
    too_big = await next_text(h, before)
    assert "film.mkv is 60.0 MB" in too_big and "at most 50 MB" in too_big

    # A link swapped in for a file still listed: refused, never sent.
    with sqlite3.connect(h.kernel.config.db_path) as db:
        db.execute("UPDATE artifacts SET removed_at = NULL WHERE id = ?", (notes.id,))
    target = h.kernel.config.data_dir / notes.path
    target.parent.mkdir(parents=True, exist_ok=True)
    secret = h.kernel.config.data_dir.parent / "secret.txt"
    secret.write_bytes(b"x" * notes.size)
    target.symlink_to(secret)
    before = len(h.tg.calls_to("sendMessage"))
    await press(h, f"file:{notes.id}", listed.message_id)
    assert "is not served" in await next_text(h, before)

    assert h.tg.calls_to("sendDocument") == []
    await h.settle()
    assert "commands" not in h.texts()[-1]  # the chat goes on
    assert "/files" in await h.ask("/help")  # not among the menu's ten (issue 34)


async def test_a_voice_note_heard_is_kept_and_listed(bot: Factory, openai_sim: OpenAISim) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription("remind me about tea")
    h.model.enqueue(text_reply("Noted."))
    voice = tone("ogg")

    await send_voice(h, voice)

    listed = await files_message(h)
    [only] = buttons(listed)
    assert only["text"].startswith("📄 voice.ogg · ")
    await press(h, only["callback_data"], listed.message_id)
    await h.tg.wait_until(lambda: bool(h.tg.calls_to("sendDocument")))
    assert h.tg.calls_to("sendDocument")[0].files["document"] == voice
