"""A lone surrogate (issue 33): Telegram's JSON may carry an escape of half a UTF-16 pair
(``"\\ud800"``: valid JSON, not text) in a message, a caption or a file's name, and the
speech server's in a transcript. The owner is answered like for any other message, and
the model is sent U+FFFD in its place; a model's reply that carries one reaches the
owner too."""

from __future__ import annotations

import json
from typing import Any

from tests.sim.anthropic_sim import last_user_text
from tests.sim.context import owner_words
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply
from tests.telegram.conftest import Factory
from tests.telegram.test_voice import send_voice, voice_config
from tests.voice.audio import tone

LONE = "\ud800"
MENDED = "\ufffd"


def user_text(body: Any) -> str:
    return last_user_text(body["messages"])


async def test_a_text_message_with_a_lone_surrogate_is_answered(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("got it"))

    answer = await h.converse(f"hello {LONE} world")

    assert answer == "got it"
    sent = user_text(h.model.requests[-1].body)
    assert f"hello {MENDED} world" in sent and LONE not in sent
    # The stored history holds the mended text too: the next turn sends it again.
    h.model.enqueue(text_reply("again"))
    assert await h.converse("and now?") == "again"
    history = json.dumps(h.model.requests[-1].body["messages"], ensure_ascii=False)
    assert f"hello {MENDED} world" in history


async def test_a_document_named_and_captioned_with_one_is_answered(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("read it"))

    answer = await h.ask_document(b"plain words\n", f"notes{LONE}.txt", caption=f"see {LONE} this")
    await h.settle()

    assert answer == "read it" or "read it" in h.texts()
    sent = user_text(h.model.requests[-1].body)
    assert f"notes{MENDED}.txt" in sent and f"see {MENDED} this" in sent
    assert "plain words" in sent


async def test_a_transcript_carrying_one_is_answered(bot: Factory, openai_sim: OpenAISim) -> None:
    """The speech server's JSON may carry one too: the voice note is still answered."""
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription(f"call {LONE} mom")
    h.model.enqueue(text_reply("calling"))

    await send_voice(h, tone("ogg"))

    assert h.texts()[-1] == "calling"
    assert owner_words(h.model.requests[-1]) == f"[voice: call {MENDED} mom]"


async def test_a_model_reply_carrying_one_reaches_the_owner(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply(f"odd {LONE} reply"))

    answer = await h.converse("say something odd")

    assert answer == f"odd {MENDED} reply"
    # The next request sends the stored reply again, mended.
    h.model.enqueue(text_reply("fine"))
    assert await h.converse("again") == "fine"
    history = json.dumps(h.model.requests[-1].body["messages"], ensure_ascii=False)
    assert f"odd {MENDED} reply" in history
