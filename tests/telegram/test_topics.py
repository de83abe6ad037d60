"""Topics in the bot's private chat as Kernel sessions (issue 41): each topic is its own
conversation, answered in its topic, with its own busy window and /cancel; turns in two
topics run at once. Real PTB against the Bot API simulator (its topics follow
docs/telegram-topics.md), the real anthropic SDK against the model simulator."""

from __future__ import annotations

import asyncio

from kernel.core.delivery import TOPIC_META, Target
from kernel.telegram.budget import RateBudget
from kernel.telegram.topics import CONVERSATION, TOPIC_BASE
from tests.clock import ManualClock
from tests.cron.test_approval import APPROVAL
from tests.cron.test_reminder import DUE, START
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, TelegramSim
from tests.telegram.conftest import BotHarness, Factory
from tests.telegram.test_approval import buttons, question
from tests.waiting import wait_until


def in_topic(h: BotHarness, thread: int | None) -> list[str]:
    return [m.text for m in h.tg.chat(OWNER, from_bot=True, thread=thread)]


async def with_topics(bot: Factory, *names: str) -> tuple[BotHarness, list[int]]:
    tg = await TelegramSim().start()
    tg.enable_topics()
    h = await bot(tg=tg)
    return h, [tg.user_creates_topic(name) for name in names]


async def test_two_topics_run_at_once_each_answered_in_its_topic_and_cancel_is_per_topic(
    bot: Factory,
) -> None:
    h, (trip, code) = await with_topics(bot, "Trip", "Code")
    gate_trip, gate_code = asyncio.Event(), asyncio.Event()
    h.model.enqueue(Reply(Text("never shown"), gate=gate_trip))
    h.model.enqueue(Reply(Text("use a dict"), gate=gate_code))
    h.tg.inject_text("plan Lisbon", thread=trip)
    await h.tg.wait_until(lambda: len(h.model.requests) == 1)
    h.tg.inject_text("hash map?", thread=code)
    # Both turns are at the model at once: the second did not wait for the first.
    await h.tg.wait_until(lambda: len(h.model.requests) == 2)
    sessions = h.kernel.agent.sessions
    trip_conv, code_conv = (CONVERSATION.format(thread=n) for n in (trip, code))
    assert sessions.is_busy(trip_conv) and sessions.is_busy(code_conv)
    assert sessions.current_session(trip_conv) != sessions.current_session(code_conv)

    h.tg.inject_text("/cancel", thread=trip)
    await h.tg.wait_until(lambda: not sessions.is_busy(trip_conv))
    assert sessions.is_busy(code_conv)  # the other topic's turn goes on
    gate_code.set()
    await h.tg.wait_until(lambda: "use a dict" in in_topic(h, code))
    gate_trip.set()
    await h.tg.wait_until(lambda: not sessions.is_busy(code_conv))
    assert in_topic(h, code) == ["use a dict"]
    assert "use a dict" not in in_topic(h, trip) and "never shown" not in in_topic(h, trip)
    assert in_topic(h, None) == []  # nothing went to General
    # Every call that sends named its topic.
    for call in h.tg.calls:
        if call.method in ("sendMessage", "sendMessageDraft", "sendChatAction"):
            assert call.params.get("message_thread_id") in (trip, code), call
    # The General topic is the chat's conversation, as without topics.
    h.model.enqueue(text_reply("general answer"))
    h.tg.inject_text("hi")
    await h.tg.wait_until(lambda: any(x.startswith("general answer") for x in in_topic(h, None)))
    await h.settle()
    assert sessions.current_session(f"telegram:{OWNER}") not in (
        sessions.current_session(trip_conv),
        sessions.current_session(code_conv),
        None,
    )
    assert "\nTopics: on; running: - (at most 3)\n" in await h.ask("/status full")


async def test_a_topic_deleted_mid_turn_delivers_to_general_with_a_note(bot: Factory) -> None:
    h, (trip,) = await with_topics(bot, "Trip")
    gate = asyncio.Event()
    h.model.enqueue(Reply(Text("Lisbon in May"), gate=gate))
    h.tg.inject_text("when to go?", thread=trip)
    await h.tg.wait_until(lambda: len(h.model.requests) == 1)
    h.tg.user_deletes_topic(trip)
    gate.set()
    await h.tg.wait_until(lambda: "Lisbon in May" in in_topic(h, None))
    await h.settle()
    assert in_topic(h, None) == [
        f"⚠️ Topic #{trip} was deleted or closed, so its replies come here (General) instead."
        " /new <title> opens a new topic",
        "Lisbon in May",
    ]


