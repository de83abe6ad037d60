"""Approvals: one run's prompts decided by the owner, remembered for the task, recorded."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel.core.asks import Answer, AskOutcome, AskRegistry, Question
from kernel.core.delivery import ChannelRegistry
from kernel.core.events import AskUser
from kernel.delegate.approvals import Approvals, RunGrant, clean
from kernel.delegate.permission import PermissionRequest
from kernel.store.db import Store
from kernel.tools.registry import ToolContext
from tests.waiting import wait_until


class Owner:
    """The ``ask`` of a turn: questions land here, the test answers them."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        self.answers: asyncio.Queue[Answer] = asyncio.Queue()

    async def ask(self, question: str, options: list[str], **kw: Any) -> Answer:
        self.asked.append({"question": question, "options": options, **kw})
        return await self.answers.get()


@pytest.fixture
async def approvals(tmp_path: Path) -> AsyncIterator[Approvals]:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        yield Approvals(store, AskRegistry(), ChannelRegistry(), timeout=30)
    finally:
        await store.close()


def bash(command: str) -> PermissionRequest:
    return PermissionRequest("Bash", {"command": command}, "toolu_1")


def grant_for(approvals: Approvals, owner: Owner | None, **kw: Any) -> RunGrant:
    context = ToolContext(conversation="telegram:1", session_id=3, ask=owner.ask if owner else None)
    return approvals.open("20261126-101500-abc123", "claude_code", context, timeout=45, **kw)


async def test_allow_once_then_deny_each_asked_and_recorded(approvals: Approvals) -> None:
    owner = Owner()
    grant = grant_for(approvals, owner)
    await owner.answers.put(Answer(AskOutcome.ANSWERED, 0))
    first = await approvals.decide(grant, bash("git status"))
    assert (first.allow, first.by) == (True, "owner")
    assert first.as_claude(bash("git status")) == {
        "behavior": "allow",
        "updatedInput": {"command": "git status"},
    }
    await owner.answers.put(Answer(AskOutcome.ANSWERED, 2))
    second = await approvals.decide(grant, bash("git status"))  # allowed once: asked again
    assert (second.allow, second.by) == (False, "owner")
    assert second.as_claude(bash("x"))["behavior"] == "deny"
    assert "denied" in second.as_claude(bash("x"))["message"]
    assert len(owner.asked) == 2
    asked = owner.asked[0]
    assert asked["kind"] == "permission" and asked["markdown"] is True
    assert asked["seconds"] == 45 and len(asked["options"]) == 3
    assert "git status" in asked["question"]
    records = await approvals.recent(grant.delegation_id)
    assert [(r.decision, r.decided_by) for r in records] == [("deny", "owner"), ("allow", "owner")]
    assert records[0].session_id == 3 and records[0].conversation == "telegram:1"
    assert grant.summary() == [
        {"tool": "Bash", "decision": "allow", "by": "owner"},
        {"tool": "Bash", "decision": "deny", "by": "owner"},
    ]


async def test_allow_for_this_task_passes_the_same_pattern_without_asking(
    approvals: Approvals,
) -> None:
    owner = Owner()
    grant = grant_for(approvals, owner)
    await owner.answers.put(Answer(AskOutcome.ANSWERED, 1))
    added = await approvals.decide(grant, bash("git status"))
    assert (added.allow, added.rule) == (True, "Bash(git status:*)")
    again = await approvals.decide(grant, bash("git status --short"))
    assert (again.allow, again.by, again.rule) == (True, "task_rule", "Bash(git status:*)")
    assert len(owner.asked) == 1
    await owner.answers.put(Answer(AskOutcome.ANSWERED, 2))
    other = await approvals.decide(grant, bash("git status; rm -rf ~"))  # compound: asked
    assert not other.allow and len(owner.asked) == 2
    # Another run starts with no rules.
    fresh = grant_for(approvals, owner)
    await owner.answers.put(Answer(AskOutcome.ANSWERED, 2))
    assert not (await approvals.decide(fresh, bash("git status"))).allow


async def test_timeout_undelivered_and_nobody_deny(approvals: Approvals) -> None:
    owner = Owner()
    grant = grant_for(approvals, owner)
    await owner.answers.put(Answer(AskOutcome.TIMEOUT))
    timed_out = await approvals.decide(grant, bash("make"))
    assert (timed_out.allow, timed_out.by) == (False, "timeout")
    assert "45 s" in timed_out.message
    await owner.answers.put(Answer(AskOutcome.UNDELIVERED))
    assert (await approvals.decide(grant, bash("make"))).by == "undelivered"
    nobody = grant_for(approvals, None)
    decision = await approvals.decide(nobody, bash("make"))
    assert (decision.allow, decision.by) == (False, "nobody")


async def test_closing_the_run_denies_open_prompts_and_expires_its_token(
    approvals: Approvals,
) -> None:
    owner = Owner()
    held: list[str] = []

    @contextlib.contextmanager
    def hold() -> Iterator[None]:
        held.append("on")
        try:
            yield
        finally:
            held.append("off")

    grant = grant_for(approvals, owner, hold=hold)
    assert approvals.resolve(grant.token) is grant
    waiting = asyncio.ensure_future(approvals.decide(grant, bash("make test")))
    await wait_until(lambda: bool(owner.asked))
    assert held == ["on"]  # the CLI's clock stands still while the owner decides
    approvals.close(grant)
    decision = await waiting
    assert (decision.allow, decision.by) == (False, "cancelled")
    assert held == ["on", "off"]
    assert approvals.resolve(grant.token) == "expired"
    assert approvals.resolve("not-a-token") is None
    late = await approvals.decide(grant, bash("make"))  # a prompt after the end
    assert (late.allow, late.by) == (False, "cancelled")
    assert [r.decided_by for r in await approvals.recent()] == ["cancelled", "cancelled"]


