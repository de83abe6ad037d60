"""Owner messages that are not commands: text, photos, documents, voice (``voice.py``).
Each starts a turn shown by a TurnView running as a tracked task; a message that arrives
while a turn runs gets one busy notice per busy window."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from telegram import Message, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from kernel.agent.agent import UserInput
from kernel.core.errors import BusyError
from kernel.core.i18n import t
from kernel.core.turns import Turn
from kernel.telegram import media
from kernel.telegram.view import TurnView
from kernel.telegram.voice import TelegramVoice

if TYPE_CHECKING:
    from kernel.telegram.channel import TelegramChannel

log = logging.getLogger(__name__)


def conversation_of(chat_id: int) -> str:
    return f"telegram:{chat_id}"


class Inbound:
    def __init__(self, channel: TelegramChannel) -> None:
        self.channel = channel
        self.agent = channel.kernel.agent
        self._busy_notified: set[int] = set()
        self.views: dict[int, asyncio.Task[None]] = {}  # chat → the view showing its turn
        self.voice = TelegramVoice(channel.app.bot, channel.kernel.config)

    async def handle(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        if message is None:
            return
        chat_id = message.chat.id
        view = self.views.get(chat_id)
        if self.agent.is_busy(conversation_of(chat_id)) or (view and not view.done()):
            await self._busy(chat_id, message)
            return
        if message.text:
            self.start(chat_id, UserInput(message.text, channel="telegram"))
            return
        # Downloads and transcription take a while: they run beside the update queue
        # (so /cancel and /status stay instant) and count as busy until the turn starts.
        self.views[chat_id] = self.channel.spawn(
            self._prepare(chat_id, message), f"tg-read-{message.message_id}", for_owner=True
        )

    async def _prepare(self, chat_id: int, message: Message) -> None:
        spoken = bool(message.voice or message.audio)
        try:
            user_input = await self._read(message)
        except media.MediaRefused as exc:
            await message.reply_text(str(exc))
            return
        except TelegramError as exc:
            log.warning("download failed: %s", type(exc).__name__)
            await message.reply_text(t("tg.download_failed"))
            return
        if user_input is None:
            await message.reply_text(t("tg.unsupported_message"))
            return
        if self.channel.stopping:  # ready just as Kernel stops: no turn can run now
            await message.reply_text(t("tg.interrupted"))
            return
        self.start(chat_id, user_input, spoken=spoken)

    def start(self, chat_id: int, user_input: UserInput, *, spoken: bool = False) -> None:
        user_input.user_id = user_input.user_id or str(chat_id)  # recorded with a new session
        try:
            turn = self.agent.start_turn(conversation_of(chat_id), user_input)
        except BusyError:
            return
        self._busy_notified.discard(chat_id)
        view = TurnView(
            self.channel.app.bot,
            chat_id,
            outbox=self.channel.outbox,
            drafts=self.channel.cfg.stream,
            typing_interval=self.channel.cfg.typing_interval,
            interrupted=lambda: self.channel.stopping,
            board=self.channel.board,
            delegator=self.channel.kernel.delegator,
            conversation=conversation_of(chat_id),
            progress_interval=self.channel.cfg.progress_interval,
            needs_approval=self.channel.kernel.tools.needs_approval,
        )
        shown = self._show_and_speak(view, turn, chat_id) if spoken else view.show(turn)
        self.views[chat_id] = self.channel.spawn(shown, f"tg-{turn.id}")

    async def _show_and_speak(self, view: TurnView, turn: Turn, chat_id: int) -> None:
        """A reply to voice: the text as always, then the voice note (``[tts]``)."""
        await view.show(turn)
        if view.reply:
            await self.voice.reply(chat_id, view.reply)

    def cancel(self, chat_id: int) -> bool:
        """Stop the chat's turn, or the delivery of a reply that just completed."""
        if self.agent.cancel(conversation_of(chat_id)):
            return True
        view = self.views.get(chat_id)
        if view is not None and not view.done():
            view.cancel()
            return True
        return False

    async def _busy(self, chat_id: int, message: Message) -> None:
        if chat_id in self._busy_notified:
            return
        self._busy_notified.add(chat_id)
        await message.reply_text(t("turn.busy"))

    async def _read(self, message: Message) -> UserInput | None:
        caption = message.caption or ""
        if message.photo:
            largest = message.photo[-1]
            media.check_size(largest.file_size, photo=True)
            data = await self._download(largest.file_id)
            return UserInput(caption, images=[media.image_block(data)], channel="telegram")
        if message.document:
            return await self._document(message, caption)
        if message.voice or message.audio:  # refused with the fix when [stt] is not set
            return await self.voice.hear(message)
        return None

    async def _document(self, message: Message, caption: str) -> UserInput:
        doc = message.document
        assert doc is not None
        name = doc.file_name or "file"
        kind = media.classify_document(name, doc.mime_type)
        media.check_size(doc.file_size, photo=kind == "image")
        data = await self._download(doc.file_id)
        media.check_size(len(data), photo=kind == "image")
        folder = self.channel.kernel.config.data_dir / "downloads"
        path = media.download_path(folder, doc.file_unique_id, name)
        await asyncio.to_thread(_save, path, data)
        if kind == "image":
            image = media.image_block(data, doc.mime_type or "image/jpeg")
            return UserInput(caption, images=[image], channel="telegram")
        text_file = await asyncio.to_thread(media.read_text, name, data)
        return UserInput(text_file.as_input(caption), channel="telegram")

    async def _download(self, file_id: str) -> bytes:
        file = await self.channel.app.bot.get_file(file_id)
        return bytes(await file.download_as_bytearray())


def _save(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
