"""``/files`` (issue 23): the current session's artifacts as buttons; a press sends one.

The list is the session's artifacts, newest first (name, size, age, "removed" where
retention deleted the file), one inline button each whose data is ``file:<id>`` and
nothing more. A press is checked again from scratch: the artifact must exist, belong to
this chat (its current session, or a Telegram session of this chat), still be there
(:class:`kernel.workspace.artifacts.ArtifactFiles`: no link on the way, the recorded
size) and fit Telegram's 50 MB bot upload limit; each refusal is told in words.

The document is sent directly with ``sendDocument``, not through the durable outbox:
the outbox stores each message's body in the database and re-sends it after a crash,
which suits text but not a file of up to 50 MB that is already on disk (and may be gone
by the time a retry comes). A failed send is told, and a press again retries it.

The owner's downloads are recorded here too (:meth:`Files.downloaded`): at once when the
chat already has a session, else once the turn that creates it has run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any

from telegram import Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from kernel.core.errors import CodedError, KernelError
from kernel.core.i18n import t
from kernel.store.artifacts import FOLDERS, Artifact
from kernel.store.mailbox import InboxState
from kernel.telegram import media
from kernel.telegram.deps import Deps, conversation_of
from kernel.telegram.mailroom import Mailroom
from kernel.telegram.outbox import plain_items
from kernel.workspace.artifacts import ArtifactFiles, safe_name

log = logging.getLogger(__name__)
Context = ContextTypes.DEFAULT_TYPE

PREFIX = "file:"
PATTERN = r"^file:\d{1,18}$"
MAX_UPLOAD = 50 * 1024 * 1024  # Telegram's limit for files a bot sends
LISTED = 20  # buttons one /files shows
LABEL = 60  # characters of a button's label
PHOTO = "photo.jpg"  # a photo's name (Telegram gives none)


class Files:
    def __init__(self, deps: Deps, mailroom: Mailroom) -> None:
        self.deps = deps
        self.mailroom = mailroom
        self.services = deps.services  # the agent, the artifacts, the store, the config
        # chat → downloads waiting for the session their turn creates
        self._pending: dict[int, list[tuple[Path, str]]] = {}

    # ----- /files ----------------------------------------------------------------------

    async def command(self, update: Update, context: Context) -> None:
        assert update.effective_chat is not None
        chat = update.effective_chat.id
        row = self.mailroom.row_id(update)
        settle: tuple[int, InboxState] | None = None if row is None else (row, "answered")
        session = self.services.agent.sessions.current_session(conversation_of(chat))
        found = await self.services.artifacts.list(session, LISTED + 1) if session else []
        if not found:
            await self.deps.outbox.put(chat, plain_items(t("files.none")), settle=settle)
            return
        now = time.time()
        buttons = [
            [{"text": label(a, now), "callback_data": f"{PREFIX}{a.id}"}] for a in found[:LISTED]
        ]
        text = t("files.header")
        if len(found) > LISTED:
            text += "\n" + t("files.more", n=LISTED)
        markup = {"inline_keyboard": buttons}
        await self.deps.outbox.put(chat, plain_items(text, markup=markup), settle=settle)

    # ----- a press ---------------------------------------------------------------------

    async def on_press(self, update: Update, context: Context) -> None:
        query = update.callback_query
        assert query is not None and query.data is not None
        chat = query.message.chat.id if query.message is not None else self.deps.owner
        artifact_id = int(query.data.removeprefix(PREFIX))
        artifact, refusal = await self._check(chat, artifact_id)
        toast = refusal or t("files.sending", name=artifact.name if artifact else "")
        try:
            await query.answer(_utf16_cut(toast, 190))
        except TelegramError as exc:  # the toast is a courtesy
            log.info("answering a press failed: %s", type(exc).__name__)
        if refusal is not None or artifact is None:
            await self.deps.outbox.put(chat, plain_items(refusal or t("files.unknown")))
            return
        self.deps.life.spawn(self._send(chat, artifact), f"tg-file-{artifact.id}", for_owner=True)

    async def _check(self, chat: int, artifact_id: int) -> tuple[Artifact | None, str | None]:
        """The artifact, or why it is not sent (None: send it)."""
        artifact = await self.services.artifacts.get(artifact_id)
        if artifact is None:
            return None, t("files.unknown")
        if not await self._ours(chat, artifact):
            return None, t("files.foreign")
        if artifact.removed:
            return artifact, self._removed(artifact)
        if artifact.size > MAX_UPLOAD:
            return artifact, self._too_big(artifact)
        return artifact, None

    async def _ours(self, chat: int, artifact: Artifact) -> bool:
        session = artifact.session_id
        if session is None:
            return False
        if session == self.services.agent.sessions.current_session(conversation_of(chat)):
            return True
        row = await self.services.store.get_session(session)
        return row is not None and row.channel == "telegram" and row.user_id == str(chat)

    async def _send(self, chat: int, artifact: Artifact) -> None:
        files = ArtifactFiles(
            self.services.config.data_dir, self.services.config.general.retention_days
        )
        try:
            opened = await files.open(artifact)
        except CodedError as exc:
            if exc.code == "artifact_removed":
                await self.services.artifacts.mark_removed([artifact.path])
            await self.deps.outbox.put(chat, plain_items(str(exc)))
            return
        try:
            data = b"".join([chunk async for chunk in opened.chunks()])
        finally:
            opened.close()
        name = safe_name(artifact.name) or f"artifact-{artifact.id}"
        try:
            await self.deps.bot.send_document(chat, document=data, filename=name)
        except TelegramError as exc:
            log.warning("sending an artifact failed: %s", type(exc).__name__)
            text = t("files.send_failed", name=name, error=type(exc).__name__, id=artifact.id)
            await self.deps.outbox.put(chat, plain_items(text))

    def _removed(self, artifact: Artifact) -> str:
        days = self.services.config.general.retention_days
        return t("art.removed", id=artifact.id, name=artifact.name, days=days)

    @staticmethod
    def _too_big(artifact: Artifact) -> str:
        size = f"{artifact.size / 1024 / 1024:.1f}"
        return t("files.too_big", name=artifact.name, size=size, id=artifact.id)

    # ----- the owner's downloads -------------------------------------------------------

    async def keep(self, chat: int, unique_id: str, data: bytes, name: str = PHOTO) -> None:
        """Save a photo or voice note the owner sent in ``downloads`` and record it (the
        model gets them from memory; the file is what ``/files`` sends back)."""
        folder = self.services.config.data_dir / FOLDERS["download"]
        path = media.download_path(folder, unique_id, name)
        try:
            await asyncio.to_thread(_save, path, data)
        except OSError as exc:  # the turn goes on: the model has what was sent
            log.warning("saving a download failed: %s", type(exc).__name__)
            return
        await self.downloaded(chat, path, name)

    async def downloaded(self, chat: int, path: Path, name: str) -> None:
        """Record a file the owner sent, saved at ``path``: now when the chat has a
        session, else after the turn that makes one (:meth:`after`)."""
        session = self.services.agent.sessions.current_session(conversation_of(chat))
        if session is None:
            self._pending.setdefault(chat, []).append((path, name))
            return
        await self._record(session, path, name)

    async def after(self, shown: Coroutine[Any, Any, None], chat: int) -> None:
        """Show the turn, then record the downloads that waited for its session."""
        try:
            await shown
        finally:
            waiting = self._pending.pop(chat, [])
            session = self.services.agent.sessions.current_session(conversation_of(chat))
            for path, name in waiting:
                await self._record(session, path, name)

    async def _record(self, session: int | None, path: Path, name: str) -> None:
        try:
            await self.services.artifacts.save(
                self.services.config.data_dir,
                path,
                session_id=session,
                kind="download",
                name=name,
                actor="owner",
            )
        except KernelError as exc:  # save() never raises; kept for a changed store
            log.warning("recording a download failed: %s", type(exc).__name__)


def _save(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def label(artifact: Artifact, now: float) -> str:
    """A button's words: the name, its size and age, or that it was removed."""
    name = safe_name(artifact.name) or f"#{artifact.id}"
    if artifact.removed:
        tail = t("files.removed")
        icon = "🗑"
    else:
        tail = f"{human_size(artifact.size)} · {age(artifact.created_at, now)}"
        icon = "📄"
    room = LABEL - len(tail) - 5
    if len(name) > room:
        name = name[: max(room - 1, 8)] + "…"
    return f"{icon} {name} · {tail}"


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def age(created_at: str, now: float) -> str:
    try:
        seconds = max(0.0, now - datetime.fromisoformat(created_at).timestamp())
    except ValueError:
        return "?"
    if seconds < 3600:
        return t("files.age_minutes", n=int(seconds // 60))
    if seconds < 86400:
        return t("files.age_hours", n=int(seconds // 3600))
    return t("files.age_days", n=int(seconds // 86400))


def _utf16_cut(text: str, units: int) -> str:
    """``text`` within ``units`` UTF-16 code units (Telegram's measure of a toast)."""
    out: list[str] = []
    used = 0
    for ch in text:
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > units:
            break
        out.append(ch)
    return "".join(out)
