"""Coding CLIs' permission prompts, answered by the owner (issue 19).

With ``[cli.claude_code] approvals = "telegram"`` the Delegator opens a :class:`RunGrant`
for each run: a fresh token (the CLI's ``--mcp-config`` carries it to Kernel's MCP
endpoint; it works only while the run lasts), the turn's ``ToolContext`` (whose ``ask``
reaches the owner wherever the turn is shown: Telegram buttons, the sidecar's SSE,
``kernel chat``) and the CLI's hold (its timeouts do not run while the owner decides).

:meth:`Approvals.decide` answers one prompt: a rule the owner added for this task
("Allow for this task") allows it at once; otherwise the owner is asked with three
choices — Allow once, Allow for this task, Deny. A timeout, a question nobody can see,
the run ending (``/cancel``, the CLI finishing, Kernel stopping) deny. Every decision is
recorded (``delegation_approvals``) and kept on the grant for the delegation's result.
An owner's own MCP client (the API key, no run) is asked through the channel registry's
asker, like a cron job's question; so is the sidecar's ``shell`` tool (``via="api"``,
a question only the owner's chat shows). The audit trail gets ``approval.asked`` and
``approval.answered`` (by whom, the record's id) in the delegating turn's session.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from kernel.audit import AuditLog
from kernel.audit import kinds as audit_kinds
from kernel.core.asks import Answer, AskOutcome, AskRegistry, Question
from kernel.core.delivery import ChannelRegistry, ask_owner
from kernel.core.errors import KernelError
from kernel.core.i18n import t
from kernel.delegate.formats import display_name
from kernel.delegate.permission import (
    SHOWN_CHARS,
    PermissionRequest,
    Rule,
    describe,
    rule_for,
    too_long,
)
from kernel.store.approvals import ApprovalRecord, ApprovalStore, input_text
from kernel.store.db import Store
from kernel.tools.registry import ToolContext

__all__ = ["Approvals", "Decision", "PermissionRequest", "RunGrant"]

log = logging.getLogger(__name__)

EXPIRED_KEPT = 256  # closed runs whose token is still recognised as expired
# Prompts open at once per run (and for the owner's own MCP clients together): Claude
# Code asks one at a time, so more is a flood of messages, not a CLI at work.
MAX_OPEN = 3
ALLOW_ONCE, ALLOW_TASK, DENY = 0, 1, 2
# What each button of a prompt means, by how many it has: a run's prompt has three; an
# owner's own MCP client's two (there is no task whose rules could keep an answer).
MEANINGS = {3: (ALLOW_ONCE, ALLOW_TASK, DENY), 2: (ALLOW_ONCE, DENY)}


def meaning(options: int, choice: int) -> int | None:
    """ALLOW_ONCE, ALLOW_TASK or DENY for button ``choice`` of a prompt of ``options``."""
    meanings = MEANINGS.get(options, ())
    return meanings[choice] if 0 <= choice < len(meanings) else None


Hold = Callable[[], contextlib.AbstractContextManager[None]]

_DENIALS = {
    "owner": "The owner denied this tool use. Do not retry it; go on without it, or stop "
    "and say what you needed it for.",
    "timeout": "The owner did not answer the permission prompt within {seconds:g} s, so it "
    "was denied. Do not retry it unasked.",
    "cancelled": "The task was cancelled or ended while the owner was asked; denied.",
    "undelivered": "The permission prompt could not be shown to the owner (their chat is "
    "unreachable now); denied.",
    "nobody": "Nobody can answer permission prompts for this run; denied.",
    "too_many": f"{MAX_OPEN} permission prompts are already waiting for the owner; ask one "
    "at a time. Denied.",
    "error": "The permission prompt could not be made from this input; denied.",
    "too_long": "This command is {chars} characters long, too long to show the owner whole "
    "({limit} at most), so it was denied unasked. Split it into shorter commands, or write "
    "a script file first and run that.",
}


@dataclass(frozen=True, slots=True)
class Decision:
    allow: bool
    by: str  # owner | task_rule | timeout | cancelled | undelivered | nobody | too_many | error
    message: str = ""  # why it was denied, for the CLI's model (English)
    rule: str = ""  # the rule that allowed it, or the one the owner added
    # What may run: the input as the owner was shown it (decide() sets it on an allow).
    input: dict[str, Any] | None = None

    def as_claude(self, request: PermissionRequest) -> dict[str, Any]:
        """The answer Claude Code's ``--permission-prompt-tool`` expects (as JSON text):
        an allow carries the input the owner saw, never the raw one."""
        if self.allow:
            shown = self.input if self.input is not None else clean(request).input
            return {"behavior": "allow", "updatedInput": shown}
        return {"behavior": "deny", "message": self.message}


@dataclass(eq=False)
class RunGrant:
    """One delegation's right to ask the owner, while it runs."""

    token: str = field(repr=False)
    delegation_id: str
    cli: str
    context: ToolContext | None
    timeout: float
    hold: Hold
    rules: list[Rule] = field(default_factory=list)
    decisions: list[tuple[str, str, str]] = field(default_factory=list)  # tool, decision, by
    closed: bool = False
    _pending: set[asyncio.Task[Answer]] = field(default_factory=set)

    @property
    def conversation(self) -> str:
        return self.context.conversation if self.context is not None else ""

    def summary(self) -> list[dict[str, str]]:
        """The decisions, for the delegation's result."""
        return [{"tool": tool, "decision": d, "by": by} for tool, d, by in self.decisions]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@contextlib.contextmanager
