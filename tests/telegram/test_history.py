"""Sessions the owner can tell apart (issue 34 item 2) on the Bot API simulator:
/history's lines (first words, last activity in words, message count, the current
one), its pages (◀ ▶ edit the page in place), this chat's sessions vs ``/history all``,
/resume's recap, /retitle by hand, deletion asked first, and a session's number that
always means that session."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from kernel.agent.agent import UserInput
from kernel.core.messages import Message, TextBlock
from tests.clock import midday_zone
from tests.sim.script import text_reply
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import BotHarness, Factory

# The owner's zone in these tests: one where it is about noon, so the real clock's "today"
# (what /history tells activity against) stays one day for the whole test.
ZONE = midday_zone()
TZ = ZoneInfo(ZONE)
TODAY = datetime.now(TZ).replace(hour=0, minute=1, second=0, microsecond=0)
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


async def stamp(h: BotHarness, when: datetime, *ids: int) -> None:
    """Make sessions last active at ``when`` (all of them when no id is given): a
    history that is days old, without waiting days."""
    at = when.astimezone(UTC).isoformat(timespec="seconds")
    where = f" WHERE id IN ({', '.join(map(str, ids))})" if ids else ""

    def op(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE sessions SET updated_at = ?" + where, (at,))

    await h.kernel.store.write("age sessions", op)


def keyboard(message: ChatMessage) -> list[tuple[str, str]]:
    markup: Any = message.reply_markup or {}
    return [
        (b["text"], b["callback_data"]) for row in markup.get("inline_keyboard", []) for b in row
    ]


async def listing(h: BotHarness, command: str = "/history") -> ChatMessage:
    """Send ``command``; the bot's message that answers it (as the chat shows it)."""
    await h.ask(command)
    return h.bot_messages()[-1]


async def press(h: BotHarness, message: ChatMessage, data: str) -> ChatMessage:
    """Press a button of ``message``; the message once an edit has changed it."""
    edits = len(h.tg.calls_to("editMessageText"))
    h.tg.inject_callback(data, message_id=message.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("editMessageText")) > edits)
    shown = h.tg.message(OWNER, message.message_id)
    assert shown is not None
    return shown


async def console_session(h: BotHarness, text: str) -> None:
    h.model.enqueue(text_reply("noted"))
    async for _ in h.kernel.agent.start_turn("console:default", UserInput(text, channel="console")):
        pass


async def test_history_names_sessions_by_first_words_activity_and_count(bot: Factory) -> None:
    h = await bot(timezone=ZONE)
    h.model.enqueue(text_reply("Gladly."), text_reply("Hi."), text_reply("Yes."))
    await h.converse("Plan a weekend\ntrip to Hangzhou, with good food please")
    await h.ask("/new")
    await h.converse("second thoughts")
    await h.ask("/new")
    await h.converse("third")
    await console_session(h, "from the console")
    days_ago = TODAY - timedelta(days=4)
    await stamp(h, days_ago, 1)
    await stamp(h, TODAY - timedelta(days=1), 2)
    await stamp(h, TODAY, 3)
    await stamp(h, TODAY + timedelta(minutes=1), 4)
    weekday = WEEKDAYS[days_ago.weekday()]

    page = await listing(h)
    assert page.text == (
        "Sessions (continue one with /resume #n):\n"
        "#3 “third” · today 00:01 · 2 messages ← current\n"
        "#2 “second thoughts” · yesterday · 2 messages\n"
        f"#1 “Plan a weekend trip to Hangzh…” · {weekday} · 2 messages\n"
        "1 more session(s) from the console, HTTP or cron: see /history all"
    )
    assert keyboard(page) == []  # one page: no ◀ ▶

    every = await listing(h, "/history all")
    assert every.text.splitlines()[1:] == [
        "#4 “from the console” · today 00:02 · 2 messages",
        "#3 “third” · today 00:01 · 2 messages ← current",
        "#2 “second thoughts” · yesterday · 2 messages",
        f"#1 “Plan a weekend trip to Hangzh…” · {weekday} · 2 messages",
    ]

    # Resumed from the full list, the console's session stays in sight and marked.
    assert (await h.ask("/resume #4")).startswith("Resumed session #4 “from the console”")
    assert (await listing(h)).text.splitlines()[1:] == [
        "#3 “third” · today 00:01 · 2 messages",
        "#2 “second thoughts” · yesterday · 2 messages",
        f"#1 “Plan a weekend trip to Hangzh…” · {weekday} · 2 messages",
        "#4 “from the console” · today 00:02 · 2 messages ← current",
        "1 more session(s) from the console, HTTP or cron: see /history all",
    ]


