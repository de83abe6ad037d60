"""Where features meet in the owner's chat: a scheduled job's question and the owner's
own turn, /cancel and /del_history on a session another channel is using."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from kernel.agent.agent import SessionKey, UserInput
from tests.clock import ManualClock
from tests.sim.script import Reply, Text, text_reply, tool_reply
from tests.telegram.conftest import CONV, Factory
from tests.telegram.test_approval import buttons, question

TZ = ZoneInfo("Asia/Shanghai")
START = datetime(2025, 6, 1, 8, 0, tzinfo=TZ)
APPROVAL = "\n[tools.memory_add]\napproval = true\napproval_timeout = 30\n"


async def test_the_owners_own_turn_leaves_a_jobs_question_open(bot: Factory) -> None:
    clock = ManualClock(START)
    h = await bot(clock=clock, extra=APPROVAL)
    job = await h.kernel.cron.create(
        {"name": "tea", "schedule": "2025-06-01T08:05", "text": "remember that I like tea"}
    )
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea"}))
    clock.advance(to=datetime(2025, 6, 1, 8, 5, tzinfo=TZ))
    asked = await question(h)
    approve = buttons(asked)[0]["callback_data"]

    # The owner chats meanwhile: that turn ends, and the job's question must stay.
    h.model.enqueue(text_reply("Hello!"), text_reply("Saved."))
    assert await h.converse("hi") == "Hello!"
    still = h.tg.message(asked.chat_id, asked.message_id)
    assert still is not None and still.reply_markup is not None
    assert h.kernel.agent.asks.waiting()

    h.tg.inject_callback(approve, message_id=asked.message_id)
    await h.tg.wait_until(lambda: job.row.last_status == "succeeded")
    assert [m.text for m in await h.kernel.store.list_memories()] == ["likes tea"]


async def test_cancel_and_delete_on_a_session_another_channel_is_using(bot: Factory) -> None:
    h = await bot()
    agent = h.kernel.agent
    opened = await agent.sessions.open_session(SessionKey("console", "demo-user", "shared"))
    assert opened is not None
    # The owner resumes that session in Telegram while an HTTP-style turn runs on it.
    await agent.sessions.resume(CONV, opened.row.id)
    h.model.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3))
    other = agent.start_turn(opened.conversation, UserInput("long job", channel="console"))
    await h.tg.wait_until(lambda: len(h.model.requests) == 1)

    # /del_history is refused whole: the chat keeps its session.
    busy = "Still working on the previous message; wait or send /cancel"
    assert await h.ask(f"/del_history #{opened.row.id} yes") == busy
    assert agent.sessions.current_session(CONV) == opened.row.id
    assert await h.kernel.store.get_session(opened.row.id) is not None

    # What makes the chat busy is what /cancel stops.
    assert await h.ask("/cancel") == "Cancelled"
    final = await other.wait()
    assert getattr(final, "cancelled", False) is True