def _no_hold() -> Iterator[None]:
    yield


class Approvals:
    def __init__(
        self,
        store: Store,
        asks: AskRegistry,
        registry: ChannelRegistry,
        *,
        timeout: float = 600.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        audit: AuditLog | None = None,
    ) -> None:
        self.records = ApprovalStore(store)
        self.audit = audit
        self.asks = asks
        self.registry = registry
        self.timeout = timeout  # for an owner's own MCP client's prompts
        self.clock = clock
        # The MCP endpoint's URL while the sidecar serves it (set by the gateway);
        # None: a run with approvals cannot start.
        self.endpoint_url: str | None = None
        self._grants: dict[bytes, RunGrant] = {}
        self._expired: deque[bytes] = deque(maxlen=EXPIRED_KEPT)
        self._detached = 0  # prompts of the owner's own MCP clients open now

    # ----- runs ---------------------------------------------------------------------------

    def open(
        self,
        delegation_id: str,
        cli: str,
        context: ToolContext | None,
        *,
        timeout: float,
        hold: Hold = _no_hold,
    ) -> RunGrant:
        grant = RunGrant(secrets.token_urlsafe(32), delegation_id, cli, context, timeout, hold)
        self._grants[_digest(grant.token)] = grant
        return grant

    def close(self, grant: RunGrant) -> None:
        """The run ended: its token stops working now and prompts still open are denied."""
        grant.closed = True
        digest = _digest(grant.token)
        if self._grants.pop(digest, None) is not None:
            self._expired.append(digest)
        for task in list(grant._pending):
            task.cancel()

    def resolve(self, token: str) -> RunGrant | Literal["expired"] | None:
        """The live run ``token`` belongs to, "expired" for a run that ended, else None.
        (Looked up by its SHA-256: no comparison leaks how much of a guess was right.)"""
        digest = _digest(token)
        grant = self._grants.get(digest)
        if grant is not None:
            return grant
        return "expired" if digest in self._expired else None

    def running(self) -> list[RunGrant]:
        return list(self._grants.values())

    # ----- prompts ------------------------------------------------------------------------

    async def decide(
        self, grant: RunGrant | None, request: PermissionRequest, *, via: str = "mcp"
    ) -> Decision:
        """Answer one permission prompt (see the module's docstring). Whatever happens,
        the answer is recorded; an input that cannot be shown is denied. ``via``: who
        asks without a run, ``mcp`` (an owner's own MCP client) or ``api`` (the
        sidecar's ``shell`` tool); it names the asker to the owner and in the record."""
        asked_at = self.clock()
        request = clean(request)
        try:
            await asyncio.shield(self._audit_asked(grant, request))
            decision = await self._decide(grant, request, via)
        except asyncio.CancelledError:  # the caller went away: recorded as denied
            gone = Decision(False, "cancelled", _DENIALS["cancelled"])
            await asyncio.shield(self._record(grant, request, gone, asked_at, via))
            raise
        except Exception as exc:  # a CLI's input no rule or text was made for
            log.warning("a permission prompt failed: %s", type(exc).__name__)
            decision = Decision(False, "error", _DENIALS["error"])
        if decision.allow:
            decision = replace(decision, input=request.input)
        await self._record(grant, request, decision, asked_at, via)
        return decision

    async def _decide(
        self, grant: RunGrant | None, request: PermissionRequest, via: str
    ) -> Decision:
        if grant is not None and grant.closed:
            return Decision(False, "cancelled", _DENIALS["cancelled"])
        rule = rule_for(request)
        if grant is not None and any(r.matches(request) for r in grant.rules):
            used = next(r for r in grant.rules if r.matches(request))
            return Decision(True, "task_rule", rule=used.label)
        hidden = too_long(request)
        if hidden:
            limit = SHOWN_CHARS
            return Decision(
                False, "too_long", _DENIALS["too_long"].format(chars=hidden, limit=limit)
            )
        if grant is not None and (grant.context is None or grant.context.ask is None):
            return Decision(False, "nobody", _DENIALS["nobody"])
        if grant is not None:
            if len(grant._pending) >= MAX_OPEN:
                return Decision(False, "too_many", _DENIALS["too_many"])
            return await self._ask(grant, request, rule, via)
        if self._detached >= MAX_OPEN:  # counted before any await: no race past the cap
            return Decision(False, "too_many", _DENIALS["too_many"])
        self._detached += 1
        try:
            return await self._ask(grant, request, rule, via)
        finally:
            self._detached -= 1

    async def _ask(
        self, grant: RunGrant | None, request: PermissionRequest, rule: Rule, via: str
    ) -> Decision:
        cli = t(f"perm.{via}_client") if grant is None else _cli_label(grant.cli)
        text = describe(request, cli, rule if grant is not None else None)
        options = [t("perm.allow_once"), t("perm.allow_task"), t("perm.deny")]
        if grant is None:  # no task to keep "allow for this task" in
            options = [t("perm.allow_once"), t("perm.deny")]
        seconds = self.timeout if grant is None else grant.timeout
        asking = self._question(grant, text, options, seconds, via)
        task: asyncio.Task[Answer] = asyncio.ensure_future(asking)
        if grant is not None:
            grant._pending.add(task)
        hold = grant.hold if grant is not None else _no_hold
        try:
            with hold():
                await asyncio.wait({task})
        except asyncio.CancelledError:  # the caller went away (the CLI's request ended)
            task.cancel()
            raise
        finally:
            if grant is not None:
                grant._pending.discard(task)
        if task.cancelled():
            return Decision(False, "cancelled", _DENIALS["cancelled"])
        answer = task.result()
        chosen = meaning(len(options), answer.option) if answer.option is not None else None
        if chosen == ALLOW_ONCE:
            return Decision(True, "owner")
        if chosen == ALLOW_TASK and grant is not None:
            if not grant.closed:
                grant.rules.append(rule)
            return Decision(True, "owner", rule=rule.label)
        if chosen == DENY:
            return Decision(False, "owner", _DENIALS["owner"])
        if answer.outcome is AskOutcome.TIMEOUT:
            return Decision(False, "timeout", _DENIALS["timeout"].format(seconds=seconds))
        return Decision(False, "undelivered", _DENIALS["undelivered"])

    async def _question(
        self, grant: RunGrant | None, text: str, options: list[str], seconds: float, via: str
    ) -> Answer:
        if grant is not None:
            assert grant.context is not None and grant.context.ask is not None
            return await grant.context.ask(
                text, options, kind="permission", seconds=seconds, markdown=True
            )
        return await self._ask_detached(text, options, seconds, via)

    async def _ask_detached(
        self, text: str, options: list[str], seconds: float, via: str
    ) -> Answer:
        """An owner's own MCP client, or the sidecar's shell: asked through the
        registry's asker (Telegram) only, never listed to the sidecar's callers."""
        question = Question(
            via, text, list(options), kind="permission", markdown=True, owner_only=via == "api"
        )
        question.tool_call_id = f"{via}-{question.id}"
        return await ask_owner(self.asks, self.registry, question, seconds, t(f"perm.{via}_label"))

    async def _record(
        self,
        grant: RunGrant | None,
        request: PermissionRequest,
        decision: Decision,
        asked_at: datetime,
        via: str = "mcp",
    ) -> None:
        verdict = "allow" if decision.allow else "deny"
        log.info(
            "permission prompt: delegation=%s decision=%s by=%s",
            grant.delegation_id if grant else "-",
            verdict,
            decision.by,
        )
        if grant is not None:
            grant.decisions.append((request.tool_name, verdict, decision.by))
        context = grant.context if grant is not None else None
        record = ApprovalRecord(
            delegation_id=grant.delegation_id if grant is not None else "",
            tool=request.tool_name[:200],
            input=input_text(request.input),
            decision=verdict,
            decided_by=decision.by,
            asked_at=asked_at,
            answered_at=self.clock(),
            conversation=grant.conversation if grant is not None else via,
            session_id=context.session_id if context is not None else None,
            cli=grant.cli if grant is not None else "",
            rule=decision.rule,
        )
        record_id: int | None = None
        try:
            record_id = await asyncio.shield(self.records.record(record))
        except KernelError as exc:  # the answer still stands; the log says it was not kept
            log.warning("a permission decision was not recorded: %s", type(exc).__name__)
        if self.audit is not None:
            await self.audit.record(
                audit_kinds.APPROVAL_ANSWERED,
                session_id=record.session_id,
                actor="owner" if decision.by == "owner" else "kernel",
                delegation=record.delegation_id or None,
                tool=record.tool,
                decision=verdict,
                by=decision.by,
                rule_used=decision.by == "task_rule",
                rule_added=decision.by == "owner" and bool(decision.rule),
                record=record_id,
            )

    async def _audit_asked(self, grant: RunGrant | None, request: PermissionRequest) -> None:
        """A CLI's (or the owner's own MCP client's) prompt arrived: its tool, and its
        input only as a hash."""
        if self.audit is None:
            return
        context = grant.context if grant is not None else None
        await self.audit.record(
            audit_kinds.APPROVAL_ASKED,
            session_id=context.session_id if context is not None else None,
            actor="model" if grant is not None else "api",
            delegation=grant.delegation_id if grant is not None else None,
            cli=grant.cli if grant is not None else None,
            tool=request.tool_name[:200],
            args_sha256=_input_hash(request.input),
        )

    async def recent(
        self, delegation_id: str | None = None, limit: int = 50
    ) -> list[ApprovalRecord]:
        return await self.records.recent(delegation_id, limit)


def clean(request: PermissionRequest) -> PermissionRequest:
    """The request with lone surrogates (valid JSON, not valid text) replaced by U+FFFD:
    what the owner is shown is what runs, and both can be sent and stored."""
    return replace(request, tool_name=_text(request.tool_name), input=_clean(request.input))


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _text(value: str) -> str:
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _input_hash(data: dict[str, Any]) -> str:
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _cli_label(cli: str) -> str:
    return display_name(cli)