async def test_a_restart_delivers_each_topics_undelivered_reply_to_its_topic(
    bot: Factory,
) -> None:
    tg = await TelegramSim().start()
    tg.enable_topics()
    model = await AnthropicSim().start()
    first = await bot(tg=tg, model=model, shutdown_timeout=1)
    trip, code = tg.user_creates_topic("Trip"), tg.user_creates_topic("Code")
    gates = asyncio.Event(), asyncio.Event()
    model.enqueue(
        Reply(Text("trip answer"), gate=gates[0]), Reply(Text("code answer"), gate=gates[1])
    )
    tg.inject_text("plan", thread=trip)
    await tg.wait_until(lambda: len(model.requests) == 1)
    tg.inject_text("code", thread=code)
    await tg.wait_until(lambda: len(model.requests) == 2)
    await tg.go_down()  # nothing gets out before the stop (provably: refused)
    for gate in gates:
        gate.set()
    outbox = first.channel.outbox
    lanes = [TOPIC_BASE + trip, TOPIC_BASE + code]
    await wait_until(lambda: all(outbox.undelivered(lane) for lane in lanes), timeout=60)
    await first.channel.stop()
    await first.kernel.stop()
    await tg.come_back()

    second = await bot(tg=tg, model=model, shutdown_timeout=1)
    await tg.wait_until(lambda: in_topic(second, trip) and in_topic(second, code), timeout=60)
    assert in_topic(second, trip) == ["trip answer"]
    assert in_topic(second, code) == ["code answer"]
    assert in_topic(second, None) == []


async def test_a_reminder_set_in_a_topic_lands_in_that_topic(bot: Factory) -> None:
    tg = await TelegramSim().start()
    tg.enable_topics()
    clock = ManualClock(START)
    h = await bot(tg=tg, clock=clock)
    trip = tg.user_creates_topic("Trip")
    h.model.enqueue(
        tool_reply(
            "cron_create",
            {"name": "passport", "schedule": "2025-06-02T09:00", "text": "remind: passport"},
        ),
        text_reply("I will remind you at 9."),
        text_reply("⏰ Renew the passport!"),
    )
    tg.inject_text("remind me tomorrow at 9", thread=trip)
    await tg.wait_until(lambda: "I will remind you at 9." in in_topic(h, trip))
    [job] = [j for j in h.kernel.cron.list() if j.row.created_by == "agent"]
    assert job.spec.dispatch.session_id == CONVERSATION.format(thread=trip)
    clock.advance(to=DUE)
    await tg.wait_until(lambda: "⏰ Renew the passport!" in in_topic(h, trip))
    assert in_topic(h, None) == []


async def test_the_cap_on_parallel_turns_names_the_running_topics(bot: Factory) -> None:
    tg = await TelegramSim().start()
    tg.enable_topics()
    h = await bot(tg=tg, extra="max_parallel_turns = 1\n")
    trip, code = tg.user_creates_topic("Trip"), tg.user_creates_topic("Code")
    gate = asyncio.Event()
    h.model.enqueue(Reply(Text("Lisbon"), gate=gate), text_reply("a dict"))
    tg.inject_text("plan", thread=trip)
    await tg.wait_until(lambda: len(h.model.requests) == 1)
    tg.inject_text("hash map?", thread=code)
    await tg.wait_until(lambda: bool(in_topic(h, code)))
    assert in_topic(h, code) == [
        "⏳ Already running: Trip, the telegram.max_parallel_turns limit (1). Wait for one"
        " to answer, or /cancel it there, then send this message again"
    ]
    gate.set()
    await tg.wait_until(lambda: "Lisbon" in in_topic(h, trip))
    tg.inject_text("hash map?", thread=code)  # sent again once the other answered
    await tg.wait_until(lambda: "a dict" in in_topic(h, code))
    assert len(h.model.requests) == 2


async def test_new_with_a_title_opens_a_topic_and_resume_finds_it_again(bot: Factory) -> None:
    h, _ = await with_topics(bot)
    h.model.enqueue(text_reply("Lisbon in May"))
    h.tg.inject_text("/new Trip to Lisbon")
    await h.tg.wait_until(lambda: bool(in_topic(h, None)))
    assert in_topic(h, None) == [
        "🗂 Opened the topic “Trip to Lisbon”: go on there; this conversation is unchanged"
    ]
    [topic] = h.tg.topics(OWNER)
    assert topic.name == "Trip to Lisbon"
    await h.tg.wait_until(lambda: bool(in_topic(h, topic.thread)))
    assert in_topic(h, topic.thread) == [
        "🆕 New session: Trip to Lisbon. Write in this topic to go on"
    ]
    h.tg.inject_text("when to go?", thread=topic.thread)
    await h.tg.wait_until(lambda: "Lisbon in May" in in_topic(h, topic.thread))
    await h.settle()
    session = h.kernel.agent.sessions.current_session(CONVERSATION.format(thread=topic.thread))
    assert session is not None
    listing = await h.ask("/history")
    assert f"#{session} " in listing and "🗂" in listing
    h.tg.inject_text("/history", thread=topic.thread)  # a topic lists the sessions too
    await h.tg.wait_until(lambda: any(x.startswith("Sessions") for x in in_topic(h, topic.thread)))
    assert f"#{session} " in in_topic(h, topic.thread)[-1]
    before = len(in_topic(h, topic.thread))
    h.tg.inject_text(f"/resume #{session}")
    await h.tg.wait_until(lambda: len(in_topic(h, topic.thread)) > before)
    await h.settle()
    assert in_topic(h, None)[-1] == (
        "🗂 The session is open in the topic “Trip to Lisbon”: go on there"
    )
    assert in_topic(h, topic.thread)[-1].startswith("Resumed")


