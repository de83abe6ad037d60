"""The simulator's topics in the bot's private chat (docs/telegram-topics.md), driven by
the real python-telegram-bot client: the wire shapes and Telegram's refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from telegram import Bot, ReplyParameters, Update
from telegram.error import BadRequest

from tests.sim.telegram_sim import OWNER, THREAD_NOT_FOUND, TOPIC_CLOSED, TelegramSim
from tests.sim.test_telegram_sim import make_bot


@pytest.fixture
async def sim() -> AsyncIterator[TelegramSim]:
    async with TelegramSim() as simulator:
        yield simulator


@pytest.fixture
async def bot(sim: TelegramSim) -> AsyncIterator[Bot]:
    async with make_bot(sim) as client:
        yield client


async def test_topics_off_refuse_creation_and_threads(sim: TelegramSim, bot: Bot) -> None:
    me = await bot.get_me()
    assert me.has_topics_enabled is None
    with pytest.raises(BadRequest, match="(?i)the chat is not a forum"):
        await bot.create_forum_topic(OWNER, "Trip")
    with pytest.raises(BadRequest, match="(?i)message thread not found"):
        await bot.send_message(OWNER, "hi", message_thread_id=5)
    assert [m.text for m in sim.chat(OWNER)] == []


async def test_bot_creates_topic_and_every_send_names_it(sim: TelegramSim, bot: Bot) -> None:
    sim.enable_topics()
    me = await bot.get_me()
    assert (me.has_topics_enabled, me.allows_users_to_create_topics) == (True, True)
    topic = await bot.create_forum_topic(OWNER, "Trip to Lisbon")
    assert topic.name == "Trip to Lisbon" and topic.message_thread_id > 0
    thread = topic.message_thread_id
    sent = await bot.send_message(OWNER, "in the topic", message_thread_id=thread)
    assert (sent.message_thread_id, sent.is_topic_message) == (thread, True)
    general = await bot.send_message(OWNER, "in General")
    assert general.message_thread_id is None and not general.is_topic_message
    assert await bot.send_message_draft(OWNER, 3, "forming", message_thread_id=thread)
    assert await bot.send_chat_action(OWNER, "typing", message_thread_id=thread)
    # An edit names the message only; it stays in its topic.
    edited = await bot.edit_message_text("edited", OWNER, sent.message_id)
    assert isinstance(edited, object) and sim.chat(OWNER, thread=thread)[0].text == "edited"
    # A reply without message_thread_id lands in its message's topic.
    reply = await bot.send_message(
        OWNER, "a reply", reply_parameters=ReplyParameters(sent.message_id)
    )
    assert reply.message_thread_id == thread
    assert [m.text for m in sim.chat(OWNER, thread=thread)] == ["edited", "a reply"]
    assert [m.text for m in sim.chat(OWNER, thread=None)] == ["in General"]
    assert [d.thread for d in sim.drafts(OWNER)] == [thread]


async def test_owner_topic_arrives_as_service_message_then_messages(
    sim: TelegramSim, bot: Bot
) -> None:
    sim.enable_topics()
    thread = sim.user_creates_topic("Recipes")
    sim.inject_text("pasta?", thread=thread)
    updates = await bot.get_updates(timeout=0)
    created, asked = (Update.de_json(u.to_dict(), bot).message for u in updates)
    assert created is not None and asked is not None
    assert created.forum_topic_created is not None
    assert created.forum_topic_created.name == "Recipes"
    assert (created.message_thread_id, created.is_topic_message) == (thread, True)
    assert created.message_id == thread
    assert (asked.text, asked.message_thread_id, asked.is_topic_message) == (
        "pasta?",
        thread,
        True,
    )


async def test_closed_and_deleted_topics_refuse_sends(sim: TelegramSim, bot: Bot) -> None:
    sim.enable_topics()
    thread = (await bot.create_forum_topic(OWNER, "Work")).message_thread_id
    await bot.send_message(OWNER, "kept?", message_thread_id=thread)
    assert await bot.close_forum_topic(OWNER, thread)
    for send in (
        bot.send_message(OWNER, "x", message_thread_id=thread),
        bot.send_message_draft(OWNER, 1, "x", message_thread_id=thread),
        bot.send_chat_action(OWNER, "typing", message_thread_id=thread),
    ):
        with pytest.raises(BadRequest, match="(?i)topic_closed"):
            await send
    assert [c.error for c in sim.calls[-3:]] == [TOPIC_CLOSED] * 3
    assert await bot.reopen_forum_topic(OWNER, thread)
    sim.user_deletes_topic(thread)
    with pytest.raises(BadRequest, match="(?i)message thread not found"):
        await bot.send_message(OWNER, "x", message_thread_id=thread)
    assert sim.calls[-1].error == THREAD_NOT_FOUND
    with pytest.raises(BadRequest, match="(?i)message thread not found"):
        await bot.delete_forum_topic(OWNER, thread)
    assert sim.chat(OWNER) == [] and sim.topics(OWNER) == []
