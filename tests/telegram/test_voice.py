"""Voice end to end: a real OGG/Opus voice note → the Bot API simulator's getFile and
download → the OpenAI simulator's transcription endpoint (real openai SDK) → the model
sees ``[voice: …]`` → the reply as text, then as a voice note made by the speech endpoint
and a real ffmpeg; and every way that can fail."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.sim.context import context_index, owner_texts
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Stall, Text, text_reply
from tests.sim.telegram_sim import BotCall
from tests.telegram.conftest import CONV, BotHarness, Factory
from tests.voice.audio import assert_ogg_opus, ffmpeg_exe, tone

STT_KEY = "sk-stt-SECRET-0123456789abcdef"
TTS_KEY = "sk-tts-SECRET-0123456789abcdef"


def voice_config(sim: OpenAISim, *, tts: str = "", stt: bool = True) -> str:
    text = ""
    if stt:
        text += (
            f'\n[stt]\napi_base = "{sim.base_url}"\napi_key = "{STT_KEY}"\nmodel = "whisper-sim"\n'
        )
    if tts:
        text += f"\n[tts]\n{tts}\n"
    return text


def openai_tts(sim: OpenAISim, ffmpeg: str | None = None) -> str:
    return (
        f'type = "openai"\napi_base = "{sim.base_url}"\napi_key = "{TTS_KEY}"\n'
        f'model = "tts-sim"\nvoice = "nova"\nffmpeg = "{ffmpeg or ffmpeg_exe()}"\n'
        "max_chars = 60"
    )


async def send_voice(h: BotHarness, audio: bytes, **kw: object) -> None:
    """The owner sends a voice note; wait until everything it causes is shown."""
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_voice(audio, **kw)  # type: ignore[arg-type]
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before, timeout=30)
    await h.settle()


async def stored_texts(h: BotHarness) -> list[str]:
    session = h.kernel.agent.sessions.current_session(CONV)
    return [m.text for m in await h.kernel.store.load_messages(session)] if session else []


def voice_calls(h: BotHarness) -> list[BotCall]:
    return [c for c in h.tg.calls_to("sendVoice") if c.ok]


def tts_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "text to speech failed" in r.getMessage()
    ]


def model_input(h: BotHarness) -> str:
    """The turn's message as the model read it: the transcript (a block of Kernel's
    own), then the caption, one per line."""
    assert context_index(h.model.requests[-1]) == len(h.model.requests[-1].body["messages"]) - 1
    return "\n".join(owner_texts(h.model.requests[-1].body["messages"][-1]))


async def test_voice_round_trip(
    bot: Factory, openai_sim: OpenAISim, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    h = await bot(extra=voice_config(openai_sim, tts=openai_tts(openai_sim)))
    openai_sim.enqueue_transcription("明天 上海 天气 怎么样")
    openai_sim.speech_audio = tone("mp3", seconds=1.5)
    reply = "**明天**上海多云，最高 20 度。\n\n```\nforecast --city sh\n```\n" + "详情如下。" * 30
    h.model.enqueue(text_reply(reply))
    voice = tone("ogg")

    await send_voice(h, voice, caption="简短点")

    # STT got the very bytes the owner recorded, as an .ogg upload.
    assert openai_sim.audio_uploads == [voice]
    stt_request = next(r for r in openai_sim.requests if r.path.endswith("/transcriptions"))
    assert stt_request.form["file"]["filename"] == "voice.ogg"
    assert stt_request.form["model"] == "whisper-sim"
    assert stt_request.headers["Authorization"] == f"Bearer {STT_KEY}"
    # The model got the transcript in the seed's format, with the caption after it.
    assert model_input(h) == "[voice: 明天 上海 天气 怎么样]\n简短点"
    # The text reply, in full, then the voice note.
    assert h.texts()[-2].startswith("明天上海多云，最高 20 度。")
    assert h.texts()[-2].endswith("详情如下。")
    assert [m.kind for m in h.bot_messages()][-2:] == ["text", "voice"]
    [call] = voice_calls(h)
    assert_ogg_opus(call.files["voice"], tmp_path)
    assert call.params["duration"] == 2  # 1.5 s of speech, rounded up
    # What was spoken: prose only, and only its beginning.
    speech = next(r for r in openai_sim.requests if r.path.endswith("/speech")).body
    assert speech["model"] == "tts-sim" and speech["voice"] == "nova"
    assert speech["input"].startswith("明天上海多云，最高 20 度。")
    assert "forecast" not in speech["input"] and "**" not in speech["input"]
    assert len(speech["input"]) <= 61
    # History keeps the marker, not the transcript.
    assert await stored_texts(h) == ["[voice processed]\n简短点", reply]
    assert tts_warnings(caplog) == []
    assert "上海" not in caplog.text  # no message text in the log


async def test_text_messages_get_no_voice(bot: Factory, openai_sim: OpenAISim) -> None:
    h = await bot(extra=voice_config(openai_sim, tts=openai_tts(openai_sim)))
    h.model.enqueue(text_reply("plain answer"))
    assert await h.converse("typed question") == "plain answer"
    assert h.tg.calls_to("sendVoice") == []
    assert not any(r.path.endswith("/speech") for r in openai_sim.requests)


async def test_without_tts_a_voice_question_gets_a_text_answer(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription("what time is it")
    h.model.enqueue(text_reply("Nine."))
    await send_voice(h, tone("ogg"))
    assert model_input(h) == "[voice: what time is it]"
    assert h.texts()[-1] == "Nine."
    assert h.tg.calls_to("sendVoice") == []


async def test_speech_endpoint_failure_means_text_and_one_warning(
    bot: Factory, openai_sim: OpenAISim, caplog: pytest.LogCaptureFixture
) -> None:
    h = await bot(extra=voice_config(openai_sim, tts=openai_tts(openai_sim)))
    openai_sim.speech_audio = Error(500, "server_error", "speech is down")
    openai_sim.enqueue_transcription("first", "second")
    h.model.enqueue(text_reply("Answer one."), text_reply("Answer two."))
    await send_voice(h, tone("ogg"))
    await send_voice(h, tone("ogg"))
    assert h.texts() == ["🎤 first", "Answer one.", "🎤 second", "Answer two."]
    assert h.tg.calls_to("sendVoice") == []
    assert sum(r.path.endswith("/speech") for r in openai_sim.requests) == 2
    [warning] = tts_warnings(caplog)
    assert "http_500" in warning and TTS_KEY not in caplog.text


async def test_missing_ffmpeg_means_text_and_one_warning(
    bot: Factory, openai_sim: OpenAISim, caplog: pytest.LogCaptureFixture
) -> None:
    tts = openai_tts(openai_sim, ffmpeg="/nonexistent")
    h = await bot(extra=voice_config(openai_sim, tts=tts))
    openai_sim.enqueue_transcription("first", "second")
    h.model.enqueue(text_reply("Answer one."), text_reply("Answer two."))
    await send_voice(h, tone("ogg"))
    await send_voice(h, tone("ogg"))
    assert h.texts() == ["🎤 first", "Answer one.", "🎤 second", "Answer two."]
    assert h.tg.calls_to("sendVoice") == []
    assert not any(r.path.endswith("/speech") for r in openai_sim.requests)
    [warning] = tts_warnings(caplog)
    assert "ffmpeg_missing" in warning and "[tts] ffmpeg = /nonexistent" in warning


async def test_voice_without_stt_is_refused_naming_the_section(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=voice_config(openai_sim, stt=False, tts=openai_tts(openai_sim)))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_voice(tone("ogg"))
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    assert "speech-to-text is not configured: add [stt] to config.toml" in h.texts()[-1]
    assert "KERNEL_STT_API_KEY" in h.texts()[-1]
    assert h.model.requests == [] and openai_sim.requests == []
    assert h.tg.calls_to("getFile") == []


async def test_stt_failure_is_told_and_nothing_reaches_the_model(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription(Error(500, "server_error", f"quota for {STT_KEY}"))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_voice(tone("ogg"))
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    refusal = h.texts()[-1]
    assert refusal.startswith("Speech-to-text failed (500 server_error: quota for")
    assert "send it again later" in refusal
    assert STT_KEY not in refusal and STT_KEY[-12:] not in refusal
    assert h.model.requests == [] and await stored_texts(h) == []
    # Resending works once the service is back.
    openai_sim.enqueue_transcription("again")
    h.model.enqueue(text_reply("Got it."))
    await send_voice(h, tone("ogg"))
    assert h.texts()[-1] == "Got it."
    assert await stored_texts(h) == ["[voice processed]", "Got it."]


async def test_silence_is_not_sent_to_the_model(bot: Factory, openai_sim: OpenAISim) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription("   ")
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_voice(tone("ogg"))
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    assert "No words were recognised" in h.texts()[-1]
    assert h.model.requests == []


async def test_oversized_voice_is_refused_before_download(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=voice_config(openai_sim))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_voice(tone("ogg"), file_size=25 * 1024 * 1024)
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    assert "too big (25.0 MB; limit 20 MB)" in h.texts()[-1]
    assert h.tg.calls_to("getFile") == [] and openai_sim.requests == []


async def test_audio_files_are_transcribed_under_their_own_name(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription("meeting notes")
    h.model.enqueue(text_reply("Summary."))
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_audio(tone("mp3"), "memo.mp3")
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    await h.settle()
    assert openai_sim.audio_uploads == [tone("mp3")]
    assert openai_sim.requests[-1].form["file"]["filename"] == "memo.mp3"
    assert model_input(h) == "[voice: meeting notes]"


async def test_voice_arriving_while_busy_gets_the_busy_notice(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=voice_config(openai_sim))
    h.model.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=2))
    h.tg.inject_text("first")
    await h.under_way()
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_voice(tone("ogg"))
    await h.tg.wait_until(lambda: len(h.tg.calls_to("sendMessage")) > before)
    assert "Still working on the previous message" in h.texts()[-1]
    assert openai_sim.requests == []
    assert "Cancelled" in await h.ask("/cancel")


async def test_cancel_while_transcribing_is_not_held_up(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=voice_config(openai_sim))
    openai_sim.enqueue_transcription(Stall(30))
    h.tg.inject_voice(tone("ogg"))
    await openai_sim.wait_for_requests(1)
    assert "Cancelled" in await h.ask("/cancel")
    assert h.model.requests == []
    h.model.enqueue(text_reply("Fresh start."))
    assert await h.converse("typed instead") == "Fresh start."
