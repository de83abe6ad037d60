"""Owner messages that are not commands: text, photos, documents, voice (``voice.py``).
Each starts a turn shown by a TurnView running as a tracked task; a message that arrives
while a turn runs (or a file is read) goes to the busy desk (``busy.py``): held for the
owner's choice, the answer to a question the turn waits on, or run once a stopped turn
has wound down.

Each message has its inbox row, which the mailroom (``mailroom.py``) owns: it hands the
message here and applies the :data:`~kernel.telegram.outcome.Outcome` returned (never
the other way round). The view settles the row with the reply; a refusal before any
turn (a failed download, an unsupported kind) ends in its notice; /cancel while the file
is read, ``cancelled``. When the store refuses the outcome, the row stays open and the
next start tells the owner."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from telegram import Message
from telegram.error import TelegramError

from kernel.agent.agent import UserInput
from kernel.commands.listing import named, session_name
from kernel.core.errors import BusyError, SessionError
from kernel.core.events import Completed, ErrorEvent
from kernel.core.i18n import t
from kernel.core.turns import Turn
from kernel.store.mailbox import InboxRow
from kernel.telegram import media
from kernel.telegram.busy import BusyDesk
from kernel.telegram.deps import Deps, conversation_of
from kernel.telegram.download import download
from kernel.telegram.files import Files
from kernel.telegram.outcome import ANSWERED, Close, Hold, Keep, Later, Outcome, cut, told
from kernel.telegram.topic_desk import TopicDesk
from kernel.telegram.topics import is_topic
from kernel.telegram.view import Chat, Looks, TurnView
from kernel.telegram.voice import TelegramVoice

log = logging.getLogger(__name__)
VOICE_AFTER_TEXT = 30.0
HINT_LOOKBACK = 20  # recent sessions looked through for one of Telegram's

__all__ = ["Inbound", "conversation_of"]


class Inbound:
    def __init__(self, deps: Deps, files: Files, desk: BusyDesk, topics: TopicDesk) -> None:
        self.deps = deps
        self.topics = topics  # the owner's topics: the cap across them, their sessions
        self.files = files
        self.agent = deps.agent
        self.desk = desk
        self.views = deps.views  # chat → the view showing its turn
        # Chats whose first turn since this start is still to come (the restart hint).
        self._fresh: set[int] = {deps.owner}
        # Topics whose session was found again (or chosen) since this start.
        self._placed: set[int] = set()
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

    async def _run_held(self, chat_id: int, message: Message, row: int | None) -> Outcome:
        """A message that waited for a stopped turn to wind down (``busy.py``) runs."""
        if message.text:
            return await self.start(chat_id, UserInput(message.text, channel="telegram"), row=row)
        return await self.prepare(chat_id, message, row)

    async def handle(self, message: Message, row: int | None, late: InboxRow | None) -> Outcome:
        """The owner's message (``row``: its inbox row; ``late``: its stored row when it
        is handled late), handed in by the mailroom, which applies the outcome."""
        chat_id = message.chat.id
        if self.busy(chat_id):
            return await self.desk.arrived(chat_id, message, row, self._run_held)
        tasks = self.views.tasks
        others = len(tasks) > (chat_id in tasks)  # other lanes (topics) had turns
        if others and (over := self.topics.over_cap(chat_id)):
            return told(over)  # turns run in as many topics as they may
        # Handled late (it waited while Kernel was down, or 🔁 runs it again): the
        # answer quotes it, and it runs in the session it belonged to.
        quote = message.message_id if late is not None else None
        moved = None
        if late is not None and late.session_id is not None:
            moved = await self._return_to(chat_id, late.session_id)
        if message.text:
            user_input = UserInput(message.text, channel="telegram")
            return await self.start(chat_id, user_input, row=row, reply_to=quote, footer=moved)
        # Downloads and transcription take a while: they run beside the update queue
        # (so /cancel and /status stay instant) and count as busy until the turn starts.
        return Later(
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
        self._placed.add(chat_id)

    async def _back_in_topic(self, lane: int) -> None:
        """A topic's first message since this start goes on in the topic's session (a
        topic is a session: a restart does not start it afresh)."""
        self._placed.add(lane)
        conversation = conversation_of(lane)
        if self.agent.sessions.current_session(conversation) is not None:
            return
        session_id = await self.topics.session_of(lane)
        if session_id is not None:
            with contextlib.suppress(SessionError, BusyError):
                await self.agent.sessions.resume(conversation, session_id)

    async def prepare(
        self,
        chat_id: int,
        message: Message,
        row: int | None,
        quote: int | None = None,
        footer: str | None = None,
    ) -> Outcome:
        spoken = bool(message.voice or message.audio)
        try:
            user_input = await self._read(message)
        except asyncio.CancelledError as exc:  # /cancel during the download: the owner's
            return cut(exc, None if self.deps.life.stopping else "cancelled")
        except media.MediaRefused as exc:
            return told(str(exc))
        except TelegramError as exc:
            log.warning("download failed: %s", type(exc).__name__)
            return told(t("tg.download_failed"), again=True)
        except Exception as exc:  # the owner is told by the channel (an internal error)
            return cut(exc, "failed")
        if user_input is None:
            return told(t("tg.unsupported_message"))
        if self.deps.life.stopping:  # ready just as Kernel stops: no turn can run now
            return told(t("tg.interrupted"), "interrupted", again=True)
        return await self.start(
            chat_id, user_input, spoken=spoken, row=row, reply_to=quote, footer=footer
        )

    async def start(
        self,
        chat_id: int,
        user_input: UserInput,
        *,
        spoken: bool = False,
        row: int | None = None,
        reply_to: int | None = None,
        footer: str | None = None,
    ) -> Outcome:
        """Start the message's turn and show it; ``footer``: a line under its answer
        (the session it moved to); else the restart hint when it is due."""
        # recorded with a new session: the chat's, in a topic too (/history lists it)
        user_input.user_id = user_input.user_id or str(
            self.deps.owner if is_topic(chat_id) else chat_id
        )
        conversation = conversation_of(chat_id)
        if is_topic(chat_id) and chat_id not in self._placed:
            await self._back_in_topic(chat_id)
        # The first message after a start that opens a new session: seed 004's fresh
        # conversation, which the answer says once (with /resume to go back).
        hint = chat_id in self._fresh and self.agent.sessions.current_session(conversation) is None
        hint = hint and await self._had_sessions()  # the very first one: nothing to go back to
        try:
            turn = self.agent.start_turn(conversation, user_input)
        except BusyError:
            return Hold()
        self._fresh.discard(chat_id)
        footer = footer or (t("tg.restart_hint") if hint else None)
        return self.show(chat_id, turn, spoken=spoken, row=row, reply_to=reply_to, footer=footer)

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
    ) -> Later:
        """Show a started turn in the chat (a message's, or /retry's), whose view settles
        ``row``: the work the mailroom runs as the chat's busy task; ``reply_to``: the
        owner's message its answer quotes; ``footer``: a line under it."""
        self.desk.window_began(chat_id)
        view = TurnView(
            Chat(self.deps.bot, self.deps.outbox, chat_id, conversation_of(chat_id)),
            self._looks,
            inbox_id=row,
            reply_to=reply_to,
            footer=footer,
        )
        shown = self._show_and_speak(view, turn, chat_id) if spoken else view.show(turn)
        shown = self.files.after(shown, chat_id)  # downloads waiting for a session
        if is_topic(chat_id):  # the session keeps its topic (/resume, /history)
            shown = self._in_topic(shown, chat_id)
        return Later(self._settled(shown, view, turn), f"tg-{turn.id}", turn=turn)

    async def _in_topic(self, shown: Coroutine[Any, Any, None], lane: int) -> None:
        try:
            await shown
        finally:
            session = self.agent.sessions.current_session(conversation_of(lane))
            await self.topics.record(lane, session)

    async def _settled(
        self, shown: Coroutine[Any, Any, None], view: TurnView, turn: Turn
    ) -> Outcome:
        """The view settles the row with what it queued; whatever it left open is closed
        by how the turn ended. Cut off by a stop, or its outcome refused by the store,
        the row stays open: the next start tells the owner, with 🔁."""
        try:
            await shown
        except asyncio.CancelledError as exc:
            return cut(exc, None if self.deps.life.stopping or view.unqueued else "cancelled")
        except Exception as exc:
            return cut(exc, None if view.unqueued else "failed")
        if view.settled:  # closed with what the view queued: nothing left to write
            return Keep()
        final = turn.final
        if isinstance(final, ErrorEvent):
            return Close("failed")
        if isinstance(final, Completed) and final.cancelled:
            return Close("interrupted" if self.deps.life.stopping else "cancelled")
        return ANSWERED

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

    def cancel(self, chat_id: int, *, queued: bool = False) -> bool:
        """Stop the chat's turn, or the delivery of a reply that just completed
        (``queued``: stored messages queued to run after it were dropped already)."""
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
