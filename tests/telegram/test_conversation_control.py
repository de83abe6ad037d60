"""/retry and /undo in the owner's chat (issue 20), against the strict Anthropic
simulator: what is cut never reaches the model again, and the next request is valid."""

from __future__ import annotations

import json

from tests.sim.script import Reply, Text, ToolUse, text_reply
from tests.telegram.conftest import Factory


async def test_retry_answers_again_and_undo_cuts_one_exchange_with_its_tools(
    bot: Factory,
) -> None:
    h = await bot()
    h.model.enqueue(text_reply("first answer"))
    assert await h.converse("q-one") == "first answer"
    h.model.enqueue(
        Reply(Text("noting"), ToolUse("memory_add", {"text": "likes tea"})),
        text_reply("bad answer"),
    )
    assert (await h.converse("q-two")).endswith("bad answer")

    # /retry: the same message answered again, the old answer out of the request.
    h.model.enqueue(text_reply("better answer"))
    assert (await h.converse("/retry")).endswith("better answer")
    raw = json.dumps(h.model.requests[-1].body["messages"])
    assert "bad answer" not in raw and "memory_add" not in raw, raw
    assert raw.count("q-two") == 1 and "first answer" in raw

    # /undo: the retried exchange goes; then one with a tool pair goes whole.
    h.model.enqueue(
        Reply(Text("noting"), ToolUse("memory_add", {"text": "likes coffee"})),
        text_reply("third answer"),
    )
    assert (await h.converse("q-three")).endswith("third answer")
    reply = await h.converse("/undo")
    assert "Undone" in reply and "3 messages" not in reply  # 4: message, call, result, answer
    h.model.enqueue(text_reply("fourth answer"))
    assert await h.converse("q-four") == "fourth answer"
    raw = json.dumps(h.model.requests[-1].body["messages"])
    assert "q-three" not in raw and "memory_add" not in raw and "third answer" not in raw
    assert "better answer" in raw and "q-one" in raw

    # /history names the branches kept in the history.
    assert "Cut branches: 2" in await h.converse("/history")


async def test_nothing_to_undo_or_retry_is_refused_with_the_fix(bot: Factory) -> None:
    h = await bot()
    assert "Nothing to undo" in await h.converse("/undo")
    assert "Nothing to retry" in await h.converse("/retry")
    assert "as a reply" in await h.converse("/rewind")
    assert h.model.requests == []