async def test_the_agent_opens_a_topic_and_starts_a_turn_there(bot: Factory) -> None:
    h, _ = await with_topics(bot)
    h.model.enqueue(
        tool_reply("open_topic", {"title": "Packing list", "text": "list what to pack"}),
        text_reply("Opened a topic for it."),
    )
    h.model.enqueue_for("list what to pack", text_reply("passport, charger"))
    h.tg.inject_text("start a packing list in its own topic")
    await h.tg.wait_until(lambda: bool(h.tg.topics(OWNER)))
    [topic] = h.tg.topics(OWNER)
    await h.tg.wait_until(lambda: "passport, charger" in in_topic(h, topic.thread))
    await h.tg.wait_until(lambda: "Opened a topic for it." in in_topic(h, None))
    assert topic.name == "Packing list"
    assert in_topic(h, topic.thread) == ["passport, charger"]


async def test_a_topics_final_answer_goes_out_while_another_topic_streams(bot: Factory) -> None:
    """The chat's rate budget is the chat's (Telegram's limit), shared by its topics: a
    topic that streams (drafts, no token) costs another topic's final answer nothing."""
    h, (story, quick) = await with_topics(bot, "Story", "Quick")
    chunks = [f"part {n} " for n in range(30)]
    h.model.enqueue(Reply(Text("".join(chunks), chunks=chunks), stall_after=12))
    h.model.enqueue(text_reply("the quick answer"))
    h.tg.inject_text("tell a long story", thread=story)
    await h.tg.wait_until(lambda: bool(h.tg.drafts(OWNER, thread=story)))
    h.tg.inject_text("2+2?", thread=quick)
    await h.tg.wait_until(lambda: "the quick answer" in in_topic(h, quick))
    story_conv = CONVERSATION.format(thread=story)
    assert h.kernel.agent.sessions.is_busy(story_conv)  # still streaming meanwhile
    budget = h.channel.bot.rate_limiter
    assert isinstance(budget, RateBudget) and budget.stats()["thinned"].get("final", 0) == 0
    h.tg.inject_text("/cancel", thread=story)
    await h.tg.wait_until(lambda: not h.kernel.agent.sessions.is_busy(story_conv))


async def test_a_reminder_made_in_general_goes_to_the_configured_topic(bot: Factory) -> None:
    tg = await TelegramSim().start()
    tg.enable_topics()
    clock = ManualClock(START)
    h = await bot(tg=tg, clock=clock, extra='proactive_topic = "Reminders"\n')
    h.model.enqueue(
        tool_reply("cron_create", {"name": "tea", "schedule": "2025-06-02T09:00", "text": "tea"}),
        text_reply("I will remind you."),
        text_reply("⏰ Tea time!"),
    )
    tg.inject_text("remind me about tea")
    await tg.wait_until(lambda: any(x.startswith("I will remind you.") for x in in_topic(h, None)))
    clock.advance(to=DUE)
    await tg.wait_until(lambda: bool(tg.topics(OWNER)))
    [topic] = tg.topics(OWNER)
    await tg.wait_until(lambda: "⏰ Tea time!" in in_topic(h, topic.thread))
    assert topic.name == "Reminders"
    assert h.kernel.store is not None
    assert (
        await h.kernel.store.get_setting("telegram.proactive_topic") == f"{topic.thread}:Reminders"
    )


async def test_a_job_made_in_a_topic_asks_its_approval_in_that_topic(bot: Factory) -> None:
    """A question of a turn no chat shows (a cron run) goes where its job lives."""
    tg = await TelegramSim().start()
    tg.enable_topics()
    clock = ManualClock(START)
    h = await bot(tg=tg, clock=clock, extra=APPROVAL)
    trip = tg.user_creates_topic("Trip")
    h.model.enqueue(
        tool_reply("cron_create", {"name": "tea", "schedule": "2025-06-02T09:00", "text": "tea"}),
        text_reply("Set."),
        tool_reply("memory_add", {"text": "likes tea"}),
        text_reply("Saved."),
    )
    tg.inject_text("at 9 tomorrow, remember that I like tea", thread=trip)
    await tg.wait_until(lambda: "Set." in in_topic(h, trip))
    clock.advance(to=DUE)

    asked = await question(h)
    assert asked.thread == trip and asked.text.startswith('The scheduled job "tea" needs')
    approve, _ = buttons(asked)
    tg.inject_callback(approve["callback_data"], message_id=asked.message_id)
    await tg.wait_until(lambda: "Saved." in in_topic(h, trip))
    assert [m.text for m in await h.kernel.store.list_memories()] == ["likes tea"]


