"""The durable inbox (issue 15): every owner update on record before it is handled, what
arrived while Kernel was down offered to the owner, turns cut off by a crash told with
🔁. In-process Kernels against the simulators, real SQLite; a restart is one Kernel
closed and another started on the same data folder."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from telegram import Update

from kernel.store.mailbox import InboxRow, InboxState, Mailbox
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import owner_words
from tests.sim.script import Reply, Text, text_reply
from tests.sim.telegram_sim import OWNER, ChatMessage, TelegramSim
from tests.telegram.conftest import CONV, BotHarness, Factory

OFFLINE = "while Kernel was offline"


def offline(tg: TelegramSim, text: str, *, ago: int = 120) -> dict[str, Any]:
    """A message the owner sent ``ago`` seconds before Kernel started."""
    update = tg.inject_text(text)
    update["message"]["date"] -= ago
    return update


async def rows(h: BotHarness, *states: InboxState) -> list[InboxRow]:
    wanted = states or ("waiting", "open", "answered", "failed", "cancelled", "dropped")
    return await h.channel.mailroom.mailbox.inbox_rows("telegram", [*wanted, "interrupted"])


async def states_become(h: BotHarness, expected: list[Any], *, kinds: bool = False) -> None:
    """Wait (30 s at most) until the inbox rows' states (with kinds) are ``expected``."""
    seen: list[Any] = []
    async with asyncio.timeout(30):
        while True:
            recorded = await rows(h)
            seen = [(r.kind, r.state) if kinds else r.state for r in recorded]
            if seen == expected:
                return
            await asyncio.sleep(0.05)
            print("inbox states:", seen)  # shown when the wait times out


def asked(h: BotHarness) -> list[str]:
    """What the owner's messages to the model were, in order (the last user turn each)."""
    return [owner_words(request) for request in h.model.requests]


def notices(h: BotHarness) -> list[ChatMessage]:
    return [m for m in h.bot_messages() if OFFLINE in m.text]


def buttons(message: ChatMessage) -> list[str]:
    markup = message.reply_markup or {}
    return [b["callback_data"] for row in markup.get("inline_keyboard", []) for b in row]


async def answers(h: BotHarness) -> list[str]:
    """The texts of answerCallbackQuery calls so far."""
    return [str(c.params.get("text")) for c in h.tg.calls_to("answerCallbackQuery")]


async def test_messages_commands_and_presses_are_on_record(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("hello back"))
    assert await h.converse("hello") == "hello back"
    await h.ask("/help")
    h.tg.inject_callback("ask:gone:1", message_id=h.bot_messages()[0].message_id)
    await h.tg.wait_until(lambda: bool(h.tg.calls_to("answerCallbackQuery")))
    expected = [("text", "answered"), ("command", "answered"), ("callback", "answered")]
    await states_become(h, expected, kinds=True)
    recorded = await rows(h)
    assert recorded[0].payload["message"]["text"] == "hello"
    assert recorded[0].update_id is not None and recorded[0].message_id is not None


async def test_an_update_delivered_twice_is_handled_once(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("once"), text_reply("twice"))
    update = h.tg.inject_text("only once please")
    await h.tg.wait_until(lambda: "once" in h.texts())
    await h.settle()
    # Telegram delivers it again (the offset was not confirmed before a crash).
    again = Update.de_json(dict(update), h.channel.app.bot)
    await h.channel.app.update_queue.put(again)
    await h.tg.wait_until(lambda: h.channel.mailroom.duplicates == 1)
    assert len(h.model.requests) == 1 and "twice" not in h.texts()


