"""What the TUI talks to: one :class:`Backend` protocol, two implementations (the running
Kernel's sidecar over HTTP, kernel/tui/remote.py; an in-process Kernel,
kernel/tui/local.py). The app sees only this protocol and these plain values.

Turn events are :data:`~kernel.core.events.TurnEvent` in both backends (the HTTP one
reads the sidecar's SSE with ``event_from_dict``), so one renderer draws them whichever
way they came.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, Protocol

from kernel.core.errors import KernelError
from kernel.core.events import TurnEvent

CHANNEL = "console"  # the TUI's chats are the console channel's, as the web console's
USER = "tui"  # the user id of the chats the TUI starts
HISTORY_ROUNDS = 20  # exchanges loaded when a chat is opened
AUDIT_LIMIT = 200  # audit events shown on the audit screen
CHAT_LIMIT = 100  # chats listed


class BackendError(KernelError):
    """A backend could not do what was asked; the message is in the owner's words."""


@dataclass(slots=True)
class ChatRef:
    """One chat as the TUI lists and opens it.

    ``ident``: the backend's name for a stored chat (the sidecar's ``chat-<n>``, or the
    in-process ``session:<n>``), "" for a new chat that exists only once its first message
    is sent; ``session``: the stored session's id when known (what the audit is keyed
    by); ``user_id``/``external_id``: the chat's key in the console channel."""

    ident: str = ""
    title: str = ""
    updated: str = ""  # ISO 8601, "" when unknown
    user_id: str = USER
    external_id: str = field(default_factory=lambda: f"tui-{uuid.uuid4().hex[:12]}")
    session: int | None = None
    messages: int = 0

    @property
    def stored(self) -> bool:
        return bool(self.ident)


@dataclass(frozen=True, slots=True)
class AuditItem:
    seq: int | None
    at: str
    kind: str
    actor: str
    data: dict[str, Any] | None
    text: str = ""  # the event in plain words, when the backend has them


@dataclass(frozen=True, slots=True)
class AuditView:
    items: list[AuditItem]
    verdict: dict[str, Any]  # Verdict.as_json(): {ok, checked, pruned[, first_broken_seq, …]}


class Backend(Protocol):
    """The one interface of the app to a Kernel."""

    @property
    def where(self) -> str:
        """One line saying what the TUI is connected to."""
        ...

    @property
    def zone(self) -> tzinfo:
        """The owner's time zone (``general.timezone``): every time shown is in it."""
        ...

    async def chats(self) -> list[ChatRef]:
        """The console chats, most recently active first."""
        ...

    async def history(self, chat: ChatRef) -> list[dict[str, Any]]:
        """The chat's recent messages as the sidecar answers them: ``{role, content,
        failed?, cut?}`` with ``content`` a list of blocks."""
        ...

    def send(self, chat: ChatRef, text: str) -> AsyncIterator[TurnEvent]:
        """Run one turn in ``chat`` (created by its first message); its events as they
        happen, the last one ``completed`` or ``error``. Raises BackendError when the
        turn could not start. A new chat is filled in (``ident``, ``session``) once
        known."""
        ...

    async def cancel(self, chat: ChatRef) -> bool:
        """Cancel the chat's running turn; False when none runs."""
        ...

    async def answer(self, ask_id: str, choice: int) -> bool:
        """Answer a waiting question; False when it no longer waits."""
        ...

    async def audit(self, chat: ChatRef) -> AuditView:
        """The chat's audit events (oldest first) and its chain's verdict."""
        ...

    async def close(self) -> None: ...
