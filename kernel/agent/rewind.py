"""Conversation control (issue 20): /undo, /rewind and /retry cut messages out of what
the model sees. Nothing is deleted: the store marks them (``messages.cut``, one branch
per cut), so the history and any audit stay whole.

- **undo**: the last exchange — the owner's message, every tool call and result of its
  turn, the answer — is cut.
- **rewind**: everything after one final answer (a stored message id, the HTTP routes'
  ``sequence``) is cut.
- **retry**: the last exchange is cut (kept as a superseded branch) and the owner's
  message of it is run again as a new turn; when that turn cannot start, or ends
  without an answer, the cut is taken back.

- **switch** (issue 38, seed 002 ``siblingNav``): a cut branch becomes the live
  history again, and what was live after its fork is kept as a branch in its place
  (kernel/store/branches.py): nothing is lost by switching.

Each refuses while a turn runs (BusyError: /cancel first), and with words naming the
fix when there is nothing to cut. Each cut, give-back and switch is in the audit trail
(``history.cut``, ``history.restored``, ``history.switched``): the rows of the cut
messages stay, and still verify, because the messages stay. Public API:
:class:`ConversationControl`, :class:`Cut`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

from kernel.agent.sessions import Sessions
from kernel.agent.slimming import media_dropped, owner_text
from kernel.agent.turn_parts import UserInput
from kernel.audit import AuditLog, kinds
from kernel.core.errors import BusyError, ConversationError
from kernel.core.i18n import t
from kernel.spend.meter import OWNER_CHANNELS
from kernel.store.branches import Branches, Switched
from kernel.store.db import Store, StoredMessage


@dataclass(frozen=True, slots=True)
class Cut:
    """What one cut did: the session, the branch number and how many messages."""

    session_id: int
    branch: int
    count: int
    command: str = "undo"  # undo | rewind | retry
    actor: str = "owner"


class ConversationControl:
    def __init__(self, sessions: Sessions, store: Store, audit: AuditLog | None = None) -> None:
        self.sessions = sessions
        self.store = store
        self.audit = audit or AuditLog(store)

    def _guard(self, conversation: str) -> None:
        if self.sessions.is_busy(conversation):
            raise BusyError(t("conv.busy"))

    def _session(self, conversation: str, code: str, **words: object) -> int:
        self._guard(conversation)
        session_id = self.sessions.current_session(conversation)
        if session_id is None:
            raise refused(code, **words)
        return session_id

    async def _last_exchange(self, session_id: int) -> StoredMessage | None:
        """The owner's message starting the last exchange the model sees."""
        transcript = await self.store.load_transcript(session_id)
        starts = [s for s in transcript if s.starts_round and not s.cut and not s.failed]
        return starts[-1] if starts else None

    async def undo(self, conversation: str, actor: str = "owner") -> Cut:
        session_id = self._session(conversation, "nothing_to_undo")
        start = await self._last_exchange(session_id)
        if start is None:
            raise refused("nothing_to_undo")
        return await self._cut(conversation, session_id, start.id - 1, "undo", actor)

    async def rewind(self, conversation: str, after_id: int, actor: str = "owner") -> Cut:
        """Cut everything after ``after_id``: a final answer the model still sees."""
        session_id = self._session(conversation, "rewind_target_not_found", sequence=after_id)
        return await self.rewind_session(conversation, session_id, after_id, actor)

    async def rewind_session(
        self, conversation: str, session_id: int, after_id: int, actor: str = "owner"
    ) -> Cut:
        self._guard(conversation)
        transcript = await self.store.load_transcript(session_id)
        live = [s for s in transcript if not s.cut and not s.failed]
        target = next((s for s in live if s.id == after_id), None)
        if target is None or target.message.role != "assistant" or target.message.tool_uses:
            raise refused("rewind_target_not_found", sequence=after_id)
        if not any(s.id > after_id for s in transcript if not s.cut):
            raise refused("rewind_nothing_after")
        return await self._cut(conversation, session_id, after_id, "rewind", actor)

    async def take_back(
        self,
        conversation: str,
        template: UserInput,
        remembered: tuple[int, UserInput] | None = None,
    ) -> tuple[UserInput, Cut]:
        """/retry's first half: cut the last exchange; its owner's message, with
        ``template``'s channel, sender and flags, is what to run again — as it was sent
        when ``remembered`` (stored id, input) is that message, else as stored (taken as
        it is: no template expanded again; refused when it held a photo, file or voice
        note, which the store keeps only as a marker). Only the owner's own chats: a QQ
        or webhook chat's last message may be a guest's, which must not run as the
        owner's."""
        session_id = self._session(conversation, "nothing_to_retry")
        row = await self.store.get_session(session_id)
        if row is not None and row.channel not in OWNER_CHANNELS:
            raise refused("retry_not_owner_chat", channel=row.channel)
        start = await self._last_exchange(session_id)
        if start is None:
            raise refused("nothing_to_retry")
        if remembered is not None and remembered[0] == start.id:
            sent = remembered[1]
            again = dataclasses.replace(
                template, text=sent.text, images=list(sent.images), attached=sent.attached
            )
        else:
            if media_dropped(start.message):
                raise refused("retry_input_gone")
            text = owner_text(start.message)
            if not text.strip():
                raise refused("nothing_to_retry")
            again = dataclasses.replace(template, text=text, images=[], expand=False)
        again = dataclasses.replace(again, retry=True)
        actor = template.actor or "owner"
        cut = await self._cut(conversation, session_id, start.id - 1, "retry", actor)
        return again, cut

    async def give_back(self, cut: Cut, stored: list[int]) -> None:
        """A retry that ended without an answer: what it wrote is cut (a branch of its
        own) and the exchange it replaced is seen again."""
        taken = (0, 0)
        if stored:
            taken = await self.store.cut_after(cut.session_id, min(stored) - 1, "retry")
        await self.restore(cut, taken)

    async def latest_answer(self, conversation: str) -> int | None:
        """The stored id of the last final answer the model sees, if the conversation's
        last exchange has one."""
        session_id = self.sessions.current_session(conversation)
        if session_id is None:
            return None
        transcript = await self.store.load_transcript(session_id)
        live = [s for s in transcript if not s.cut and not s.failed]
        if not live or live[-1].message.role != "assistant" or live[-1].message.tool_uses:
            return None
        return live[-1].id

    async def restore(self, cut: Cut, taken: tuple[int, int] = (0, 0)) -> None:
        """Show ``cut``'s branch again (``taken``: the branch and count of what the
        retry wrote, cut in its place)."""
        count = await self.store.restore_branch(cut.session_id, cut.branch)
        await self.audit.record(
            kinds.HISTORY_RESTORED,
            session_id=cut.session_id,
            actor="kernel",
            branch=cut.branch,
            restored=count,
            command=cut.command,
            cut_branch=taken[0] or None,
            cut=taken[1],
        )

    async def branches(self, session_id: int) -> tuple[int, int]:
        """(branches cut from the session, messages in them)."""
        return await self.store.count_branches(session_id)

    async def list_branches(self, session_id: int) -> Branches:
        return await self.store.list_branches(session_id)

    async def switch(
        self, conversation: str, branch: int, actor: str = "owner", session_id: int | None = None
    ) -> Switched:
        """Make ``branch`` of the conversation's session (or of ``session_id``) the live
        history; the history left is kept as a branch. Refused while a turn runs, and
        when there is no such branch. The switch and its audit row happen even when the
        caller goes away meanwhile."""
        if session_id is None:
            session_id = self._session(conversation, "branch_not_found", branch=branch)
        self._guard(conversation)  # and queued at once: a turn starting now comes after
        future = self.store.switch_branch(session_id, branch)
        future.add_done_callback(lambda done: self._switched(session_id, actor, done))
        switched = await asyncio.shield(future)
        if switched is None:
            raise refused("branch_not_found", branch=branch)
        return switched

    def _switched(self, session_id: int, actor: str, done: asyncio.Future[Switched | None]) -> None:
        if done.cancelled() or done.exception() is not None or done.result() is None:
            return
        switched = done.result()
        assert switched is not None
        self.audit.note(
            kinds.HISTORY_SWITCHED,
            session_id=session_id,
            actor=actor,
            branch=switched.branch,
            fork=switched.fork,
            restored=switched.restored,
            left=[number for number, _ in switched.left],
            cut=sum(count for _, count in switched.left),
        )

    async def _cut(
        self, conversation: str, session_id: int, after_id: int, command: str, actor: str
    ) -> Cut:
        self._guard(conversation)  # a turn may have begun while the history was read
        branch, count = await self.store.cut_after(session_id, after_id, command)
        await self.audit.record(
            kinds.HISTORY_CUT,
            session_id=session_id,
            actor=actor,
            command=command,
            after=after_id,
            cut=count,
            branch=branch,
        )
        return Cut(session_id, branch, count, command, actor)


_WORDS = {
    "nothing_to_undo": "conv.nothing_to_undo",
    "nothing_to_retry": "conv.nothing_to_retry",
    "rewind_target_not_found": "conv.rewind_not_found",
    "rewind_nothing_after": "conv.rewind_nothing_after",
    "retry_not_owner_chat": "conv.retry_not_owner",
    "retry_input_gone": "conv.retry_media_gone",
    "branch_not_found": "conv.branch_not_found",
}


def refused(code: str, **words: object) -> ConversationError:
    """A refusal with its code (HTTP status in HTTP_STATUS) and catalogue words."""
    return ConversationError(code, t(_WORDS[code], **words), dict(words))
