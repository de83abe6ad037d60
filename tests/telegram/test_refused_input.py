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

    assert "The model refused this message (prompt is too long" in notice
    assert "set aside" in notice
    for n in range(3):
        h.model.enqueue(text_reply(f"answer {n}"))
        assert await h.converse(f"question {n}") == f"answer {n}"
    assert all(POISON not in r.raw.decode() for r in h.model.requests[-3:])