async def test_resume_of_a_session_whose_topic_was_deleted_opens_a_new_topic(
    bot: Factory,
) -> None:
    h, (trip,) = await with_topics(bot, "Trip")
    store = h.kernel.agent.store
    row = await store.create_session("telegram", title="Lisbon", meta={TOPIC_META: trip})
    h.tg.user_deletes_topic(trip)

    h.tg.inject_text(f"/resume #{row.id}")

    await h.tg.wait_until(lambda: bool(in_topic(h, None)))
    await h.settle()
    [topic] = h.tg.topics(OWNER)  # a new topic, named after the session
    assert (topic.name, topic.thread != trip) == ("Lisbon", True)
    assert in_topic(h, None) == ["🗂 The session is open in the topic “Lisbon”: go on there"]
    assert in_topic(h, topic.thread)[0].startswith("Resumed")
    session = await store.get_session(row.id)
    assert session is not None and session.meta[TOPIC_META] == topic.thread


async def test_the_agent_cannot_start_a_turn_in_a_new_topic_past_the_cap(bot: Factory) -> None:
    """open_topic's turn counts against telegram.max_parallel_turns: a turn that opens
    topics with turns in them (each of which may open more) stops at the cap."""
    tg = await TelegramSim().start()
    tg.enable_topics()
    h = await bot(tg=tg, extra="max_parallel_turns = 1\n")
    h.model.enqueue(
        tool_reply("open_topic", {"title": "Packing list", "text": "list what to pack"}),
        text_reply("Could not open it."),
    )
    h.tg.inject_text("start a packing list in its own topic")
    await h.tg.wait_until(lambda: any(x.startswith("Could not") for x in in_topic(h, None)))
    await h.settle()
    assert h.tg.topics(OWNER) == [] and len(h.model.requests) == 2
    assert "the telegram.max_parallel_turns limit (1)" in str(h.model.requests[1].body)


async def test_a_topic_goes_on_in_its_session_after_a_restart(bot: Factory) -> None:
    """A topic is a session: the first message in it after a restart is answered with
    the topic's history (it started a new, empty session, and said nothing)."""
    tg = await TelegramSim().start()
    tg.enable_topics()
    model = await AnthropicSim().start()
    first = await bot(tg=tg, model=model)
    trip = tg.user_creates_topic("Trip")
    model.enqueue(text_reply("Lisbon noted"), text_reply("In May"))
    tg.inject_text("I plan Lisbon", thread=trip)
    await tg.wait_until(lambda: "Lisbon noted" in in_topic(first, trip))
    await first.settle()
    conversation = CONVERSATION.format(thread=trip)
    session = first.kernel.agent.sessions.current_session(conversation)
    await first.channel.stop()
    await first.kernel.stop()

    second = await bot(tg=tg, model=model)
    tg.inject_text("when?", thread=trip)
    await tg.wait_until(lambda: "In May" in in_topic(second, trip))

    assert second.kernel.agent.sessions.current_session(conversation) == session
    assert "I plan Lisbon" in str(model.requests[-1].body["messages"])
    assert in_topic(second, trip) == ["Lisbon noted", "In May"]


async def test_the_configured_topic_is_opened_again_once_the_owner_deleted_it(
    bot: Factory,
) -> None:
    """Deliveries keep going to a topic of the configured name: the owner deleting it
    does not send them to General (with a note) from then on."""
    tg = await TelegramSim().start()
    tg.enable_topics()
    h = await bot(tg=tg, extra='proactive_topic = "Reminders"\n')
    outlet = h.kernel.channel_registry.require("telegram")
    await outlet.send_text(Target(origin="cron"), "⏰ Tea time!")
    [first] = tg.topics(OWNER)
    await tg.wait_until(lambda: "⏰ Tea time!" in in_topic(h, first.thread))
    tg.user_deletes_topic(first.thread)

    await outlet.send_text(Target(origin="cron"), "⏰ Walk time!")

    [again] = tg.topics(OWNER)
    await tg.wait_until(lambda: "⏰ Walk time!" in in_topic(h, again.thread))
    assert again.name == "Reminders" and again.thread != first.thread
    assert in_topic(h, None) == []
