"""Owner approval of tool calls through inline buttons (``[tools.<name>] approval``)."""

from __future__ import annotations

from typing import Any

from tests.sim.script import text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import CONV, BotHarness, Factory, asking

STRANGER = 4242
APPROVAL = "\n[tools.memory_add]\napproval = true\napproval_timeout = {timeout}\n"


async def start(bot: Factory, wait: float = 30.0) -> BotHarness:
    return await bot(extra=APPROVAL.format(timeout=wait))


async def question(h: BotHarness) -> ChatMessage:
    """The bot's message that carries inline buttons."""
    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    return next(m for m in h.bot_messages() if asking(m))


def buttons(message: ChatMessage) -> list[dict[str, Any]]:
    assert message.reply_markup is not None
    return [b for row in message.reply_markup["inline_keyboard"] for b in row]


def tool_result_sent(h: BotHarness) -> dict[str, Any]:
    """The tool_result block of the model's second request."""
    blocks = h.model.requests[1].body["messages"][-1]["content"]
    [result] = [b for b in blocks if b["type"] == "tool_result"]
    return dict(result)


async def test_approve_runs_the_tool_and_closes_the_question(bot: Factory) -> None:
    h = await start(bot)
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea"}), text_reply("Saved."))
    h.tg.inject_text("remember that I like tea")

    asked = await question(h)
    assert "Remember something" in asked.text and "likes tea" in asked.text
    approve, deny = buttons(asked)
    assert (approve["text"], deny["text"]) == ("✅ Approve", "❌ Deny")
    assert await h.kernel.store.list_memories() == []  # nothing runs before the answer

    h.tg.inject_callback(approve["callback_data"], message_id=asked.message_id)
    await h.settle()

    assert [m.text for m in await h.kernel.store.list_memories()] == ["likes tea"]
    assert h.texts()[-1] == "Saved."
    closed = h.tg.message(OWNER, asked.message_id)
    assert closed is not None and closed.reply_markup is None
    assert closed.text.endswith("Chosen: ✅ Approve")
    assert h.tg.calls_to("answerCallbackQuery")[-1].params["text"] == "Chosen: ✅ Approve"
    assert not tool_result_sent(h).get("is_error")


async def test_deny_tells_the_model_and_runs_nothing(bot: Factory) -> None:
    h = await start(bot)
    h.model.enqueue(tool_reply("memory_add", {"text": "secret"}), text_reply("Understood."))
    h.tg.inject_text("remember a secret")

    asked = await question(h)
    h.tg.inject_callback(buttons(asked)[1]["callback_data"], message_id=asked.message_id)
    await h.settle()

    assert await h.kernel.store.list_memories() == []
    result = tool_result_sent(h)
    assert result["is_error"] is True and "denied" in str(result["content"])
    assert h.texts()[-1] == "Understood."
    assert h.tg.message(OWNER, asked.message_id).text.endswith("Chosen: ❌ Deny")  # type: ignore[union-attr]


async def test_no_answer_times_out_and_the_buttons_go(bot: Factory) -> None:
    h = await start(bot, wait=0.3)
    h.model.enqueue(tool_reply("memory_add", {"text": "x"}), text_reply("No answer, skipped."))
    h.tg.inject_text("remember x")

    asked = await question(h)
    approve = buttons(asked)[0]["callback_data"]
    await h.settle()

    assert await h.kernel.store.list_memories() == []
    assert "did not answer" in str(tool_result_sent(h)["content"])
    closed = h.tg.message(OWNER, asked.message_id)
    assert closed is not None and closed.reply_markup is None
    assert "No answer in time" in closed.text
    # A late press is told the question expired, and changes nothing.
    h.tg.inject_callback(approve, message_id=asked.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) == 1)
    assert "expired" in h.tg.calls_to("answerCallbackQuery")[0].params["text"]
    assert await h.kernel.store.list_memories() == []


