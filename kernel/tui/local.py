"""The in-process backend: the TUI drives a Kernel core started in this process (no
Telegram polling), through the Agent's own turns, questions and audit log."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from kernel.agent.agent import SessionKey, UserInput
from kernel.agent.sessions import HIDDEN, SESSION_PREFIX
from kernel.core.asks import AnswerResult
from kernel.core.errors import KernelError
from kernel.core.events import TurnEvent
from kernel.core.i18n import t
from kernel.core.messages import content_to_json
from kernel.store.audit import AuditRow
from kernel.tui.backend import (
    AUDIT_LIMIT,
    CHANNEL,
    CHAT_LIMIT,
    HISTORY_ROUNDS,
    AuditItem,
    AuditView,
    BackendError,
    ChatRef,
)

if TYPE_CHECKING:
    from kernel.commands.parts import KernelParts


class LocalBackend:
    def __init__(self, kernel: KernelParts) -> None:
        self.kernel = kernel
        self.agent = kernel.agent
        self._describe, self._verdict = _words()

    @property
    def zone(self) -> tzinfo:
        return self.agent.tz

    @property
    def where(self) -> str:
        return t(
            "tui.local",
            provider=self.agent.selection.provider_name,
            model=self.agent.selection.model,
        )

    async def chats(self) -> list[ChatRef]:
        rows = await self.kernel.store.list_sessions(
            limit=CHAT_LIMIT, channel=CHANNEL, hidden=HIDDEN
        )
        return [
            ChatRef(
                ident=f"{SESSION_PREFIX}{row.id}",
                title=row.title or "",
                updated=row.updated_at.isoformat(),
                user_id=row.user_id,
                external_id=row.external_id,
                session=row.id,
                messages=row.message_count,
            )
            for row in rows
        ]

    async def history(self, chat: ChatRef) -> list[dict[str, Any]]:
        if chat.session is None:
            return []
        stored = await self.kernel.store.load_transcript(chat.session, rounds=HISTORY_ROUNDS)
        return [
            {"role": s.message.role, "content": content_to_json(s.message.content)}
            | ({"failed": True} if s.failed else {})
            | ({"cut": s.cut} if s.cut else {})
            for s in stored
        ]

    async def _conversation(self, chat: ChatRef) -> str:
        if chat.session is None:
            key = SessionKey(CHANNEL, chat.user_id, chat.external_id)
            opened = await self.agent.sessions.open_session(key)
            assert opened is not None  # created when missing
            chat.ident, chat.session = opened.conversation, opened.row.id
        return f"{SESSION_PREFIX}{chat.session}"

    async def send(self, chat: ChatRef, text: str) -> AsyncIterator[TurnEvent]:
        try:
            conversation = await self._conversation(chat)
            user_input = UserInput(text, channel=CHANNEL, user_id=chat.user_id)
            turn = self.agent.start_turn(conversation, user_input)
        except KernelError as exc:  # busy (another channel's turn runs there), store errors
            raise BackendError(str(exc)) from None
        try:
            async for event in turn:
                yield event
        finally:
            if turn.final is None:  # left before its end (the app quits): stop it
                turn.cancel()

    async def cancel(self, chat: ChatRef) -> bool:
        if chat.session is None:
            return False
        return self.agent.sessions.cancel(f"{SESSION_PREFIX}{chat.session}")

    async def answer(self, ask_id: str, choice: int) -> bool:
        return self.agent.asks.answer(ask_id, choice) is AnswerResult.RESOLVED

    async def audit(self, chat: ChatRef) -> AuditView:
        if chat.session is None:
            return AuditView([], {"ok": True, "checked": 0, "pruned": 0})
        try:
            rows = await self.agent.audit.events(chat.session, limit=AUDIT_LIMIT)
            verdict = await self.agent.audit.verify(chat.session)
        except KernelError as exc:
            raise BackendError(str(exc)) from None
        answer = verdict.as_json()
        if self._verdict is not None:
            answer["text"] = self._verdict(verdict)
        return AuditView([self._item(row) for row in rows], answer)

    def _item(self, row: AuditRow) -> AuditItem:
        text = self._describe(row, self.agent.tz) if self._describe else ""
        return AuditItem(row.seq, row.at, row.kind, row.actor, row.data, text)

    async def close(self) -> None:
        return None


def _words() -> tuple[Callable[..., str] | None, Callable[..., str] | None]:
    """The audit's plain words (kernel/audit/words.py ``describe`` and
    ``verdict_words``) when this Kernel has them; without them an event is shown by its
    kind and facts, the verdict by the TUI's own words."""
    try:
        module = importlib.import_module("kernel.audit.words")
    except ImportError:
        return None, None
    return getattr(module, "describe", None), getattr(module, "verdict_words", None)