async def test_history_in_chinese(bot: Factory) -> None:
    h = await bot(language="zh", timezone=ZONE)
    h.model.enqueue(text_reply("好的"), text_reply("好"))
    await h.converse("帮我写一封请假邮件")
    await h.ask("/new")
    await h.converse("今天吃什么")
    assert (await h.ask("/retitle 午饭")) == "新标题：午饭"
    old, week = TODAY - timedelta(days=400), TODAY - timedelta(days=8)
    await stamp(h, old, 1)
    await stamp(h, TODAY, 2)
    assert (await listing(h)).text == (
        "历史会话（用 /resume #n 继续）：\n"
        "#2 午饭 · 今天 00:01 · 2 条消息 ← 当前\n"
        f"#1 “帮我写一封请假邮件” · {old:%Y-%m-%d} · 2 条消息"
    )
    await stamp(h, week, 1)
    when = f"{week.month}月{week.day}日" if week.year == TODAY.year else f"{week:%Y-%m-%d}"
    assert (await listing(h)).text.endswith(f"#1 “帮我写一封请假邮件” · {when} · 2 条消息")


async def test_history_pages_past_twenty_in_place(bot: Factory) -> None:
    h = await bot(timezone=ZONE)
    store = h.kernel.store
    for n in range(1, 24):
        row = await store.create_session("telegram", user_id=str(OWNER))
        await store.append_messages(row.id, [Message("user", [TextBlock(f"topic {n}")])])
    await store.create_session("http")  # only with /history all
    await stamp(h, TODAY)

    page = await listing(h)
    lines = page.text.splitlines()
    assert lines[0] == "Sessions, page 1/2 (continue one with /resume #n):"
    assert lines[1] == "#23 “topic 23” · today 00:01 · 1 message"
    assert lines[20] == "#4 “topic 4” · today 00:01 · 1 message"
    assert keyboard(page) == [("▶", "hist:2")]
    sent = len(h.tg.calls_to("sendMessage"))

    second = await press(h, page, "hist:2")
    assert second.text.splitlines()[0] == "Sessions, page 2/2 (continue one with /resume #n):"
    assert second.text.splitlines()[1:4] == [
        "#3 “topic 3” · today 00:01 · 1 message",
        "#2 “topic 2” · today 00:01 · 1 message",
        "#1 “topic 1” · today 00:01 · 1 message",
    ]
    assert keyboard(second) == [("◀", "hist:1")]
    back = await press(h, second, "hist:1")
    assert back.text == page.text and keyboard(back) == [("▶", "hist:2")]
    assert len(h.tg.calls_to("sendMessage")) == sent  # edited in place, nothing new sent

    every = await listing(h, "/history all")
    assert every.text.splitlines()[1] == "#24 (untitled) · today 00:01 · 0 messages"
    assert keyboard(every) == [("▶", "hist:all:2")]
    rest = await press(h, every, "hist:all:2")
    assert rest.text.splitlines()[1:] == [
        "#4 “topic 4” · today 00:01 · 1 message",
        *(f"#{n} “topic {n}” · today 00:01 · 1 message" for n in (3, 2, 1)),
    ]
    assert keyboard(rest) == [("◀", "hist:all:1")]