async def test_a_strangers_press_does_not_count(bot: Factory) -> None:
    h = await start(bot)
    h.model.enqueue(tool_reply("memory_add", {"text": "mine"}), text_reply("Done."))
    h.tg.inject_text("remember mine")

    asked = await question(h)
    approve = buttons(asked)[0]["callback_data"]
    h.tg.inject_callback(approve, message_id=asked.message_id, user_id=STRANGER, chat_id=OWNER)
    status = await h.ask("/status full")  # handled after the stranger's press, in order

    assert "strangers 1" in status
    assert h.kernel.agent.sessions.is_busy(CONV) and len(h.model.requests) == 1
    assert h.tg.calls_to("answerCallbackQuery") == []
    assert h.kernel.agent.asks.waiting(CONV)

    h.tg.inject_callback(approve, message_id=asked.message_id)
    await h.settle()
    assert [m.text for m in await h.kernel.store.list_memories()] == ["mine"]


async def test_cancel_ends_the_wait_and_the_next_message_works(bot: Factory) -> None:
    h = await start(bot)
    h.model.enqueue(tool_reply("memory_add", {"text": "never"}))
    h.tg.inject_text("remember never")

    asked = await question(h)
    assert await h.ask("/cancel") == "Cancelled"
    await h.settle()

    assert h.kernel.agent.asks.waiting() == []
    closed = h.tg.message(OWNER, asked.message_id)
    assert closed is not None and closed.reply_markup is None
    assert "No longer waiting" in closed.text
    assert await h.kernel.store.list_memories() == []

    h.model.enqueue(text_reply("Back again."))
    assert await h.converse("hello") == "Back again."
    # The stored history stayed valid: the cancelled call got its result.
    last_request = h.model.requests[-1].body["messages"]
    results = [
        b
        for m in last_request
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert len(results) == 1 and results[0]["is_error"] is True


async def test_the_model_asks_a_multiple_choice_question(bot: Factory) -> None:
    h = await bot()
    options = ["Kyoto", "Osaka", "Nara"]
    h.model.enqueue(
        tool_reply("ask_user", {"question": "Which city first?", "options": options}),
        text_reply("Osaka it is."),
    )
    h.tg.inject_text("plan my trip")

    asked = await question(h)
    assert asked.text == "Which city first?"
    assert [b["text"] for b in buttons(asked)] == options
    h.tg.inject_callback(buttons(asked)[1]["callback_data"], message_id=asked.message_id)
    await h.settle()

    assert h.texts()[-1] == "Osaka it is."
    assert '"choice": "Osaka"' in str(tool_result_sent(h)["content"])


async def test_a_question_telegram_refuses_is_settled_at_once(bot: Factory) -> None:
    h = await start(bot, wait=30.0)  # 30 s: settle() would time out if the turn waited
    h.model.enqueue(
        tool_reply("memory_add", {"text": "x"}, chunk_delay=0.5), text_reply("Could not ask.")
    )
    h.tg.inject_text("remember x")
    await h.tg.wait_until(lambda: len(h.model.requests) == 1)  # the placeholder is out
    h.tg.fail("sendMessage", status=400, description="Bad Request: chat not found", times=1)
    await h.settle()

    assert h.texts()[-1] == "Could not ask."
    assert "could not be shown" in str(tool_result_sent(h)["content"])
    assert await h.kernel.store.list_memories() == []
    assert h.kernel.agent.asks.waiting() == []


async def test_a_made_up_option_leaves_the_question_answerable(bot: Factory) -> None:
    h = await start(bot)
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea"}), text_reply("Saved."))
    h.tg.inject_text("remember that I like tea")
    asked = await question(h)
    approve = buttons(asked)[0]["callback_data"]
    forged = approve.rsplit(":", 1)[0] + ":9"  # no option 9
    h.tg.inject_callback(forged, message_id=asked.message_id)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("answerCallbackQuery")) == 1)
    h.tg.inject_callback(approve, message_id=asked.message_id)  # the real button still works
    await h.settle()
    assert [m.text for m in await h.kernel.store.list_memories()] == ["likes tea"]
    assert h.texts()[-1] == "Saved."
    closed = h.tg.message(OWNER, asked.message_id)  # and closes it with the choice
    assert closed is not None and closed.text.endswith("Chosen: ✅ Approve")
