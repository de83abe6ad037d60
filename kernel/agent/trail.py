"""What a turn records in the audit trail (issue 23): the owner's message received, each
model call (told by the meter), each tool call and the turn's end.

Facts only: ids, names, counts, codes, durations and SHA-256 hashes. A message is
referenced by its stored id (the store adds its content's hash), a tool's arguments by
the hash of their canonical JSON; never their text. Recording never breaks a turn: a
failure is logged by type and the turn goes on.

Public API: :class:`Trail`, :func:`actor_of`, :func:`parts_of`, :func:`args_sha256`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kernel.agent.slimming import file_blocks, has_voice, without_files
from kernel.agent.turn_parts import UserInput
from kernel.audit import AuditLog, kinds
from kernel.core.turns import Turn
from kernel.store.database import RowId
from kernel.store.usage import UsageEntry
from kernel.tools.registry import ToolOutcome

log = logging.getLogger(__name__)


# Who made a model call of each purpose ask for it (the turn's own calls: Kernel).
_CALLERS = {"api": "api", "cron": "cron", "sampling": "kernel", "subagent": "model"}


def actor_of(user_input: UserInput, *, subagent: bool = False) -> str:
    """Who sent a turn's input: the owner, a guest of a channel, a cron job, a sidecar
    client (``api``), or the model (a sub-agent's task)."""
    if user_input.actor:
        return user_input.actor
    if user_input.guest:
        return f"guest:{user_input.channel}"
    if subagent:
        return "model"
    if user_input.channel == "cron":
        return "cron"
    return "owner"


def parts_of(user_input: UserInput) -> list[str]:
    """What the input was made of: text, photo, file, voice (as far as it shows)."""
    parts: list[str] = []
    attached = "\n".join(user_input.attached)  # the owner's own text is never read
    if user_input.images:
        parts.append("photo")
    if next(file_blocks(attached), None) is not None:
        parts.append("file")
        attached = without_files(attached)
    if has_voice(attached):
        parts.append("voice")
    if user_input.text.strip():
        parts.append("text")
    return parts


def args_sha256(arguments: Mapping[str, Any] | str | None) -> str:
    """SHA-256 of the canonical JSON of a tool call's arguments (ASCII JSON: a model's
    lone surrogate is hashed like any other character, never an encoding error)."""
    canon = json.dumps(
        arguments, ensure_ascii=True, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canon.encode("ascii")).hexdigest()


class Trail:
    """A turn's (and the meter's) way into the audit log; without one, nothing is kept."""

    def __init__(self, audit: AuditLog | None) -> None:
        self.audit = audit

    async def _record(
        self,
        kind: str,
        session_id: int | None,
        actor: str,
        kept_if: RowId | None = None,
        **facts: Any,
    ) -> None:
        if self.audit is None:
            return
        try:  # queued, written with the turn's next store call (one hop per phase)
            self.audit.note(kind, session_id=session_id, actor=actor, after=kept_if, **facts)
        except Exception as exc:  # the record is never worth the turn
            log.warning("audit: %s not recorded (%s)", kind, type(exc).__name__)

    async def received(
        self,
        session_id: int,
        message_id: int | RowId | None,
        user_input: UserInput,
        turn: Turn,
        subagent: object = None,
        *,
        tentative: bool = False,
    ) -> None:
        """The turn's input was stored as ``message_id`` (a RowId: is being stored, by a
        write queued before this record; ``tentative``: a write that may decline to,
        and then this record is not kept either; ``subagent``: the profile a sub-agent's
        task runs under, whose sender is the model)."""
        await self._record(
            kinds.MESSAGE_RECEIVED,
            session_id,
            actor_of(user_input, subagent=subagent is not None),
            message_id if isinstance(message_id, RowId) and tentative else None,
            messages=[message_id] if message_id is not None else None,
            channel=user_input.channel,
            parts=parts_of(user_input),
            turn=turn.id,
            retry=True if user_input.retry else None,
        )

    async def tool(
        self,
        session_id: int | None,
        step: int,
        call_id: str,
        asked: Mapping[str, Any],
        outcome: ToolOutcome,
        ms: int,
        code: str = "",
    ) -> None:
        """One tool call ended: ``asked`` the arguments the model's call carried (the
        hash is of those the tool ran with, when it ran), ``code`` why it failed when
        the turn knows better than the outcome (tool_limit, cancelled)."""
        if not outcome.ok and not code:
            error = outcome.error
            code = (getattr(error, "code", "") or type(error).__name__) if error else "failed"
        await self._record(
            kinds.TOOL_CALL,
            session_id,
            "model",
            tool=outcome.name,
            call=call_id,
            step=step,
            ok=outcome.ok,
            error=None if outcome.ok else code,
            ms=ms,
            result_chars=len(outcome.content),
            args_sha256=args_sha256(outcome.arguments or asked),
        )

    async def cut(self, session_id: int, actor: str, after: int, branch: int, count: int) -> None:
        """A failed exchange cut because its question was asked again (asked_again.py):
        recorded like /retry's cut."""
        await self._record(
            kinds.HISTORY_CUT,
            session_id,
            actor,
            command="retry",
            after=after,
            cut=count,
            branch=branch,
        )

    async def answered(
        self,
        session_id: int | None,
        turn: Turn,
        outcome: str,
        steps: int,
        code: str = "",
        stored: Sequence[int] = (),
    ) -> None:
        """The turn ended (answered, cancelled, failed, refused, budget, rejected,
        tool_limit); every message it stored after the owner's (its tool calls, their
        results, the final answer) is referenced with its content hash, so an edit of
        any of them shows in verify (review R1)."""
        answer = turn.answer_id
        written: list[int | RowId] = [i for i in stored[1:] if i != answer]
        if answer is not None:
            written.append(answer)
        await self._record(
            kinds.TURN_ANSWERED,
            session_id,
            "kernel",
            outcome=outcome,
            code=code or None,
            messages=written or None,
            steps=steps,
            turn=turn.id,
        )

    async def model_call(self, entry: UsageEntry, outcome: str, row: RowId) -> None:
        """The meter's hook: one row per model call, whatever its purpose; ``row``: its
        ledger row's id, filled when that row is written (the same hop as this one)."""
        usage = entry.usage
        tokens = (
            {
                "input": usage.input,
                "output": usage.output,
                "cache_read": usage.cache_read,
                "cache_write": usage.cache_write,
            }
            if entry.usage_known
            else None
        )
        await self._record(
            kinds.MODEL_CALL,
            entry.session_id,
            _CALLERS.get(entry.purpose, "kernel"),
            provider=entry.provider,
            model=entry.model,
            purpose=entry.purpose,
            outcome=outcome,
            tokens=tokens,
            cost=entry.cost,
            bound=entry.bound,
            retries=entry.retries or None,
            ledger=row,
            turn=entry.turn_id or None,
        )
