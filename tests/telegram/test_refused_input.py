"""A message the provider refuses for its content, in the owner's chat: a notice that
says so, and the next message answered without it (issue 15)."""

from __future__ import annotations

from tests.sim.script import Error, text_reply
from tests.telegram.conftest import Factory

POISON = "POISON-c41d"


async def test_a_refused_message_is_told_and_the_next_one_is_answered(bot: Factory) -> None:
    h = await bot()
    h.model.refuse_content(
        POISON, Error(400, "invalid_request_error", "prompt is too long: 201000 tokens > 200000")
    )

    notice = await h.converse(f"please read {POISON}")

    # issue 34: too long, in the owner's words (not the provider's), with what to do
    assert "too long for main" in notice and "/new" in notice and "201000" not in notice
    assert "set aside" in notice
    for n in range(3):
        h.model.enqueue(text_reply(f"answer {n}"))
        assert await h.converse(f"question {n}") == f"answer {n}"
    assert all(POISON not in r.raw.decode() for r in h.model.requests[-3:])


async def test_the_owner_edits_the_refused_message_and_presses_again(bot: Factory) -> None:
    h = await bot()
    h.model.refuse_content(POISON, Error(400, "invalid_request_error", "invalid image"))
    notice = await h.converse(f"look at {POISON}")
    told = h.bot_messages()[-1]
    assert "refused" in notice and told.reply_markup is not None
    (button,) = [b for row in told.reply_markup["inline_keyboard"] for b in row]
    assert button["callback_data"].startswith("again:")

    # The owner fixes the message in place (an edit is no turn of its own) ...
    h.tg.inject_edited_text("look at the cat")
    # ... and 🔁 runs what the message says now.
    h.model.enqueue(text_reply("a cat indeed"))
    h.tg.inject_callback(button["callback_data"], message_id=told.message_id)
    await h.tg.wait_until(lambda: "a cat indeed" in h.texts())
    await h.settle()
    assert h.model.requests[-1].raw.decode().count("look at the cat") == 1
    assert POISON not in h.model.requests[-1].raw.decode()
    assert h.texts().count("a cat indeed") == 1


async def test_a_refused_image_is_told_in_the_owners_words(bot: Factory) -> None:
    """Issue 34 review: not the provider's "invalid_request_error: messages.0…", but what
    happened and what to do; the raw detail stays for /status full."""
    raw = "messages.0.content.1.image.source.base64: invalid base64 data"
    h = await bot(language="zh")
    h.model.refuse_content(POISON, Error(400, "invalid_request_error", raw))

    notice = await h.converse(f"看看这张图 {POISON}")

    assert notice.startswith("⚠️ main 拒绝处理这条消息（它的内容，或其中的图片、文件）。")
    assert "换一种方式发" in notice and "已被搁置" in notice
    assert "invalid" not in notice and "messages.0" not in notice
    full = await h.ask("/status full")
    assert raw in full