async def test_what_arrived_while_down_waits_for_one_notice_then_runs_in_order(
    bot: Factory,
) -> None:
    tg = await TelegramSim().start()
    offline(tg, "first while down", ago=300)
    offline(tg, "second while down", ago=60)
    h = await bot(tg=tg)
    await tg.wait_until(lambda: bool(notices(h)))
    [notice] = notices(h)
    assert "offline: 2, the earliest at" in notice.text
    assert buttons(notice) == ["waiting:run", "waiting:drop"]
    assert h.model.requests == []  # nothing handled blindly
    assert [r.state for r in await rows(h)] == ["waiting", "waiting"]

    # A new message meanwhile is answered at once; the waiting ones stay waiting.
    h.model.enqueue(text_reply("live answer"))
    assert await h.converse("live one") == "live answer"

    h.model.enqueue(text_reply("answer one"), text_reply("answer two"))
    tg.inject_callback("waiting:run", message_id=notice.message_id)
    await tg.wait_until(lambda: "answer two" in h.texts())
    await h.settle()
    assert asked(h) == ["live one", "first while down", "second while down"]
    assert h.texts().index("answer one") < h.texts().index("answer two")
    await states_become(h, ["answered"] * 4)  # two waiting, the live one, the press
    shown = tg.message(OWNER, notice.message_id)
    assert shown is not None and buttons(shown) == []  # the choice is made
    assert "Processing 2 offline messages" in shown.text

    # A second press (the same notice, or a stale copy) runs nothing twice.
    tg.inject_callback("waiting:run", message_id=notice.message_id)
    await tg.wait_until(lambda: len(tg.calls_to("answerCallbackQuery")) == 2)
    await h.settle()
    assert len(h.model.requests) == 3
    assert (await answers(h))[-1] == "No offline messages are waiting"


async def test_dropping_what_arrived_while_down_answers_none(bot: Factory) -> None:
    tg = await TelegramSim().start()
    offline(tg, "never mind this")
    photo = tg.inject_photo(b"\x89PNG not really", caption="nor this")
    photo["message"]["date"] -= 120
    h = await bot(tg=tg)
    await tg.wait_until(lambda: bool(notices(h)))
    [notice] = notices(h)
    assert "offline: 2" in notice.text
    tg.inject_callback("waiting:drop", message_id=notice.message_id)
    await tg.wait_until(lambda: bool(tg.calls_to("answerCallbackQuery")))
    await tg.wait_until(lambda: not buttons(tg.message(OWNER, notice.message_id)))  # type: ignore[arg-type]
    expected = [("text", "dropped"), ("photo", "dropped"), ("callback", "answered")]
    await states_become(h, expected, kinds=True)
    assert h.model.requests == []
    h.model.enqueue(text_reply("still here"))
    assert await h.converse("next") == "still here"
    assert asked(h) == ["next"]


async def test_the_buttons_work_after_a_restart(bot: Factory, tmp_path: Path) -> None:
    tg = await TelegramSim().start()
    model = await AnthropicSim().start()
    offline(tg, "asked before the restart")
    first = await bot(tg=tg, model=model)
    await tg.wait_until(lambda: bool(notices(first)))
    [notice] = notices(first)
    await first.channel.stop()
    await first.kernel.stop()

    second = await bot(tg=tg, model=model)  # same data folder: the rows are still waiting
    await tg.wait_until(lambda: len(notices(second)) == 2)  # told again at this start
    model.enqueue(text_reply("answered after all"))
    tg.inject_callback("waiting:run", message_id=notice.message_id)  # the OLD notice
    await tg.wait_until(lambda: "answered after all" in second.texts())
    await second.settle()
    assert asked(second) == ["asked before the restart"]
    await states_become(second, [("text", "answered"), ("callback", "answered")], kinds=True)


async def _left_open(
    data_dir: Path, tg: TelegramSim, text: str, *, placeholder: bool, update_id: int
) -> int:
    """What a crash mid-turn leaves: an open row (and the placeholder in the chat)."""
    from kernel.store.db import Store

    store = Store(data_dir / "kernel.db")
    await store.start()
    try:
        mailbox = Mailbox(store)
        message = tg._user_message(None, None, "private", "text", text, [])
        payload = {"update_id": update_id, "message": message.to_json()}
        from datetime import UTC, datetime

        row = await mailbox.take_in(
            "telegram",
            str(OWNER),
            update_id=update_id,
            message_id=message.message_id,
            kind="text",
            payload=payload,
            now=datetime.now(UTC),
        )
        assert row is not None
        if placeholder:
            shown = tg._new_message(OWNER, tg.bot_user, "text", "Working on a reply…", [])
            await mailbox.set_placeholder(row.id, shown.message_id)
        return row.id
    finally:
        await store.close()


