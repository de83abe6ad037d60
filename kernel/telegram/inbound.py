"""Owner messages that are not commands: text, photos, documents, voice (``voice.py``).
Each starts a turn shown by a TurnView running as a tracked task; a message that arrives
while a turn runs (or a file is read) goes to the busy desk (``busy.py``): held for the
owner's choice, the answer to a question the turn waits on, or run once a stopped turn
has wound down.

Each message has its inbox row (``mailroom.py``), open until the turn ends: the view
settles it with the reply; a refusal before any turn (a failed download, an
unsupported kind) settles it with its notice, queued through the outbox; /cancel while
the file is read settles it ``cancelled``. When the store refuses the outcome, the row
stays open and the next start tells the owner."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from telegram import Message, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from kernel.agent.agent import UserInput
from kernel.commands.listing import named, session_name
from kernel.core.errors import BusyError, SessionError
from kernel.core.events import Completed, ErrorEvent
from kernel.core.i18n import t
from kernel.core.turns import Turn
from kernel.telegram import media
from kernel.telegram.busy import BusyDesk
from kernel.telegram.deps import Deps, conversation_of
from kernel.telegram.download import download
from kernel.telegram.files import Files
from kernel.telegram.mailroom import Mailroom
from kernel.telegram.view import Chat, Looks, TurnView
from kernel.telegram.voice import TelegramVoice

log = logging.getLogger(__name__)
VOICE_AFTER_TEXT = 30.0
HINT_LOOKBACK = 20  # recent sessions looked through for one of Telegram's

__all__ = ["Inbound", "conversation_of"]


class Inbound:
    def __init__(self, deps: Deps, mailroom: Mailroom, files: Files) -> None:
        self.deps = deps
        self.mailroom = mailroom
        self.files = files
        self.agent = deps.agent
        self.desk = BusyDesk(deps, mailroom, self._run_held)
        self.views = deps.views  # chat → the view showing its turn
        # Chats whose first turn since this start is still to come (the restart hint).
        self._fresh: set[int] = {deps.owner}
        self.voice = TelegramVoice(deps.bot, deps.config, deps.agent.meter)
        cfg = deps.cfg
        self._looks = Looks(  # how every turn of the chat is shown
            drafts=cfg.stream,
            typing_interval=cfg.typing_interval,
            progress_interval=cfg.progress_interval,
            interrupted=lambda: deps.life.stopping,
            board=deps.board,
            delegator=deps.services.delegator,
            needs_approval=deps.services.needs_approval,
        )

    def busy(self, chat_id: int) -> bool:
        return self.views.busy(chat_id)

    async def _run_held(self, chat_id: int, message: Message, row: int | None) -> None:
        """A message that waited for a stopped turn to wind down (``busy.py``) runs."""
        if message.text:
            await self.start(chat_id, UserInput(message.text, channel="telegram"), row=row)
        else:
            await self.prepare(chat_id, message, row)

    async def handle(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        if message is None:
            return
        chat_id = message.chat.id
        row = self.mailroom.row_id(update)
        if self.busy(chat_id):
            await self.desk.arrived(chat_id, message, row)
            return
        # Handled late (it waited while Kernel was down, or 🔁 runs it again): the
        # answer quotes it, and it runs in the session it belonged to.
        late = self.mailroom.late(update)
        quote = message.message_id if late is not None else None
        moved = None
        if late is not None and late.session_id is not None:
            moved = await self._return_to(chat_id, late.session_id)
        if message.text:
            user_input = UserInput(message.text, channel="telegram")
            await self.start(chat_id, user_input, row=row, reply_to=quote, footer=moved)
            return
        # Downloads and transcription take a while: they run beside the update queue
        # (so /cancel and /status stay instant) and count as busy until the turn starts.
        self.views[chat_id] = self.deps.life.spawn(
            self.prepare(chat_id, message, row, quote, moved),
            f"tg-read-{message.message_id}",
            for_owner=True,
        )

    async def _return_to(self, chat_id: int, session_id: int) -> str | None:
        """Back to the session a message ran in before (a restart began a fresh one, or
        the owner moved on); a session deleted meanwhile leaves the chat where it is.
        Returns the answer's footer that says the chat moved, None when it did not."""
        conversation = conversation_of(chat_id)
        if self.agent.sessions.current_session(conversation) == session_id:
            return None
        try:
            row = await self.agent.sessions.resume(conversation, session_id)
        except (SessionError, BusyError):
            log.info("the session of a message run again is gone; it runs in the current one")
            return None
        self._fresh.discard(chat_id)  # an old session: no new-conversation hint
        try:
            first = await self.agent.store.first_words([row.id])
        except Exception as exc:  # the name only: the session's number still says it
            log.warning("reading a session's first words failed: %s", type(exc).__name__)
            first = {}
        name = named(row.id, session_name(row, first.get(row.id, "")))
        return t("tg.moved_session", session=name)

    def chose_session(self, chat_id: int) -> None:
        """The owner ran a session command (/new, /resume, a deletion, a history or
        picker press): they chose where the chat is, so no restart hint follows."""
        self._fresh.discard(chat_id)

    async def prepare(
        self,
        chat_id: int,
        message: Message,
        row: int | None,
        quote: int | None = None,
        footer: str | None = None,
    ) -> None:
        mailroom = self.mailroom
        spoken = bool(message.voice or message.audio)
        try:
            user_input = await self._read(message)
        except asyncio.CancelledError:  # /cancel during the download: the owner's choice
            if row is not None and not self.deps.life.stopping:
                await asyncio.shield(mailroom.close(row, "cancelled"))
            raise
        except media.MediaRefused as exc:
            await mailroom.tell(chat_id, str(exc), row)
            return
        except TelegramError as exc:
            log.warning("download failed: %s", type(exc).__name__)
            await mailroom.tell(chat_id, t("tg.download_failed"), row, again=True)
            return
        except Exception:  # the owner is told by the channel (an internal error)
            if row is not None:
                await mailroom.close(row, "failed")
            raise
        if user_input is None:
            await mailroom.tell(chat_id, t("tg.unsupported_message"), row)
            return
        if self.deps.life.stopping:  # ready just as Kernel stops: no turn can run now
            await mailroom.tell(chat_id, t("tg.interrupted"), row, "interrupted", again=True)
            return
        await self.start(chat_id, user_input, spoken=spoken, row=row, reply_to=quote, footer=footer)

    async def start(
        self,
        chat_id: int,
        user_input: UserInput,
        *,
        spoken: bool = False,
        row: int | None = None,
        reply_to: int | None = None,
        footer: str | None = None,
    ) -> None:
        """Start the message's turn and show it; ``footer``: a line under its answer
        (the session it moved to); else the restart hint when it is due."""
        user_input.user_id = user_input.user_id or str(chat_id)  # recorded with a new session
        conversation = conversation_of(chat_id)
        # The first message after a start that opens a new session: seed 004's fresh
        # conversation, which the answer says once (with /resume to go back).
        hint = chat_id in self._fresh and self.agent.sessions.current_session(conversation) is None
        hint = hint and await self._had_sessions()  # the very first one: nothing to go back to
        try:
            turn = self.agent.start_turn(conversation, user_input)
        except BusyError:
            await self.desk.hold(chat_id, row)
            return
        self._fresh.discard(chat_id)
        footer = footer or (t("tg.restart_hint") if hint else None)
        self.show(chat_id, turn, spoken=spoken, row=row, reply_to=reply_to, footer=footer)

    async def _had_sessions(self) -> bool:
        """Whether the owner talked in Telegram before (a session to go back to)."""
        try:
            rows = await self.agent.sessions.list_sessions(limit=HINT_LOOKBACK)
        except Exception as exc:  # a hint only: without it the answer still comes
            log.warning("listing sessions failed: %s", type(exc).__name__)
            return False
        return any(row.channel == "telegram" for row in rows)

    def show(
        self,
        chat_id: int,
        turn: Turn,
        *,
        spoken: bool = False,
        row: int | None = None,
        reply_to: int | None = None,
        footer: str | None = None,
    ) -> None:
        """Show a started turn in the chat (a message's, or /retry's), settling ``row``;
        ``reply_to``: the owner's message its answer quotes; ``footer``: a line under it."""
        self.desk.window_began(chat_id)
        if row is not None:
            self.deps.life.spawn(self._note_session(turn, row), f"tg-session-{turn.id}")
        view = TurnView(
            Chat(self.deps.bot, self.deps.outbox, chat_id, conversation_of(chat_id)),
            self._looks,
            inbox_id=row,
            reply_to=reply_to,
            footer=footer,
        )
        shown = self._show_and_speak(view, turn, chat_id) if spoken else view.show(turn)
        shown = self.files.after(shown, chat_id)  # downloads waiting for a session
        self.views[chat_id] = self.deps.life.spawn(
            self._settled(shown, view, turn, row), f"tg-{turn.id}"
        )

    async def _note_session(self, turn: Turn, row: int) -> None:
        """Record the session the message's turn runs in, once the turn knows it: 🔁
        after a restart runs the message there again."""
        placed = asyncio.ensure_future(turn.placed.wait())
        try:
            ended = {turn.task} if turn.task is not None else set()
            await asyncio.wait({placed, *ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            placed.cancel()
        if turn.session_id is None:
            return
        try:
            await self.mailroom.mailbox.set_session(row, turn.session_id)
        except Exception as exc:  # 🔁 then runs in the chat's current session
            log.warning("recording a message's session failed: %s", type(exc).__name__)

    async def _settled(
        self, shown: Coroutine[Any, Any, None], view: TurnView, turn: Turn, row: int | None
    ) -> None:
        """The view settles the row with what it queued; whatever it left open is closed
        here by how the turn ended. Cut off by a stop, or its outcome refused by the
        store, the row stays open: the next start tells the owner, with 🔁."""
        if row is None:
            await shown
            return
        mailroom = self.mailroom
        try:
            await shown
        except asyncio.CancelledError:
            if not self.deps.life.stopping and not view.unqueued:
                await asyncio.shield(mailroom.close(row, "cancelled"))
            raise
        except Exception:
            if not view.unqueued:
                await mailroom.close(row, "failed")
            raise
        final = turn.final
        if isinstance(final, ErrorEvent):
            await mailroom.close(row, "failed")
        elif isinstance(final, Completed) and final.cancelled:
            await mailroom.close(row, "interrupted" if self.deps.life.stopping else "cancelled")
        else:
            await mailroom.close(row, "answered")

    async def _show_and_speak(self, view: TurnView, turn: Turn, chat_id: int) -> None:
        """A reply to voice: the text as always, then the voice note (``[tts]``) from a
        task of its own, so the chat is free for the next message meanwhile."""
        await view.show(turn)
        if view.reply:
            self.deps.life.spawn(self._speak(view, chat_id, view.reply), f"tg-voice-{turn.id}")

    async def _speak(self, view: TurnView, chat_id: int, reply: str) -> None:
        """Once the text is delivered (the outbox may hold it behind earlier messages,
        or through an outage), or after ``VOICE_AFTER_TEXT`` seconds at most: the voice
        is a courtesy, the text the answer."""
        if view.delivery is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(view.delivery.wait(), VOICE_AFTER_TEXT)
        await self.voice.reply(chat_id, reply)

    def cancel(self, chat_id: int) -> bool:
        """Stop the chat's turn, or the delivery of a reply that just completed, and the
        stored messages queued to run after it."""
        queued = chat_id == self.deps.owner and self.mailroom.cancel_runs()
        stopped = self.agent.sessions.cancel(conversation_of(chat_id))
        if stopped:  # it winds down: the next message runs after it, not "busy"
            self.desk.stopped(chat_id)
        if stopped or queued:
            return True
        view = self.views.get(chat_id)
        if view is not None and not view.done():
            view.cancel()
            self.desk.stopped(chat_id)
            return True
        return False

    async def _read(self, message: Message) -> UserInput | None:
        caption = message.caption or ""
        if message.photo:
            largest = message.photo[-1]
            media.check_size(largest.file_size, "photo")
            data = await download(self.deps.bot, largest.file_id, "photo")
            await self.files.keep(message.chat.id, largest.file_unique_id, data)
            return UserInput(caption, images=[media.image_block(data)], channel="telegram")
        if message.document:
            return await self._document(message, caption)
        if message.voice or message.audio:  # refused with the fix when [stt] is not set
            return await self.voice.hear(message, keep=self.files.keep)
        return None

    async def _document(self, message: Message, caption: str) -> UserInput:
        doc = message.document
        assert doc is not None
        name = doc.file_name or "file"
        kind = media.classify_document(name, doc.mime_type)
        size_kind: media.Kind = "photo" if kind == "image" else "file"
        media.check_size(doc.file_size, size_kind)
        data = await download(self.deps.bot, doc.file_id, size_kind)
        folder = self.deps.config.data_dir / "downloads"
        path = media.download_path(folder, doc.file_unique_id, name)
        await asyncio.to_thread(_save, path, data)
        await self.files.downloaded(message.chat.id, path, name)  # an artifact
        if kind == "image":
            image = media.image_block(data, doc.mime_type or "image/jpeg")
            return UserInput(caption, images=[image], channel="telegram")
        text_file = await asyncio.to_thread(media.read_text, name, data)
        return UserInput(caption, attached=(text_file.attachment(),), channel="telegram")


def _save(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
