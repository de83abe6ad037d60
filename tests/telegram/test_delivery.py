"""Delivery of a reply when things go wrong on the Telegram side, and at shutdown."""

from __future__ import annotations

from tests.sim.script import Reply, Text, ToolUse, text_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import CONV, Factory

LONG = "".join(f"## Part {n}\n\n" + "words " * 300 + "\n\n" for n in range(6))


async def test_a_dropped_draft_or_send_does_not_lose_the_reply(bot: Factory) -> None:
    h = await bot()
    # The progress (a draft: no placeholder any more, issue 37) is cut off: the reply
    # still comes, once and unmarked.
    h.tg.drop_connections("sendMessageDraft", times=1)
    chunks = ["still ", "delivered"]
    h.model.enqueue(Reply(Text("still delivered", chunks=chunks), chunk_delay=0.35))
    h.tg.inject_text("hi")
    await h.tg.wait_until(lambda: "still delivered" in h.texts(), timeout=30)
    await h.settle()
    assert h.texts() == ["still delivered"]
    assert [c.status for c in h.tg.calls_to("sendMessageDraft")][:1] == [0]

    # The answer's own send is cut off: it comes again, marked (it may have landed).
    h.tg.drop_connections("sendMessage", times=1)
    h.model.enqueue(text_reply("delivered again"))
    h.tg.inject_text("and again")
    await h.tg.wait_until(lambda: "↻ delivered again" in h.texts(), timeout=30)
    await h.settle()
    assert h.texts() == ["still delivered", "↻ delivered again"]


async def test_a_dropped_chunk_is_retried_and_nothing_is_lost_or_doubled(bot: Factory) -> None:
    h = await bot()
    chunks = [LONG[i : i + 500] for i in range(0, len(LONG), 500)]
    h.model.enqueue(Reply(Text(LONG, chunks=chunks), chunk_delay=0.05))
    h.tg.inject_text("write it all")
    await h.tg.wait_until(lambda: bool(h.tg.calls_to("sendMessageDraft")))  # it streams
    h.tg.drop_connections("sendMessage", times=1)  # hits a chunk of the reply
    await h.settle()
    shown = "".join(h.texts())
    assert [shown.count(f"Part {n}") for n in range(6)] == [1] * 6
    assert shown.count("words") == 6 * 300
    assert any(c.method == "sendMessage" and c.status == 0 for c in h.tg.calls)


async def test_whitespace_reply_replaces_the_placeholder(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("  \n\n  "))
    assert await h.converse("say nothing") == "(the model returned an empty reply)"
    assert len(h.bot_messages()) == 1


async def test_text_before_a_tool_call_reaches_the_chat(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(
        Reply(Text("Plan: I will save that."), ToolUse("memory_add", {"text": "likes tea"})),
        text_reply("Saved."),
    )
    assert await h.converse("remember I like tea") == "Plan: I will save that.\n\nSaved."


async def test_a_failing_handler_tells_the_owner(bot: Factory) -> None:
    h = await bot()
    (h.kernel.config.data_dir / "downloads").write_text("not a folder")
    reply = await h.ask_document(b"print(1)\n", "x.py")
    assert reply.startswith("Internal error (")
    assert h.model.requests == []


async def test_shutdown_tells_the_owner_the_reply_was_interrupted(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(Reply(Text("never finished", chunks=["never ", "finished"]), stall_after=3))
    h.tg.inject_text("long question")
    await h.tg.wait_until(
        lambda: len(h.model.requests) == 1 and h.kernel.agent.sessions.is_busy(CONV)
    )
    await h.channel.stop()
    assert h.texts() == [
        "Kernel is restarting and this reply was interrupted: please send it again in a moment"
    ]
    session = h.kernel.agent.sessions.current_session(CONV)
    stored = await h.kernel.store.load_messages(session or 0)
    assert stored[0].text == "long question"  # the owner's message is kept


async def test_drafts_are_throttled(bot: Factory) -> None:
    h = await bot()
    chunks = [f"w{i} " for i in range(30)]
    h.model.enqueue(Reply(Text("".join(chunks), chunks=chunks), chunk_delay=0.04))
    await h.converse("stream fast")
    drafts = h.tg.drafts(OWNER)
    # ~1.2 s of streaming when idle (longer on a loaded machine): drafts ≥ 0.3 s apart,
    # so a few, not one per chunk.
    assert 2 <= len(drafts) < len(chunks)
    # The simulator notes when a draft arrived, not when it was sent: on a loaded machine
    # one arrival can lag and shorten the next gap, so the typical gap is what is held.
    gaps = sorted(b.at - a.at for a, b in zip(drafts, drafts[1:], strict=False))
    assert gaps[len(gaps) // 2] >= 0.29
