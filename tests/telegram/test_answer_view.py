"""Issue 34, items 4, 5, 8 and 12 (second half): how one answer looks in the chat.

The answer is the message that notifies (progress is silent and goes), one 🔁 stands on
the newest answer only, a 🔁 after a model error asks the model once, /cancel keeps
what was written, and a finished tool's progress does not stay as a message of its own.
"""

from __future__ import annotations

import json
from typing import Any

from tests.sim.script import Error, Stall, Text, ToolUse, text_reply
from tests.sim.telegram_sim import OWNER, BotCall, ChatMessage
from tests.telegram.conftest import BotHarness, Factory

SENDS = ("sendMessage", "sendPhoto", "sendDocument", "sendVoice")


def loud(call: BotCall) -> bool:
    """A message that makes the owner's phone ring (edits never do)."""
    return call.method in SENDS and not call.params.get("disable_notification")


def buttons(message: ChatMessage) -> list[str]:
    markup: Any = message.reply_markup or {}
    if isinstance(markup, str):
        markup = json.loads(markup)
    return [str(b.get("callback_data")) for row in markup.get("inline_keyboard", []) for b in row]


def retry_buttons(h: BotHarness) -> list[tuple[str, list[str]]]:
    """The live messages that still carry a 🔁 (retry:…), with their text."""
    return [
        (m.text, buttons(m))
        for m in h.bot_messages()
        if any(data.startswith("retry:") for data in buttons(m))
    ]


async def test_a_model_error_then_again_asks_the_model_once(bot: Factory) -> None:
    h = await bot()
    question = "模型挂了的时候我问一句"
    h.model.enqueue(*[Error(529, "overloaded_error", "Overloaded")] * 3)
    await h.converse(question)
    notice = h.bot_messages()[-1]
    (again,) = buttons(notice)
    assert again.startswith("again:")

    h.model.enqueue(text_reply("终于答上了"))
    h.tg.inject_callback(again, message_id=notice.message_id)
    await h.tg.wait_until(lambda: "终于答上了" in h.texts())
    await h.settle()
    sent = h.model.requests[-1].body["messages"]
    assert json.dumps(sent, ensure_ascii=False).count(question) == 1
    assert h.texts()[-1] == "终于答上了"
