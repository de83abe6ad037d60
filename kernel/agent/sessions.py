"""Conversations and their sessions: which session a channel's conversation talks in,
which turn it waits for, and the queue of callers waiting for it to be idle.

A conversation is a channel's name for a chat (``"telegram:42"``, ``"console:default"``)
or a session's own (``"session:<id>"``, for sessions opened by key: HTTP, QQ, cron). Two
conversations on one session share its turn: one waits while the other runs.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from kernel.core.errors import BusyError, ProtectedSessionError, SessionError
from kernel.core.i18n import t
from kernel.core.turns import Turn
from kernel.store.db import SessionRow, Store

SUBAGENT_CHANNEL = "agent"  # a sub-agent's run: a child session of its parent's
HIDDEN = (SUBAGENT_CHANNEL,)  # channels whose sessions a listing leaves out
SESSION_PREFIX = "session:"  # a conversation named by its session: "session:<id>"
TELEGRAM = "telegram"  # the channel whose chats list only their own sessions
RECENT_TURNS = 256


@dataclass(frozen=True, slots=True)
class SessionKey:
    """A session named in a channel's own terms: who (``user_id``) and which of their
    conversations (``external_id``, e.g. the sidecar's ``session_id``)."""

    channel: str
    user_id: str
    external_id: str


@dataclass(frozen=True, slots=True)
class Origin:
    """Where sessions were made: a channel and the chat (``user_id``) that made them;
    ``""`` also matches the rows made before sessions recorded their user (schema v4)."""

    channel: str
    user_id: str

    @property
    def users(self) -> tuple[str, str]:
        return (self.user_id, "")

    def made(self, row: SessionRow) -> bool:
        return row.channel == self.channel and row.user_id in self.users

    @classmethod
    def of(cls, conversation: str) -> Origin | None:
        """A Telegram chat's own sessions (``telegram:<chat>``); None for the others
        (the console, ``session:<id>``, a Telegram topic ``telegram:topic:<n>``, which
        does not name its chat): they list every channel's sessions."""
        channel, _, user = conversation.partition(":")
        topic = user.startswith("topic:")
        return cls(channel, user) if channel == TELEGRAM and user and not topic else None


@dataclass(frozen=True, slots=True)
class OpenedSession:
    conversation: str  # the key to start turns with
    row: SessionRow
    created: bool


@dataclass(slots=True)
class Conversation:
    session_id: int | None = None  # None until its first message creates the session
    turn: Turn | None = None  # the latest turn started here
    # (session id, meta, mode) as the latest turn here read them: the next turn's start
    # assumes them and checks them in the job that stores its message (issue 37).
    assumed: tuple[int, dict[str, Any], str] | None = None


class EndedTurn:
    """What :meth:`Sessions.find_turn` says of a turn that ended: cancelling it does nothing."""

    __slots__ = ()

    def cancel(self) -> bool:
        return False


ENDED = EndedTurn()


class Sessions:
    """The conversations the agent knows, their sessions and their turns."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._conversations: dict[str, Conversation] = {}
        # Turn id → the turn while it runs, None once it ended (for cancel: an ended turn
        # answers "not cancelled" without keeping its events, queue and usage alive).
        self._recent: OrderedDict[str, Turn | None] = OrderedDict()
        self._waiting: dict[str, int] = {}  # conversation → requests queued behind its turn

    # ----- conversations ---------------------------------------------------------------

    def conversation(self, name: str) -> Conversation:
        """The conversation called ``name``, made on first use."""
        conv = self._conversations.get(name)
        if conv is None:
            conv = self._conversations[name] = Conversation()
            if name.startswith(SESSION_PREFIX):  # named by its session: derivable
                conv.session_id = int(name.removeprefix(SESSION_PREFIX))
        return conv

    def _peek(self, name: str) -> Conversation:
        """The conversation called ``name`` as it stands, none kept for a question: an
        unknown ``session:<id>`` is read from its name, any other unknown one is fresh."""
        conv = self._conversations.get(name)
        if conv is not None:
            return conv
        if name.startswith(SESSION_PREFIX):
            return Conversation(int(name.removeprefix(SESSION_PREFIX)))
        return Conversation()

    def names(self) -> list[str]:
        """The conversations held now (idle ``session:<id>`` ones are dropped)."""
        return list(self._conversations)

    def forget_if_idle(self, name: str) -> None:
        """A ``session:<id>`` conversation is rebuilt from its name when needed: drop it
        once idle, so thousands of HTTP chats do not pile up (nor slow ``running``)."""
        conv = self._conversations.get(name)
        if (
            name.startswith(SESSION_PREFIX)
            and conv is not None
            and (conv.turn is None or conv.turn.done)
            and not self._waiting.get(name)
        ):
            del self._conversations[name]

    def current_session(self, conversation: str) -> int | None:
        return self._peek(conversation).session_id

    def new_session(self, conversation: str) -> None:
        """Start afresh; the session row is created with the first message."""
        self.guard_idle(conversation)
        self.conversation(conversation).session_id = None

    # ----- sessions --------------------------------------------------------------------

    async def list_sessions(
        self,
        limit: int = 20,
        project: str | None = None,
        *,
        offset: int = 0,
        origin: Origin | None = None,
    ) -> list[SessionRow]:
        """The owner's sessions, newest first (a sub-agent's child sessions left out:
        they are its working notes, reached through their parent); with ``origin``,
        only the sessions that channel's chat made."""
        channel, users = (origin.channel, origin.users) if origin else (None, None)
        return await self.store.list_sessions(
            limit=limit,
            offset=offset,
            project=project,
            hidden=HIDDEN,
            channel=channel,
            user_id=users,
        )

    async def count_sessions(self, project: str | None = None, origin: Origin | None = None) -> int:
        """How many sessions :meth:`list_sessions` pages through."""
        channel, users = (origin.channel, origin.users) if origin else (None, None)
        return await self.store.count_sessions(
            project=project, hidden=HIDDEN, channel=channel, user_id=users
        )

    async def listed(self, session_id: int) -> SessionRow | None:
        """The session ``#session_id`` names, if it exists and a listing may show it."""
        row = await self.store.get_session(session_id)
        return None if row is None or row.channel in HIDDEN else row

    async def open_session(
        self,
        key: SessionKey,
        *,
        create: bool = True,
        title: str | None = None,
        meta: dict[str, object] | None = None,
    ) -> OpenedSession | None:
        """The conversation for the session with this key, the session created first
        when missing (unless ``create`` is false: then None). Every caller naming the same
        session gets the same conversation, so its turns queue behind one another."""
        row, created = await self.store.open_session(
            key.channel, key.user_id, key.external_id, title=title, meta=meta, create=create
        )
        if row is None:
            return None
        return OpenedSession(f"{SESSION_PREFIX}{row.id}", row, created)

    async def clear_history(self, conversation: str) -> int:
        """Forget the conversation's messages but keep its session (seed 000 ``/new``)."""
        self.guard_idle(conversation)
        session_id = self._peek(conversation).session_id
        if session_id is None:
            return 0
        return await self.store.clear_messages(session_id)

    async def resume(self, conversation: str, session_id: int) -> SessionRow:
        self.guard_idle(conversation)
        row = await self.store.get_session(session_id)
        if row is None:
            raise SessionError(t("session.not_found", id=session_id))
        self.conversation(conversation).session_id = session_id
        return row

    async def delete_sessions(self, ids: list[int]) -> int:
        """Delete sessions (not a protected one, nor one with a running turn)."""
        for session_id in ids:
            row = await self.store.get_session(session_id)
            if row is not None and row.meta.get("system_default"):
                raise ProtectedSessionError(t("session.protected"))
        holding = [(n, c) for n, c in self._conversations.items() if c.session_id in ids]
        if any(c.turn and not c.turn.done for _, c in holding):
            raise BusyError(t("turn.busy"))  # refused whole: nothing detached, nothing gone
        for name, conv in holding:
            conv.session_id = None
            self.forget_if_idle(name)
        # A sub-agent's child sessions go with their parent.
        return await self.store.delete_sessions(ids, children=SUBAGENT_CHANNEL)

    async def retitle(self, session_id: int, title: str | None) -> None:
        await self.store.set_title(session_id, title)

    # ----- turns -----------------------------------------------------------------------

    def begin(self, conversation: str, turn: Turn) -> None:
        """Record ``turn`` as the conversation's own (the caller checked it is idle)."""
        self.conversation(conversation).turn = turn
        self._recent[turn.id] = turn
        while len(self._recent) > RECENT_TURNS:
            self._recent.popitem(last=False)

    def running(self, conversation: str) -> Turn | None:
        """The turn this conversation must wait for: its own, or one running on the same
        session from another channel (e.g. a Telegram chat that resumed it)."""
        conv = self._peek(conversation)
        if conv.turn is not None and not conv.turn.done:
            return conv.turn
        if conv.session_id is None:
            return None
        for other in self._conversations.values():
            turn = other.turn
            if other.session_id == conv.session_id and turn is not None and not turn.done:
                return turn
        return None

    def running_turns(self) -> list[Turn]:
        return [c.turn for c in self._conversations.values() if c.turn and not c.turn.done]

    def is_busy(self, conversation: str) -> bool:
        return self.running(conversation) is not None

    def guard_idle(self, conversation: str) -> None:
        if self.is_busy(conversation):
            raise BusyError(t("turn.busy"))

    async def wait_idle(self, conversation: str, seconds: float) -> None:
        """Wait (up to ``seconds``) until no turn runs on this conversation's session;
        BusyError after that. Waiters are woken in the order they came."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        self._waiting[conversation] = self._waiting.get(conversation, 0) + 1
        try:
            while (turn := self.running(conversation)) is not None:
                remaining = deadline - loop.time()
                if remaining <= 0 or turn.task is None:
                    raise BusyError(t("turn.busy"))
                await asyncio.wait({turn.task}, timeout=remaining)
        finally:
            self._waiting[conversation] -= 1
            if not self._waiting[conversation]:
                del self._waiting[conversation]
            self.forget_if_idle(conversation)

    def waiting(self, conversation: str) -> int:
        """How many callers are queued in :meth:`wait_idle` for this conversation."""
        return self._waiting.get(conversation, 0)

    def find_turn(self, turn_id: str) -> Turn | EndedTurn | None:
        """A running turn, or one of the last ``RECENT_TURNS`` started (an ended one as
        :data:`ENDED`); None for a turn id it does not know."""
        if turn_id not in self._recent:
            return None
        return self._recent[turn_id] or ENDED

    def ended(self, turn: Turn) -> None:
        """``turn`` is over: :meth:`find_turn` keeps knowing it, without holding it."""
        if turn.id in self._recent:
            self._recent[turn.id] = None

    def cancel(self, conversation: str) -> bool:
        """Stop the turn this conversation waits for: its own, or one another channel
        runs on the same session (what makes it busy is what /cancel stops)."""
        turn = self.running(conversation)
        return turn.cancel() if turn else False
