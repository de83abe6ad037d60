"""Issue 37, item 4: what the Telegram channel keeps in memory does not grow with the
chats that write to the bot or with the owner's retries (docs/architecture.md, "Bounded
by design"), and the owner's chat behaves as before."""

from __future__ import annotations

from tests.sim.script import text_reply
from tests.telegram.conftest import Factory

STRANGERS = 40


async def test_strangers_groups_and_channels_leave_no_id_behind(bot: Factory) -> None:
    h = await bot()
    for n in range(STRANGERS):
        h.tg.inject_text("hello", user_id=10_000 + n)
        h.tg.inject_text("hello group", chat_id=-200 - n, user_id=20_000 + n, chat_type="group")
        h.tg.inject_channel_post("post", chat_id=-1_000_000 - n)
    status = await h.ask("/status full")
    assert f"strangers {STRANGERS}, groups {STRANGERS}" in status
    assert f"channels {STRANGERS}" in status
    app = h.channel.app
    # PTB's marks for a persistence Kernel does not have: the last update's at most.
    assert len(app._chat_ids_to_be_updated_in_persistence) <= 1
    assert len(app._user_ids_to_be_updated_in_persistence) <= 1
    h.model.enqueue(text_reply("still here"))
    assert await h.converse("hi") == "still here"


async def test_retries_leave_no_row_marked_for_later(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("answer 0"))
    await h.converse("question")
    for n in range(1, 6):
        h.model.enqueue(text_reply(f"answer {n}"))
        h.tg.inject_text("/retry")
        await h.tg.wait_until(lambda n=n: f"answer {n}" in h.texts())
        await h.settle()
    assert h.texts()[-1] == "answer 5"
    assert not h.channel.mailroom._deferred
