"""The inbox under faults (issue 15 review): a store that fails as the reply is queued,
/cancel while a file downloads, busy windows one after another, 🔁 pressed twice, a crash
between a command's reply and its close. In-process Kernels against the simulators, real
SQLite; a crash is the database image taken at that moment, put back before the next
start (nothing the first Kernel's stop still does reaches the chat)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.store.mailbox import Mailbox
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Stall, Text, text_reply, tool_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import CONV, BotHarness, Factory
from tests.telegram.test_inbox import buttons, rows, states_become
from tests.telegram.test_voice import openai_tts, voice_config
from tests.voice.audio import tone

PLACEHOLDER = "⚙ Running memory_add…"  # with drafts off, a tool's line is a placeholder
BUSY = "Still working on the previous message"
SENDS = ("sendMessage", "editMessageText", "deleteMessage", "editMessageReplyMarkup")


def db_path(h: BotHarness) -> Path:
    return h.kernel.config.data_dir / "kernel.db"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Another connection holds the write lock: every write of Kernel's fails."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


async def crash(h: BotHarness) -> None:
    """Kill ``h`` now: its database stays as it is at this moment."""
    path = db_path(h)
    image = sqlite3.connect(":memory:")
    source = sqlite3.connect(path)
    source.backup(image)
    source.close()
    for method in SENDS:  # what the stop would still say never reaches the chat
        h.tg.fail(method, status=403, description="Forbidden: bot was blocked", times=10_000)
    await h.channel.stop()
    await h.kernel.stop()
    h.tg._faults.clear()
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    target = sqlite3.connect(path)
    image.backup(target)
    target.close()
    image.close()


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_a_reply_the_store_cannot_queue_is_told_and_stays_open(bot: Factory) -> None:
    """Item 3: the reply's put fails (the database is locked): the placeholder becomes
    the error notice at once, and the row stays open so the next start tells again.
    (Drafts off: a tool's line is the one thing that still sends a placeholder.)"""
    h = await bot(extra="stream = false\n")
    release = h.tg.hold("sendMessage")  # the placeholder waits while the turn completes
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea"}))
    h.model.enqueue(text_reply("an answer the store cannot queue"))
    h.tg.inject_text("question")
    await h.tg.wait_until(
        lambda: len(h.model.requests) == 2 and not h.kernel.agent.sessions.is_busy(CONV)
    )
    with locked(db_path(h)):
        release.set()
        await h.tg.wait_until(lambda: any("Internal error" in x for x in h.texts()))
    if h.tg.calls_to("sendMessage")[0].ok:  # shown (unless the client gave up waiting)
        assert PLACEHOLDER not in h.texts()  # the placeholder itself became the notice
        assert len(h.texts()) == 1
    await h.tg.wait_until(lambda: not h.channel._tasks)
    [row] = await rows(h)
    assert row.state == "open"  # not settled: no one queued its outcome


async def test_cancel_while_a_voice_note_is_read_closes_its_row(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    """Item 6: /cancel while the voice note is transcribed settles it ``cancelled``."""
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription(Stall(600))
    h.tg.inject_voice(tone("ogg"))
    await h.tg.wait_until(lambda: len(openai_sim.audio_uploads) == 1)
    await h.ask("/cancel")
    await states_become(h, [("voice", "cancelled"), ("command", "answered")], kinds=True)
    h.model.enqueue(text_reply("fine"))
    assert await h.converse("next") == "fine"


async def test_each_busy_window_gets_its_notice(bot: Factory, openai_sim: OpenAISim) -> None:
    """Item 5: a busy window that ended without a turn (a voice note cancelled while
    read) does not silence the busy notice of the next window."""
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription(Stall(600), Stall(600))
    for window in (1, 2):
        h.tg.inject_voice(tone("ogg"))
        await h.tg.wait_until(lambda w=window: len(openai_sim.audio_uploads) == w)  # type: ignore[misc]
        assert (await h.ask(f"meanwhile {window}")).startswith(BUSY)
        await h.ask("/cancel")
        await h.tg.wait_until(lambda: not h.channel._tasks)
    assert sum(x.startswith(BUSY) for x in h.texts()) == 2
    recorded = [(r.kind, r.state) for r in await rows(h) if r.kind != "command"]
    assert recorded == [("voice", "cancelled"), ("text", "waiting")] * 2  # held, not lost


async def test_again_twice_never_turns_the_earlier_answer_into_a_notice(
    bot: Factory,
) -> None:
    """Item 8: 🔁 pressed again on a message already answered, then a crash during that
    run: the earlier answer stays as it was; the notice comes as a new message."""
    h = await bot()
    h.model.enqueue(Error(400, "invalid_request_error", "refused this once"))
    await h.converse("the one to run again")  # the error notice carries 🔁 (again:<id>)
    [notice] = [m for m in h.bot_messages() if any(b.startswith("again:") for b in buttons(m))]
    [press] = buttons(notice)

    h.model.enqueue(text_reply("the answer kept"))
    h.tg.inject_callback(press, message_id=notice.message_id)
    await h.tg.wait_until(lambda: "the answer kept" in h.texts())
    await h.settle()
    [answer] = [m for m in h.bot_messages() if m.text == "the answer kept"]

    # A stale copy of the button: the run shows only drafts (no placeholder: issue 37),
    # then a crash.
    h.model.enqueue(Reply(Text("never", chunks=["ne", "ver"]), stall_after=1))
    h.tg.inject_callback(press, message_id=notice.message_id)
    await h.tg.wait_until(
        lambda: len(h.model.requests) == 3 and h.kernel.agent.sessions.is_busy(CONV)
    )
    await crash(h)

    again = await bot(tg=h.tg, model=h.model)
    await again.tg.wait_until(lambda: any("restarted before" in x for x in again.texts()))
    await again.settle()
    shown = again.tg.message(OWNER, answer.message_id)
    assert shown is not None and shown.text == "the answer kept"
    pressed = again.tg.message(OWNER, notice.message_id)
    assert pressed is not None and buttons(pressed) == []  # 🔁 went once pressed


async def test_a_command_reply_closes_its_row_in_the_same_step(bot: Factory) -> None:
    """Item 10: the reply of a command is queued with its row's close (one
    transaction); a command found open at start is closed without a notice."""
    h = await bot()
    await h.ask("/help")
    await h.settle()
    [row] = await rows(h)
    assert row.state == "answered"
    conn = sqlite3.connect(db_path(h))
    try:
        linked = conn.execute("SELECT inbox_id FROM outbox ORDER BY id").fetchall()
    finally:
        conn.close()
    assert linked == [(row.id,)]

    # A crash after the command was taken in, before anything was queued for it.
    mailbox = Mailbox(h.kernel.store)
    await mailbox.settle(row.id, "open", h.channel.mailroom.now(), only_from=("answered",))
    await crash(h)
    again = await bot(tg=h.tg, model=h.model)
    await again.tg.wait_until(lambda: again.channel.mailroom.since is not None)
    await again.settle()
    assert not any("restarted before" in x for x in again.texts())
    assert [r.state for r in await rows(again)] == ["interrupted"]


async def test_the_chat_is_free_while_a_voice_reply_waits_for_its_text(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    """Item 12: while the text of a reply to voice cannot be delivered (an outage), the
    voice note waits for it apart: the owner's next message is a turn, not "busy"."""
    h = await bot(extra=voice_config(openai_sim, tts=openai_tts(openai_sim)))
    openai_sim.speech_audio = tone("mp3", seconds=1.0)
    for method in ("editMessageText", "sendMessage"):
        h.tg.fail(method, status=502, times=10_000)  # the reply cannot be delivered
    h.model.enqueue(text_reply("spoken answer"), text_reply("next answer"))
    h.tg.inject_voice(tone("ogg"))
    await h.tg.wait_until(lambda: len(h.model.requests) == 1 and not h.channel.inbound.busy(OWNER))
    h.tg.inject_text("next")
    await h.tg.wait_until(lambda: len(h.model.requests) == 2)
    h.tg._faults.clear()  # the outage ends
    await h.tg.wait_until(lambda: "next answer" in h.texts())
    await h.settle()
    assert not any(x.startswith(BUSY) for x in h.texts())
    said = [x for x in h.texts() if "answer" in x]  # a 502 may have reached: "↻ " marks it
    assert [x.removeprefix("↻ ") for x in said] == ["spoken answer", "next answer"]
    await h.tg.wait_until(lambda: bool(h.tg.calls_to("sendVoice")))  # the voice still comes


async def test_a_progress_line_of_its_own_does_not_outlive_a_crash(
    bot: Factory, tmp_path: Path
) -> None:
    """Item 11: a tool's progress line in a message of its own (no placeholder stood)
    is on the row's record: a crash mid-tool leaves it, the next start deletes it."""
    from tests.mcp.conftest import mcp_toml, stdio_server

    release = tmp_path / "never-released"
    # Drafts off, and the tool line's placeholder refused: the progress comes anew.
    h = await bot(extra="stream = false\n" + mcp_toml([stdio_server("test")]))
    h.tg.fail("sendMessage", status=400, description="Bad Request: no placeholder")
    h.model.enqueue(
        tool_reply("mcp_test__steps", {"count": 2, "release": str(release)}),
        text_reply("never said"),
    )
    h.tg.inject_text("run the steps")
    await h.tg.wait_until(lambda: any("step" in x for x in h.texts()))
    [line] = [m for m in h.bot_messages() if "step" in m.text]
    async with asyncio.timeout(30):  # the line is on record before the crash
        while True:
            if (await rows(h, "open"))[0].payload.get("kernel_cleanup"):
                break
            await asyncio.sleep(0.05)
    await crash(h)

    again = await bot(tg=h.tg, model=h.model, extra=mcp_toml([stdio_server("test")]))
    await again.tg.wait_until(lambda: any("restarted before" in x for x in again.texts()))
    await again.settle()
    assert again.tg.message(OWNER, line.message_id) is None  # deleted


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_a_reply_the_store_refused_leaves_the_live_retry_known(bot: Factory) -> None:
    """Issue 34 review: the answer before a refused put keeps its 🔁 on record, so the
    next answer still takes it away (one 🔁, on the newest answer)."""
    h = await bot(extra="stream = false\n")  # a tool's line sends a placeholder
    h.model.enqueue(text_reply("one"))
    await h.converse("first")
    release = h.tg.hold("sendMessage")  # that placeholder waits while the turn completes
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea"}))
    h.model.enqueue(text_reply("an answer the store cannot queue"))
    h.tg.inject_text("second")
    await h.tg.wait_until(
        lambda: len(h.model.requests) == 3 and not h.kernel.agent.sessions.is_busy(CONV)
    )
    with locked(db_path(h)):
        release.set()
        await h.tg.wait_until(lambda: any("Internal error" in x for x in h.texts()))
    await h.tg.wait_until(lambda: not h.channel._tasks)

    h.model.enqueue(text_reply("three"))
    assert await h.converse("third") == "three"
    await h.settle()
    with_retry = [
        m.text for m in h.bot_messages() if any(b.startswith("retry:") for b in buttons(m))
    ]
    assert with_retry == ["three"]