async def test_resume_recaps_the_last_exchange(bot: Factory) -> None:
    h = await bot(timezone=ZONE)
    h.model.enqueue(
        text_reply("Hello."), text_reply("Paris.\nRome is Italy's.\nMadrid is Spain's.")
    )
    await h.converse("hi")
    await h.converse("The capital of France?\nAnd of Italy?\nAnd of Spain?")
    await h.ask("/new")
    assert await h.ask("/resume 1") == (
        "Resumed session #1 “hi”\n"
        "Where you left off:\n"
        "You: The capital of France?\nAnd of Italy? …\n"
        "Answer: Paris.\nRome is Italy's. …"
    )


async def test_retitle_by_hand_and_without_a_titles_model(bot: Factory) -> None:
    h = await bot(timezone=ZONE)
    h.model.enqueue(text_reply("Sure."))
    await h.converse("book a table for two")
    assert await h.ask("/retitle") == (
        "No titles model is configured ([titles] in config.toml), so no title can be"
        " generated: set one by hand with /retitle NEW TITLE"
    )
    # No invisible or direction character stays in a title (issue 34 review).
    hidden = "/retitle \ufeffDin\u2060ner\u061c\x85plans\u202e"
    assert await h.ask(hidden) == "New title: Din ner plans"
    assert await h.ask("/retitle   Dinner\nplans  ") == "New title: Dinner plans"
    assert (await h.kernel.store.get_session(1)).title == "Dinner plans"  # type: ignore[union-attr]
    assert "#1 Dinner plans · " in (await listing(h)).text
    assert await h.ask("/retitle #1 Dinner on Friday") == "New title: Dinner on Friday"


async def test_deleting_asks_first_and_cancel_keeps(bot: Factory) -> None:
    h = await bot(timezone=ZONE)
    h.model.enqueue(text_reply("One."), text_reply("Two."))
    await h.converse("first")
    await h.ask("/new")
    await h.converse("second")

    asked = await listing(h, "/del_history #1")
    assert asked.text == "Delete #1 “first”? This cannot be undone."
    assert keyboard(asked) == [("🗑 Delete", "del:1"), ("Cancel", "del:no")]
    kept = await press(h, asked, "del:no")
    assert kept.text == "Cancelled: the session is kept" and keyboard(kept) == []
    assert await h.kernel.store.get_session(1) is not None

    current = await listing(h, "/del_history")  # the current session
    assert current.text == "Delete #2 “second”? This cannot be undone."
    done = await press(h, current, "del:2")
    assert done.text == (
        "Deleted #2 “second”\nThe current session was deleted: your next message starts a new one"
    )
    assert keyboard(done) == []
    assert await h.kernel.store.get_session(2) is None
    assert await h.kernel.store.get_session(1) is not None
    assert h.kernel.agent.sessions.current_session(f"telegram:{OWNER}") is None


async def test_a_number_always_means_the_same_session(bot: Factory) -> None:
    h = await bot(timezone=ZONE)
    h.model.enqueue(text_reply("One."), text_reply("Two."), text_reply("Three."))
    await h.converse("first")
    await h.ask("/new")
    await h.converse("second")
    old = await listing(h)
    asked = await listing(h, "/del_history #1")  # asked, not yet answered

    # Newer activity reorders the next list; the old list's numbers keep their sessions.
    await h.ask("/new")
    await h.converse("third")
    await listing(h)
    assert "#2 “second”" in old.text
    assert (await h.ask("/resume #2")).startswith("Resumed session #2 “second”")

    assert await h.ask("/del_history #1 yes") == "Deleted #1 “first”"
    gone = "Session #1 “first” no longer exists (it was deleted): list sessions with /history"
    assert await h.ask("/resume #1") == gone
    assert (await press(h, asked, "del:1")).text == gone  # the old question's button
    assert await h.ask("/retitle #1 x") == gone
    assert await h.ask("/resume #99") == ("Session #99 does not exist: list sessions with /history")
    assert await h.kernel.store.get_session(2) is not None
