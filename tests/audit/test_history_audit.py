"""/undo, /rewind and /retry leave the audit whole (issue 23): every earlier row stays,
with its digest, the cut messages are kept (so the rows referencing them still verify),
and each cut and give-back is recorded. A real Kernel, SQLite on disk, the strict
Anthropic simulator."""

from __future__ import annotations

from typing import Any

from kernel.agent.turn_parts import UserInput
from kernel.app import Kernel
from kernel.console.chat import CONVERSATION
from kernel.core.events import Completed, ErrorEvent
from kernel.store.audit import AuditRow
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Text, ToolUse, text_reply

TEMPLATE = UserInput("", channel="console")


async def ask(kernel: Kernel, text: str) -> object:
    await kernel.agent.sessions.wait_idle(CONVERSATION, 30)
    return await kernel.agent.start_turn(CONVERSATION, UserInput(text)).wait()


async def rows(kernel: Kernel) -> list[AuditRow]:
    session = kernel.agent.sessions.current_session(CONVERSATION)
    assert session is not None
    return await kernel.audit.events(session, limit=1000)


def facts(row: AuditRow) -> dict[str, Any]:
    assert row.data is not None
    return row.data


async def assert_whole(kernel: Kernel, earlier: list[AuditRow]) -> list[AuditRow]:
    """Every earlier row is still there, unchanged; both chains verify."""
    now = await rows(kernel)
    kept = {r.id: (r.digest, r.shash, r.raw_data) for r in now}
    for row in earlier:
        assert kept.get(row.id) == (row.digest, row.shash, row.raw_data), row
    assert [r.seq for r in now] == list(range(1, len(now) + 1))
    session = now[0].session_id
    assert (await kernel.audit.verify(session)).as_json() == {
        "ok": True,
        "checked": len(now),
        "pruned": 0,
    }
    assert (await kernel.audit.verify()).ok
    return now


async def test_undo_retry_and_rewind_leave_the_audit_whole(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(
        text_reply("answer one"),
        Reply(Text("noting"), ToolUse("memory_add", {"text": "likes tea"})),
        text_reply("answer two"),
        text_reply("answer three"),
    )
    await ask(kernel, "q-one")
    await ask(kernel, "q-two")
    await ask(kernel, "q-three")
    before = await rows(kernel)
    session = before[0].session_id
    assert session is not None
    first_answer = facts([r for r in before if r.kind == "turn.answered"][0])["messages"][0]["id"]

    # /undo: the last exchange (message and answer) is cut, and said so.
    cut = await kernel.agent.control.undo(CONVERSATION)
    after_undo = await assert_whole(kernel, before)
    undo = after_undo[-1]
    assert (undo.kind, undo.actor) == ("history.cut", "owner")
    assert facts(undo) == {
        "command": "undo",
        "after": facts(before[-3])["messages"][0]["id"] - 1,
        "cut": 2,
        "branch": cut.branch,
    }

    # /retry that works: the last exchange cut, its message run again and marked.
    anthropic_sim.enqueue(text_reply("answer two, again"))
    final = await (await kernel.agent.retry(CONVERSATION, TEMPLATE)).wait()
    assert isinstance(final, Completed) and not final.cancelled
    await kernel.agent.sessions.wait_idle(CONVERSATION, 30)
    after_retry = await assert_whole(kernel, after_undo)
    new = after_retry[len(after_undo) :]
    assert [r.kind for r in new] == [
        "history.cut",
        "message.received",
        "model.call",
        "turn.answered",
    ]
    assert facts(new[0])["command"] == "retry" and facts(new[0])["cut"] == 4
    assert facts(new[1])["retry"] is True and new[1].actor == "owner"

    # /retry the model fails: the retry's own messages are cut, the old exchange back.
    anthropic_sim.enqueue(Error(400, "invalid_request_error", "refused on retry"))
    final = await (await kernel.agent.retry(CONVERSATION, TEMPLATE)).wait()
    assert isinstance(final, ErrorEvent)
    await kernel.agent.sessions.wait_idle(CONVERSATION, 30)
    after_fail = await assert_whole(kernel, after_retry)
    new = after_fail[len(after_retry) :]
    assert [r.kind for r in new] == [
        "history.cut",
        "message.received",
        "model.call",
        "turn.answered",
        "history.restored",
    ]
    restored = facts(new[-1])
    assert restored["command"] == "retry" and restored["branch"] == facts(new[0])["branch"]
    assert restored["restored"] == 2 and restored["cut"] >= 1 and restored["cut_branch"]
    assert facts(new[3])["outcome"] == "failed"

    # /rewind to the first answer: everything after it is cut, nothing deleted.
    await kernel.agent.control.rewind(CONVERSATION, first_answer)
    after_rewind = await assert_whole(kernel, after_fail)
    rewind = after_rewind[-1]
    assert rewind.kind == "history.cut"
    assert facts(rewind)["command"] == "rewind" and facts(rewind)["after"] == first_answer
    assert facts(rewind)["cut"] == 2  # the retried q-two and its answer, given back

    # The messages the earlier rows reference are all still stored.
    transcript = await kernel.store.load_transcript(session)
    stored = {s.id for s in transcript}
    for row in after_rewind:
        for ref in facts(row).get("messages") or []:
            assert ref["id"] in stored
    assert any(s.cut for s in transcript)


async def test_a_rewind_over_http_is_recorded_as_the_api(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(text_reply("answer one"), text_reply("answer two"))
    await ask(kernel, "q-one")
    await ask(kernel, "q-two")
    first = facts([r for r in await rows(kernel) if r.kind == "turn.answered"][0])
    session = kernel.agent.sessions.current_session(CONVERSATION)
    answer = first["messages"][0]["id"]
    await kernel.agent.control.rewind_session(CONVERSATION, session, answer, "api")
    last = (await rows(kernel))[-1]
    assert (last.kind, last.actor, facts(last)["cut"]) == ("history.cut", "api", 2)
