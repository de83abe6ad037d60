"""Speech in the usage ledger (issue 16): a transcription whose server reports its usage
(OpenAI: tokens for the gpt-4o transcribe models, seconds for whisper-1) is one row with
purpose ``speech``; one that reports nothing writes no row."""

from __future__ import annotations

from typing import Any

import pytest

from kernel.store.usage import UsageFilter
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply
from tests.telegram.conftest import Factory
from tests.telegram.test_voice import send_voice, voice_config
from tests.voice.audio import tone

TOKENS = {
    "type": "tokens",
    "input_tokens": 14,
    "output_tokens": 45,
    "total_tokens": 59,
    "input_token_details": {"text_tokens": 0, "audio_tokens": 14},
}


@pytest.mark.parametrize(
    ("reported", "tokens", "seconds"),
    [(TOKENS, (14, 45), None), ({"type": "duration", "seconds": 3.5}, (0, 0), 3.5)],
)
async def test_a_reported_transcription_is_a_speech_row(
    bot: Factory,
    openai_sim: OpenAISim,
    reported: dict[str, Any],
    tokens: tuple[int, int],
    seconds: float | None,
) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.transcription_usage = reported
    openai_sim.enqueue_transcription("hello there")
    h.model.enqueue(text_reply("Hi."))

    await send_voice(h, tone("ogg"))

    rows = await h.kernel.agent.meter.ledger.entries(UsageFilter(purpose="speech"))
    [row] = rows
    assert (row.provider, row.model, row.channel) == ("stt", "whisper-sim", "telegram")
    assert (row.usage.input, row.usage.output, row.seconds) == (*tokens, seconds)
    assert row.cost is None  # [stt] has no prices: unknown, never guessed
    turn_rows = await h.kernel.agent.meter.ledger.entries(UsageFilter(purpose="turn"))
    assert len(turn_rows) == 1


async def test_no_reported_usage_writes_no_row(bot: Factory, openai_sim: OpenAISim) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription("hello there")
    h.model.enqueue(text_reply("Hi."))

    await send_voice(h, tone("ogg"))

    assert await h.kernel.agent.meter.ledger.entries(UsageFilter(purpose="speech")) == []