async def test_a_turn_cut_off_by_a_crash_is_told_with_again(bot: Factory, tmp_path: Path) -> None:
    tg = await TelegramSim().start()
    first = await bot(tg=tg)  # creates the data folder and the database
    data_dir = first.kernel.config.data_dir
    await first.channel.stop()
    await first.kernel.stop()
    long = "please summarise the whole quarterly report for the board meeting tomorrow"
    with_placeholder = await _left_open(data_dir, tg, long, placeholder=True, update_id=900)
    bare = await _left_open(data_dir, tg, "short one", placeholder=False, update_id=901)

    h = await bot(tg=tg, model=first.model)
    await tg.wait_until(lambda: sum("restarted before" in x for x in h.texts()) == 2)
    texts = h.texts()
    assert "Working on a reply…" not in texts  # the placeholder became the notice
    assert any("“please summarise the whole quarterly re…”" in x for x in texts)
    assert any("“short one”" in x for x in texts)
    told = [m for m in h.bot_messages() if "restarted before" in m.text]
    assert [buttons(m) for m in told] == [[f"again:{with_placeholder}"], [f"again:{bare}"]]
    states = {r.id: r.state for r in await rows(h)}
    assert states == {with_placeholder: "interrupted", bare: "interrupted"}

    # 🔁 runs it again from the stored update; a second press while it runs is refused.
    h.model.enqueue(Reply(Text("the summary", chunks=["the ", "summary"]), chunk_delay=0.5))
    tg.inject_callback(f"again:{with_placeholder}", message_id=told[0].message_id)
    await tg.wait_until(lambda: h.kernel.agent.sessions.is_busy(CONV))
    tg.inject_callback(f"again:{with_placeholder}", message_id=told[0].message_id)
    await tg.wait_until(lambda: len(tg.calls_to("answerCallbackQuery")) == 2)
    await tg.wait_until(lambda: "the summary" in h.texts())
    await h.settle()
    assert await answers(h) == ["Running this message again", "This message is being handled now"]
    assert asked(h) == [long]
    states = {r.id: r.state for r in await rows(h) if r.kind == "text"}
    assert states == {with_placeholder: "answered", bare: "interrupted"}
    # Nothing is told twice at the next start: no row is open any more.
    await h.channel.stop()
    await h.kernel.stop()
    again = await bot(tg=tg, model=h.model)
    await again.tg.wait_until(lambda: again.channel.mailroom.since is not None)
    await again.settle()  # whatever this start queued is delivered
    assert await again.channel.mailroom.mailbox.inbox_rows("telegram", ["open"]) == []
    assert sum("restarted before" in x for x in again.texts()) == 2


async def test_a_message_held_while_busy_waits_for_the_owner(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=1))
    h.tg.inject_text("first")
    await h.under_way()
    busy = await h.ask("second")
    assert busy.startswith("Still working on the previous message")
    recorded = await rows(h)
    assert [r.state for r in recorded] == ["open", "waiting"]  # held, not closed failed
    [notice] = [m for m in h.bot_messages() if m.text.startswith("Still working")]
    assert buttons(notice) == ["busy:run", "busy:drop"]
    await h.ask("/cancel")
    await h.settle()
    await states_become(h, ["cancelled", "waiting", "answered"])


async def test_cancel_stops_the_stored_messages_not_yet_run(bot: Factory) -> None:
    tg = await TelegramSim().start()
    offline(tg, "slow one")
    offline(tg, "queued one")
    h = await bot(tg=tg)
    await tg.wait_until(lambda: bool(notices(h)))
    h.model.enqueue(Reply(Text("never", chunks=["ne", "ver"]), stall_after=1))
    tg.inject_callback("waiting:run", message_id=notices(h)[0].message_id)
    await tg.wait_until(lambda: h.kernel.agent.sessions.is_busy(CONV))
    await h.ask("/cancel")
    await h.settle()
    # The running one is cancelled; the other was not started and is offered again.
    await tg.wait_until(lambda: len(notices(h)) == 2)
    assert "offline: 1" in notices(h)[-1].text
    await states_become(h, ["cancelled", "waiting", "answered", "answered"])
    assert "queued one" not in str([r.body for r in h.model.requests])


