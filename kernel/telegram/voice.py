"""Voice in Telegram (seed 004 Phase 6): a voice note (or audio file) is downloaded,
transcribed by ``[stt]`` and given to the agent as ``[语音: transcript]`` (history keeps
``[语音已处理]``); the reply to it comes as text first and then, when ``[tts]`` is
configured, as a voice note of its beginning.

Text first, always: it arrives the moment the model is done, it is the full answer
(formatted, searchable, copyable), and nothing about it depends on speech working. The
voice note follows a second or two later, so it carries no caption (that would repeat
the text just sent).

What was heard is shown at once (``[telegram] show_transcript``, on by default): a silent
reply to the voice note, "🎤 …", sent before the turn starts. Not quoted above the answer:
it comes while the model still works, so a mishearing shows (and can be /cancel'led)
before any answer; the answer stays the notifying message, its first words on the lock
screen rather than the owner's own; the reply thread ties it to the voice bubble it
transcribes; and a copied or retried answer carries no transcript."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import PurePath
from typing import TYPE_CHECKING

from telegram import Bot, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import TelegramError

from kernel.agent.agent import UserInput
from kernel.config import Config
from kernel.core.errors import SpeechError
from kernel.core.i18n import t
from kernel.spend import Meter
from kernel.telegram import media
from kernel.telegram.download import download
from kernel.telegram.split import LIMIT, split_plain

if TYPE_CHECKING:
    from kernel.voice.stt import Transcriber
    from kernel.voice.tts import Synthesizer

log = logging.getLogger(__name__)
Keep = Callable[[int, str, bytes, str], Awaitable[None]]  # chat, unique id, data, name

# Extensions transcription servers recognise, by the MIME type Telegram reports.
_EXTENSIONS = {
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/m4a": ".m4a",
    "audio/aac": ".m4a",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/flac": ".flac",
    "audio/x-flac": ".flac",
    "audio/webm": ".webm",
}


class TelegramVoice:
    def __init__(self, bot: Bot, config: Config, meter: Meter | None = None) -> None:
        self.bot = bot
        # kernel.voice loads only where [stt] or [tts] is configured (issue 37).
        self.stt: Transcriber | None = None
        self.tts: Synthesizer | None = None
        if config.stt:
            from kernel.voice.stt import Transcriber

            self.stt = Transcriber(config.stt, meter=meter, channel="telegram")
        if config.tts:
            from kernel.voice.tts import Synthesizer

            self.tts = Synthesizer(config.tts)
        self.show_transcript = config.telegram.show_transcript

    async def hear(self, message: Message, keep: Keep | None = None) -> UserInput:
        """The voice message as model input; MediaRefused (with the reason and the fix)
        when it cannot be: no ``[stt]``, too big, STT failed or heard nothing. ``keep``
        saves what was heard (its unique id, bytes and a file name): an artifact."""
        if self.stt is None:
            raise media.MediaRefused(t("tg.voice_no_stt"))
        audio = message.voice or message.audio
        assert audio is not None
        media.check_size(audio.file_size, "voice")
        with contextlib.suppress(TelegramError):
            await self.bot.send_chat_action(message.chat.id, ChatAction.TYPING)
        data = await download(self.bot, audio.file_id, "voice")
        mime = audio.mime_type or "audio/ogg"
        try:
            transcript = await self.stt.transcribe(data, _upload_name(message, mime), mime)
        except SpeechError as exc:
            log.warning("speech to text failed (%s)", exc.cause)
            raise media.MediaRefused(t("tg.stt_failed", detail=str(exc))) from None
        if not transcript:
            raise media.MediaRefused(t("tg.stt_empty"))
        if self.show_transcript:
            await self._show(message, transcript)
        if keep is not None:
            await keep(message.chat.id, audio.file_unique_id, data, _upload_name(message, mime))
        text = t("history.voice", text=transcript)  # the seed's format; slimming knows it
        return UserInput(message.caption or "", attached=(text,), channel="telegram")

    async def _show(self, message: Message, transcript: str) -> None:
        """What was heard, as a silent reply to the voice note. Best effort: the turn
        goes on without it."""
        chunks = split_plain(t("tg.voice_heard", text=transcript), LIMIT - 1)
        text = chunks[0] if len(chunks) == 1 else chunks[0].rstrip() + "…"
        quote = ReplyParameters(message.message_id, allow_sending_without_reply=True)
        try:
            await self.bot.send_message(
                message.chat.id, text, reply_parameters=quote, disable_notification=True
            )
        except TelegramError as exc:
            log.warning("showing the transcript failed: %s", type(exc).__name__)

    async def reply(self, chat_id: int, markdown: str) -> None:
        """Speak the beginning of a reply already delivered as text. Never raises for
        speech problems: the text is the reply, the voice note an extra."""
        if self.tts is None:
            return
        from kernel.voice.text import speakable

        text = speakable(markdown, self.tts.cfg.max_chars)
        if not text:
            return
        with contextlib.suppress(TelegramError):
            await self.bot.send_chat_action(chat_id, ChatAction.RECORD_VOICE)
        note = await self.tts.speak(text)
        if note is None:
            return
        try:
            await self.bot.send_voice(
                chat_id, note.ogg, duration=max(1, math.ceil(note.seconds)), filename="reply.ogg"
            )
        except TelegramError as exc:
            log.warning("sending the voice reply failed: %s", type(exc).__name__)

    async def aclose(self) -> None:
        if self.stt is not None:
            await self.stt.aclose()
        if self.tts is not None:
            await self.tts.aclose()


def _upload_name(message: Message, mime: str) -> str:
    """A file name whose extension names the format: servers decide by it."""
    if message.audio and message.audio.file_name and PurePath(message.audio.file_name).suffix:
        return PurePath(message.audio.file_name).name
    return "voice" + _EXTENSIONS.get(mime.split(";")[0].strip().lower(), ".ogg")