async def test_the_callers_cancellation_withdraws_the_question(approvals: Approvals) -> None:
    owner = Owner()
    grant = grant_for(approvals, owner)
    waiting = asyncio.ensure_future(approvals.decide(grant, bash("make")))
    await wait_until(lambda: bool(owner.asked))
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not grant._pending
    [record] = await approvals.recent(grant.delegation_id)  # still on the record
    assert (record.decision, record.decided_by) == ("deny", "cancelled")
    assert grant.summary() == [{"tool": "Bash", "decision": "deny", "by": "cancelled"}]


class Asker:
    def __init__(self) -> None:
        self.shown: list[tuple[AskUser, str]] = []
        self.settled: list[str] = []

    async def show(self, event: AskUser, label: str, where: str = "") -> None:
        self.shown.append((event, label))

    async def settle(self, tool_call_id: str) -> None:
        self.settled.append(tool_call_id)


async def test_an_owners_own_mcp_client_is_asked_through_the_registrys_asker(
    approvals: Approvals,
) -> None:
    nobody = await approvals.decide(None, bash("ls"))
    assert (nobody.allow, nobody.by) == (False, "undelivered")
    asker = Asker()
    approvals.registry.asker = asker
    waiting = asyncio.ensure_future(approvals.decide(None, bash("ls")))
    await wait_until(lambda: bool(asker.shown))
    event, _ = asker.shown[0]
    assert event.markdown and event.kind == "permission"
    [question] = approvals.asks.waiting()
    assert isinstance(question, Question) and question.conversation == "mcp"
    assert len(question.options) == 2  # no task whose rules could keep an answer
    assert "Bash(" not in question.text  # so no rule is offered either
    approvals.asks.answer(question.id, 0)
    decision = await waiting
    assert (decision.allow, decision.by) == (True, "owner")
    assert asker.settled == [event.tool_call_id]
    [record] = [r for r in await approvals.recent() if r.decision == "allow"]
    assert record.delegation_id == "" and record.conversation == "mcp"


async def test_a_flood_of_prompts_is_cut_and_every_one_recorded(approvals: Approvals) -> None:
    owner = Owner()
    grant = grant_for(approvals, owner)
    waiting = [asyncio.ensure_future(approvals.decide(grant, bash(f"echo {n}"))) for n in range(3)]
    await wait_until(lambda: len(owner.asked) == 3)
    flooded = await approvals.decide(grant, bash("echo 4"))  # asked nobody
    assert (flooded.allow, flooded.by) == (False, "too_many")
    assert "one at a time" in flooded.message and len(owner.asked) == 3
    for _ in waiting:
        await owner.answers.put(Answer(AskOutcome.ANSWERED, 2))
    await asyncio.gather(*waiting)
    assert len(await approvals.recent(grant.delegation_id)) == 4


async def test_inputs_no_text_was_made_for_are_denied_and_recorded(approvals: Approvals) -> None:
    owner = Owner()
    grant = grant_for(approvals, owner)
    # A URL urlsplit refuses: no host rule, the owner is asked about this input.
    await owner.answers.put(Answer(AskOutcome.ANSWERED, 0))
    fetch = PermissionRequest("WebFetch", {"url": "https://[::1"})
    assert (await approvals.decide(grant, fetch)).allow
    # A lone surrogate (valid JSON, not valid text) is shown and run as U+FFFD.
    await owner.answers.put(Answer(AskOutcome.ANSWERED, 0))
    edit = PermissionRequest(
        "Edit", {"file_path": "/a\ud800", "old_string": "x", "new_string": "y"}
    )
    decision = await approvals.decide(grant, edit)
    assert decision.allow
    assert decision.as_claude(clean(edit))["updatedInput"]["file_path"] == "/a\ufffd"
    assert "\ud800" not in owner.asked[-1]["question"]

    # Whatever breaks while making the prompt denies it, on the record.
    class Unprintable:
        def __str__(self) -> str:
            raise ValueError("no text")

    broken = PermissionRequest("Bash", {"command": Unprintable()})
    failed = await approvals.decide(grant, broken)
    assert (failed.allow, failed.by) == (False, "error")
    assert [r.decided_by for r in await approvals.recent(grant.delegation_id)][0] == "error"


async def test_the_owners_mcp_clients_second_button_denies_and_their_prompts_are_capped(
    approvals: Approvals,
) -> None:
    asker = Asker()
    approvals.registry.asker = asker
    waiting = asyncio.ensure_future(approvals.decide(None, bash("ls")))
    await wait_until(lambda: bool(asker.shown))
    [question] = approvals.asks.waiting()
    approvals.asks.answer(question.id, 1)
    decision = await waiting
    assert (decision.allow, decision.by) == (False, "owner")
    # Ten at once: three are asked, seven denied before any is shown.
    many = [asyncio.ensure_future(approvals.decide(None, bash(f"echo {n}"))) for n in range(10)]
    await wait_until(lambda: len(approvals.asks.waiting()) == 3)
    # (the seven denials are recorded in the store first: a thread, not a loop turn)
    await wait_until(lambda: sum(d.done() for d in many) >= 7, what="seven decided")
    assert len(approvals.asks.waiting()) == 3
    done = [d for d in many if d.done()]
    assert len(done) == 7 and all(d.result().by == "too_many" for d in done)
    for q in approvals.asks.waiting():
        approvals.asks.answer(q.id, 1)
    await asyncio.gather(*many)
