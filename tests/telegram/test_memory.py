"""Memory in Telegram: /remember, /memory, /forget, /status, recall of what the owner
saved, and <remember> tags kept out of drafts and replies."""

from __future__ import annotations

import re

import pytest

from tests.sim.context import recalled_of
from tests.sim.script import Reply, Text, text_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import Factory


async def test_remembered_in_chinese_is_recalled_for_a_message_about_it(bot: Factory) -> None:
    h = await bot()
    assert await h.ask("/remember 我喜欢昭和时期的音乐") == "Remembered (/memory lists them all)"
    assert await h.ask("/remember The owner drinks oolong tea") == (
        "Remembered (/memory lists them all)"
    )
    h.model.enqueue(text_reply("试试《真夜中のドア》。"), text_reply("A Tieguanyin."))

    await h.converse("推荐一首昭和的歌")
    layer = recalled_of(h.model.requests[-1])
    assert layer.splitlines()[0].endswith("我喜欢昭和时期的音乐")

    # A newer, unrelated memory: only a real search puts the tea first (the
    # most-recent fallback would put this one first).
    assert (await h.ask("/remember My cat is called Mochi")).startswith("Remembered")
    await h.converse("Which tea should I brew?")
    layer = recalled_of(h.model.requests[-1])
    assert layer.splitlines()[0].endswith("The owner drinks oolong tea")


async def test_memory_listing_and_forgetting_several_at_once(bot: Factory) -> None:
    h = await bot()
    assert await h.ask("/memory") == "No long-term memories yet"
    assert "Usage" in await h.ask("/remember")
    for text in ("first fact", "second fact", "third fact", "第四条：喜欢猫"):
        await h.ask(f"/remember {text}")
    assert await h.ask("/remember  FIRST   fact ") == "Already remembered (/memory lists them all)"
    await h.kernel.memories.add("likes rain", "user")  # as the model would, with a category

    listing = (await h.ask("/memory")).splitlines()
    assert listing[0] == "Long-term memories (delete with /forget #n):"
    today = re.compile(r"^#(\d) \d{4}-\d{2}-\d{2} (.*)$")
    rows = [today.match(line) for line in listing[1:]]
    assert all(rows)
    assert [(m.group(1), m.group(2)) for m in rows if m] == [
        ("1", "(global) [user] likes rain"),  # each with its scope (issue 18)
        ("2", "(global) 第四条：喜欢猫"),
        ("3", "(global) third fact"),
        ("4", "(global) second fact"),
        ("5", "(global) first fact"),
    ]

    assert "Invalid memory number #9" in await h.ask("/forget #1/#9")
    assert await h.kernel.memories.count() == 5  # a bad reference deletes nothing
    assert "Usage" in await h.ask("/forget")
    assert await h.ask("/forget #1/#3/#5") == "Deleted 3 memory(ies)"
    # numbers changed: the old listing is gone until /memory is sent again
    assert "Invalid memory number #2" in await h.ask("/forget #2")
    listing = await h.ask("/memory")
    assert "第四条：喜欢猫" in listing and "second fact" in listing
    assert "likes rain" not in listing and "third fact" not in listing
    assert await h.ask("/forget #1 #2") == "Deleted 2 memory(ies)"
    assert await h.ask("/memory") == "No long-term memories yet"


async def test_status_shows_fts5(bot: Factory) -> None:
    h = await bot()
    await h.ask("/remember likes tea")
    status = await h.ask("/status full")
    assert "Memory search: FTS5 full text (jieba), 1 memories" in status


async def test_status_shows_the_like_fallback(
    bot: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kernel.store.db.fts5_supported", lambda conn: False)
    h = await bot()
    await h.ask("/remember 我喜欢昭和时期的音乐")
    status = await h.ask("/status full")
    assert "Memory search: LIKE fallback (this SQLite has no FTS5" in status
    h.model.enqueue(text_reply("ok"))
    await h.converse("昭和的歌")
    layer = recalled_of(h.model.requests[-1])
    assert layer.endswith("我喜欢昭和时期的音乐")


async def test_remember_tags_never_reach_drafts_or_the_reply(bot: Factory) -> None:
    h = await bot()
    chunks = [
        "Noted, Ada. <rem",
        'ember category="user">Her name ',
        "is Ada</remem",
        "ber> I will keep ",
        "that in mind. <remember>Likes short answers</remember>",
        "Anything else?",
    ]
    h.model.enqueue(Reply(Text("".join(chunks), chunks=chunks), chunk_delay=0.35))
    last = await h.converse("I'm Ada")

    assert last == "Noted, Ada.  I will keep that in mind. Anything else?"
    drafts = [d.text for d in h.tg.drafts(OWNER)]
    assert len(drafts) >= 3  # drafts really streamed
    for text in [*drafts, *h.texts()]:
        assert "<" not in text and "remember" not in text.lower()
        assert "Her name" not in text and "short answers" not in text
    listing = await h.ask("/memory")
    assert "[user] Her name is Ada" in listing and "[user] Likes short answers" in listing
