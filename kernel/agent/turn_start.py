"""A turn's start (kernel/agent/turn.py's :class:`TurnRun` is one): the session it runs
in read, the outlook, the prompt mode and the layers made from it (a broken persona,
project or mode file refuses the turn before anything is stored or sent), a failed
question asked again cut, and the owner's message stored with its audit row and the
memories recalled meanwhile.

Issue 37: one hop when the session is as the conversation's last turn read it
(:meth:`TurnStart._begin`); two otherwise (the reads, then the message).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, NamedTuple

from kernel.agent.asked_again import repeat_in
from kernel.agent.context import Layer
from kernel.agent.prompt_modes import ModeChoice
from kernel.agent.scope import ChatScope, Outlook
from kernel.agent.sessions import Conversation
from kernel.agent.slimming import slim_message
from kernel.agent.trail import Trail, actor_of
from kernel.agent.turn_parts import TurnParts, UserInput
from kernel.core.errors import ProfileError, PromptError
from kernel.core.messages import Message
from kernel.core.turns import Turn
from kernel.store.database import RowId
from kernel.store.sessions import SessionRow


class Started(NamedTuple):
    """A turn's start as :meth:`TurnRun._begin` made it: what was read, the ids of the
    owner's message stored (None: not stored), the layers and the memories recalled."""

    session: SessionRow | None
    repeat: int | None
    history: list[Message]
    ids: list[int] | None
    layers: list[Layer]
    volatile: list[Layer]


class TurnStart:
    """How a :class:`~kernel.agent.turn.TurnRun` begins: the session read, the prompt
    prepared, the owner's message stored (the attributes are the run's)."""

    parts: TurnParts
    turn: Turn
    conversation: Conversation
    outlook: Outlook
    _given_outlook: bool
    guest_tools: tuple[str, ...] | None
    mode: ModeChoice
    session_id: int | None
    trail: Trail

    async def _cut_repeat(self, user_input: UserInput, start: int | None) -> bool:
        """The question of a failed turn asked again (🔁, or typed anew; ``start``: its
        first message, :func:`unanswered_repeat`): the failed exchange is cut first, so
        the model receives the question once. True when something was cut."""
        assert self.session_id is not None
        if start is None:
            return False
        store = self.parts.store
        branch, count = await asyncio.shield(store.cut_after(self.session_id, start - 1, "retry"))
        await self.trail.cut(self.session_id, actor_of(user_input), start - 1, branch, count)
        return True

    async def _prepare(self, user_input: UserInput, meta: dict[str, Any]) -> list[Layer]:
        """The outlook, the prompt mode and the prompt's layers for the session's
        ``meta``: raises ProfileError or PromptError to refuse the turn before anything
        is stored or sent."""
        parts = self.parts
        if not self._given_outlook and not user_input.guest:
            # A broken persona or project file refuses the turn before anything is
            # stored or sent: going on without it would lift its allow-list silently.
            self.outlook = await parts.scopes.outlook(ChatScope.of_meta(meta))
        # The session's prompt mode (a guest's and a sub-agent's turn: default). Its
        # layers are read before the message is stored: a codex or claude mode whose
        # files are missing refuses the turn with nothing stored or sent.
        self.mode = ModeChoice()
        if not user_input.guest and self.outlook.agent is None:
            self.mode = ModeChoice.of_meta(meta)
        return await parts.prompt.layers(
            user_input.full_text,
            guest_tools=self.guest_tools,
            outlook=self.outlook,
            mode=self.mode,
            model=parts.models.model,
            volatile=False,
        )

    def _volatile(self, user_input: UserInput) -> Awaitable[list[Layer]]:
        return self.parts.prompt.volatile(
            user_input.full_text, guest_tools=self.guest_tools, outlook=self.outlook
        )

    async def _begin(self, user_input: UserInput, message: Message) -> Started | None:
        """Issue 37: the turn's start in one hop when the session is as this
        conversation's last turn read it (meta, mode): the outlook and the layers made
        from that, then one job reads the session, the history and the repeat check and
        stores the message only if the session is still so and no failed question is
        asked again, its audit row kept only then; the memories recalled meanwhile.
        None when there is nothing assumed, or what was assumed would refuse the turn
        (the fresh read decides). Otherwise the session, the history, the stored ids
        (None: nothing stored, the session changed or the question repeats: the caller
        goes on with the fresh read, as without an assumption) and the layers."""
        assumed = self.conversation.assumed
        if assumed is None or assumed[0] != self.session_id:
            return None
        _, meta, mode = assumed
        try:
            layers = await self._prepare(user_input, meta)
        except (ProfileError, PromptError):
            return None
        assert self.session_id is not None
        sent, text = RowId(), user_input.text
        starting = self.parts.store.begin_turn_soon(
            self.session_id,
            rounds=max(self.parts.config.general.context_rounds - 1, 1),
            meta=meta,
            mode=mode,
            fits=lambda told: repeat_in(told, text) is None,
            messages=[slim_message(message)],
            rows=[sent],
        )
        await self.trail.received(
            self.session_id, sent, user_input, self.turn, self.outlook.agent, tentative=True
        )
        begun, volatile = await asyncio.gather(asyncio.shield(starting), self._volatile(user_input))
        repeat = repeat_in(begun.transcript, text)
        return Started(begun.session, repeat, begun.history, begun.ids, layers, volatile)

    async def _history(self) -> list[Message]:
        assert self.session_id is not None
        rounds = max(self.parts.config.general.context_rounds - 1, 1)
        return await self.parts.store.load_messages(self.session_id, rounds=rounds)