@pytest.mark.posix
@pytest.mark.slow
@pytest.mark.parametrize("choice", ["run", "drop"])
async def test_the_real_process_asks_about_what_arrived_while_it_was_down(
    tmp_path: Path, choice: str
) -> None:
    """``python -m kernel`` started after the owner wrote twice: ONE notice with the
    count and both buttons; "process" answers each in order, "drop" answers none."""
    from tests.conftest import kernel_env, spawn_kernel, write_config

    tg = await TelegramSim().start()
    model = await AnthropicSim().start()
    proc = None

    def bot_texts() -> list[str]:
        return [m.text for m in tg.chat(OWNER, from_bot=True)]

    try:
        offline(tg, "one from the train", ago=600)
        offline(tg, "two from the train", ago=300)
        path = write_config(tmp_path, model.base_url, "claude", language="en")
        path.write_text(
            path.read_text() + f'\n[telegram]\napi_base = "{tg.api_base}"\npoll_timeout = 1\n'
        )
        env = kernel_env(KERNEL_TELEGRAM_TOKEN=tg.token, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER))
        proc = await spawn_kernel(cwd=tmp_path, env=env)
        await tg.wait_until(lambda: any(OFFLINE in text for text in bot_texts()), timeout=60)
        [notice] = [m for m in tg.chat(OWNER, from_bot=True) if OFFLINE in m.text]
        assert "offline: 2, the earliest at" in notice.text
        assert buttons(notice) == ["waiting:run", "waiting:drop"]
        assert model.requests == []
        model.enqueue(text_reply("first answer"), text_reply("second answer"))
        tg.inject_callback(f"waiting:{choice}", message_id=notice.message_id)
        if choice == "run":
            await tg.wait_until(lambda: "second answer" in bot_texts(), timeout=60)
            said = [owner_words(r) for r in model.requests]
            assert said == ["one from the train", "two from the train"]
            assert bot_texts().index("first answer") < bot_texts().index("second answer")
        else:
            await tg.wait_until(
                lambda: any("Dropped 2" in text for text in bot_texts()), timeout=60
            )
    finally:
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.communicate(), timeout=60)
        await tg.stop()
        await model.stop()
    assert proc is not None and proc.returncode == 0
    db = sqlite3.connect(tmp_path / "data" / "kernel.db")
    try:
        states = [s for (s,) in db.execute("SELECT state FROM inbox ORDER BY id")]
    finally:
        db.close()
    outcome = "answered" if choice == "run" else "dropped"
    assert states == [outcome, outcome, "answered"]  # the press is on record too
    if choice == "drop":
        assert model.requests == []


async def test_again_refuses_what_it_cannot_run(bot: Factory) -> None:
    h = await bot()
    await h.ask("/help")
    target = h.bot_messages()[0].message_id
    for data in ("again:999", "again:2", "again:123456789012345678901", "again:-1"):
        h.tg.inject_callback(data, message_id=target)  # row 2 is the first press itself
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) == 4)
    gone = "This message is no longer on record"
    expired = "This question has expired (answered, timed out or cancelled)"
    assert await answers(h) == [gone, gone, expired, expired]  # no id SQLite cannot hold
    assert h.model.requests == []
    await states_become(h, ["answered"] * 5)


async def test_a_turn_cut_off_by_a_stop_runs_again_after_the_restart(bot: Factory) -> None:
    tg = await TelegramSim().start()
    model = await AnthropicSim().start()
    first = await bot(tg=tg, model=model)
    model.enqueue(Reply(Text("never finished", chunks=["never ", "finished"]), stall_after=3))
    tg.inject_text("the question cut off")
    await first.under_way()
    await first.channel.stop()
    await first.kernel.stop()
    [notice] = [m for m in first.bot_messages() if "interrupted" in m.text]

    second = await bot(tg=tg, model=model)  # nothing open: nothing told twice
    [row] = await rows(second)
    assert (row.state, buttons(notice)) == ("interrupted", [f"again:{row.id}"])
    model.enqueue(text_reply("finished this time"))
    tg.inject_callback(f"again:{row.id}", message_id=notice.message_id)
    await tg.wait_until(lambda: any(x.startswith("finished this time") for x in second.texts()))
    await second.settle()
    assert asked(second)[-1] == "the question cut off"
    # It ran in its session (not the restart's fresh one), and the chat is there now.
    [answer] = [x for x in second.texts() if x.startswith("finished this time")]
    assert answer == (
        f"finished this time\n\n↪ Answered in session #{row.session_id} “the question cut off”;"
        " your next messages continue it · /resume to switch to another"
    )
    assert sum("interrupted" in x for x in second.texts()) == 1
    await states_become(second, ["answered", "answered"])  # the message, the press
