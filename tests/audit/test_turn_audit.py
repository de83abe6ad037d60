"""What a turn records in the audit trail (issue 23): a real Kernel, the real SDKs against
the model simulators, SQLite on disk. The exact kinds in order, facts and no text, the
chains verified, then tampered with in the file itself."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from contextlib import closing
from typing import Any

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.core.events import AssistantDelta, Completed, ErrorEvent
from kernel.store.audit import AuditRow
from kernel.store.usage import UsageFilter
from tests.agent.test_cancel import cancel_and_finish, next_event
from tests.agent.test_turns import CONV, Sim, run
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Text, ToolUse, text_reply

SECRET_TEXT = "my-private-question-7f3a"
SECRET_CITY = "Zanzibar-city-91c2"
SECRET_ANSWER = "a-private-forecast-e55d"


def audit_dump(kernel: Kernel) -> str:
    """Every column of every audit row and head, as stored in the real file."""
    with closing(sqlite3.connect(kernel.store.path)) as conn:
        rows = conn.execute("SELECT * FROM audit_events").fetchall()
        heads = conn.execute("SELECT * FROM audit_heads").fetchall()
    return repr(rows) + repr(heads)


def sql(kernel: Kernel, statement: str, *args: object) -> None:
    with closing(sqlite3.connect(kernel.store.path)) as conn:
        conn.execute(statement, args)
        conn.commit()


async def session_rows(kernel: Kernel) -> list[AuditRow]:
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    return await kernel.audit.events(session)


def facts(row: AuditRow) -> dict[str, Any]:
    assert row.data is not None
    return row.data


async def tool_turn(kernel: Kernel, sim: Sim) -> list[AuditRow]:
    @kernel.tools.tool
    def lookup_weather(city: str) -> dict[str, Any]:
        """Current weather for a city.

        Args:
            city: the city
        """
        return {"city": city, "forecast": SECRET_ANSWER}

    sim.enqueue(
        Reply(Text("Let me look."), ToolUse("lookup_weather", {"city": SECRET_CITY})),
        text_reply(f"It is {SECRET_ANSWER}."),
    )
    events = await run(kernel, SECRET_TEXT)
    assert isinstance(events[-1], Completed) and not events[-1].cancelled
    return await session_rows(kernel)


async def test_a_tool_turn_in_order_with_facts_and_no_text(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    rows = await tool_turn(kernel, sim)
    session = rows[0].session_id
    assert [(r.seq, r.kind) for r in rows] == [
        (1, "message.received"),
        (2, "model.call"),
        (3, "tool.call"),
        (4, "model.call"),
        (5, "turn.answered"),
    ]
    assert all(r.session_id == session for r in rows)
    assert [r.id for r in rows] == sorted(r.id for r in rows)
    received, call1, tool, call2, answered = rows
    stored = await kernel.store.load_transcript(session)  # type: ignore[arg-type]

    assert received.actor == "owner"
    got = facts(received)
    assert got["channel"] == "console" and got["parts"] == ["text"]
    assert [m["id"] for m in got["messages"]] == [stored[0].id]
    assert "retry" not in got

    ledger = await kernel.agent.meter.ledger.entries(UsageFilter())
    ids = sorted(e.id for e in ledger)
    for call in (call1, call2):
        f = facts(call)
        assert call.actor == "kernel"
        assert (f["provider"], f["model"], f["purpose"], f["outcome"]) == (
            "main",
            "model-a",
            "turn",
            "ok",
        )
        assert set(f["tokens"]) == {"input", "output", "cache_read", "cache_write"}
        assert f["tokens"]["output"] > 0
        assert f["ledger"] in ids
    assert facts(call1)["ledger"] != facts(call2)["ledger"]

    f = facts(tool)
    assert tool.actor == "model"
    assert (f["tool"], f["step"], f["ok"]) == ("lookup_weather", 1, True)
    assert f["call"] and f["ms"] >= 0 and f["result_chars"] > len(SECRET_ANSWER)
    canon = json.dumps({"city": SECRET_CITY}, sort_keys=True, separators=(",", ":"))
    assert f["args_sha256"] == hashlib.sha256(canon.encode()).hexdigest()
    assert "error" not in f

    f = facts(answered)
    assert (f["outcome"], f["steps"]) == ("answered", 2)
    # Every message the turn stored after the owner's: the tool call, its result, the answer.
    assert [m["id"] for m in f["messages"]] == [m.id for m in stored[1:]]
    assert f["turn"] == facts(received)["turn"]

    dump = audit_dump(kernel)
    for secret in (SECRET_TEXT, SECRET_CITY, SECRET_ANSWER, "Let me look"):
        assert secret not in dump
    assert (await kernel.audit.verify(session)).as_json() == {
        "ok": True,
        "checked": 5,
        "pruned": 0,
    }
    whole = await kernel.audit.verify()
    assert whole.ok and whole.checked >= 5


async def test_an_edited_and_a_deleted_row_are_named(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    rows = await tool_turn(kernel, anthropic_sim)
    session = rows[0].session_id
    tool = rows[2]
    original = tool.raw_data

    # The tool call said to have failed: the row no longer matches its digest.
    sql(
        kernel,
        "UPDATE audit_events SET data = replace(data, 'true', 'false') WHERE id = ?",
        tool.id,
    )
    verdict = await kernel.audit.verify(session)
    assert (verdict.ok, verdict.first_broken_seq, verdict.reason) == (False, 3, "edited")
    whole = await kernel.audit.verify()
    assert (whole.first_broken_seq, whole.reason) == (tool.id, "edited")
    assert whole.as_json()["firstBrokenSeq"] == tool.id

    sql(kernel, "UPDATE audit_events SET data = ? WHERE id = ?", original, tool.id)
    assert (await kernel.audit.verify(session)).ok

    # The first model call removed: its sequence is missing.
    sql(kernel, "DELETE FROM audit_events WHERE id = ?", rows[1].id)
    verdict = await kernel.audit.verify(session)
    assert (verdict.ok, verdict.first_broken_seq, verdict.reason) == (False, 2, "missing")
    assert verdict.as_json()["detail"]
    whole = await kernel.audit.verify()
    assert (whole.first_broken_seq, whole.reason) == (rows[1].id, "missing")


async def test_a_cancelled_turn_is_recorded(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
    sim.enqueue(
        Reply(Text("partial answer that never ends", chunks=["partial ", "x"]), stall_after=4)
    )
    turn = kernel.agent.start_turn(CONV, UserInput(SECRET_TEXT))
    await next_event(turn, AssistantDelta)
    await cancel_and_finish(kernel, turn)

    rows = await session_rows(kernel)
    assert [r.kind for r in rows] == ["message.received", "model.call", "turn.answered"]
    assert facts(rows[1])["outcome"] == "cancelled"
    if isinstance(sim, AnthropicSim):  # message_start reported the input (issue 34)
        assert facts(rows[1])["tokens"]["input"] > 0
    else:
        assert "tokens" not in facts(rows[1])  # no usage was reported: unknown, not zero
    assert facts(rows[2])["outcome"] == "cancelled"
    # The partial reply was kept (marked): it is referenced, not copied.
    assert len(facts(rows[2])["messages"]) == 1
    assert "partial" not in audit_dump(kernel)
    assert (await kernel.audit.verify(rows[0].session_id)).ok


async def test_a_failed_model_call_and_its_turn(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    anthropic_sim.enqueue(*[Error(400, "invalid_request_error", "bad request")] * 3)
    events = await run(kernel, SECRET_TEXT)
    assert isinstance(events[-1], ErrorEvent)

    rows = await session_rows(kernel)
    assert [r.kind for r in rows] == ["message.received", "model.call", "turn.answered"]
    call = facts(rows[1])
    assert call["outcome"] not in ("ok", "cancelled") and call["outcome"]
    assert "ledger" not in call and "tokens" not in call  # nothing billed, no ledger row
    end = facts(rows[2])
    assert end["outcome"] == "failed" and end["code"] == events[-1].code
    assert "messages" not in end
    assert (await kernel.audit.verify(rows[0].session_id)).ok


async def test_a_failing_tool_and_a_cancelled_one(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    started = asyncio.Event()

    @kernel.tools.tool
    def broken(name: str) -> str:
        """Always fails.

        Args:
            name: anything
        """
        raise RuntimeError(name)

    @kernel.tools.tool
    async def slow(name: str) -> str:
        """Takes forever.

        Args:
            name: anything
        """
        started.set()
        await asyncio.sleep(3600)
        return name

    anthropic_sim.enqueue(
        Reply(ToolUse("broken", {"name": SECRET_CITY})), Reply(ToolUse("slow", {"name": "x"}))
    )
    turn = kernel.agent.start_turn(CONV, UserInput(SECRET_TEXT))
    await asyncio.wait_for(started.wait(), 30)
    await cancel_and_finish(kernel, turn)

    rows = await session_rows(kernel)
    assert [r.kind for r in rows] == [
        "message.received",
        "model.call",
        "tool.call",
        "model.call",
        "tool.call",
        "turn.answered",
    ]
    failed, cancelled = facts(rows[2]), facts(rows[4])
    assert (failed["tool"], failed["ok"], failed["error"]) == ("broken", False, "RuntimeError")
    assert (cancelled["tool"], cancelled["ok"], cancelled["error"]) == ("slow", False, "cancelled")
    assert cancelled["step"] == 2
    assert facts(rows[5])["outcome"] == "cancelled"
    assert SECRET_CITY not in audit_dump(kernel)


async def test_a_store_failure_while_recording_does_not_break_the_turn(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    # Every append refused by the database itself, as a full or broken disk would.
    sql(
        kernel,
        "CREATE TRIGGER refuse BEFORE INSERT ON audit_events"
        " BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    anthropic_sim.enqueue(text_reply("still answered"))
    events = await run(kernel, "hello")
    assert isinstance(events[-1], Completed) and events[-1].reply == "still answered"
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    assert [m.text for m in await kernel.store.load_messages(session)] == [
        "hello",
        "still answered",
    ]
    assert kernel.audit.failures >= 3  # received, the model call, the end
    assert await kernel.audit.events(session) == []

    # Once the disk is fine again, recording goes on and the chains verify.
    sql(kernel, "DROP TRIGGER refuse")
    anthropic_sim.enqueue(text_reply("and again"))
    await run(kernel, "again")
    assert [r.kind for r in await kernel.audit.events(session)] == [
        "message.received",
        "model.call",
        "turn.answered",
    ]
    assert (await kernel.audit.verify(session)).ok and (await kernel.audit.verify()).ok


async def test_actors_of_a_guest_cron_and_api_input(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    cases = [
        (UserInput("hi", channel="qq", guest=True), "guest:qq"),
        (UserInput("hi", channel="cron", interactive=False), "cron"),
        (UserInput("hi", channel="console", actor="api", budget_ask=False), "api"),
    ]
    for index, (given, actor) in enumerate(cases):
        anthropic_sim.enqueue(text_reply("ok"))
        conversation = f"actors:{index}"
        await kernel.agent.start_turn(conversation, given).wait()
        session = kernel.agent.sessions.current_session(conversation)
        assert session is not None
        first = (await kernel.audit.events(session))[0]
        assert (first.kind, first.actor) == ("message.received", actor)
        assert facts(first)["channel"] == given.channel


def test_parts_of_an_input() -> None:
    from kernel.agent.slimming import wrap_file
    from kernel.agent.trail import parts_of
    from kernel.core.messages import ImageBlock

    image = ImageBlock("image/png", "aGk=")
    assert parts_of(UserInput("hi")) == ["text"]
    assert parts_of(UserInput("", images=[image])) == ["photo"]
    assert parts_of(UserInput("look", images=[image])) == ["photo", "text"]
    assert parts_of(UserInput("", attached=(wrap_file("a.txt", "body ] text"),))) == ["file"]
    filed = UserInput("summarise", attached=(wrap_file("a.txt", "body"),))
    assert parts_of(filed) == ["file", "text"]
    assert parts_of(UserInput("", attached=("[语音: hello there]",))) == ["voice"]
    assert parts_of(UserInput("caption", attached=("[语音: hello]",))) == ["voice", "text"]
    # The owner's own words that look like a file or a voice note are text.
    assert parts_of(UserInput("[语音: hello]\n" + wrap_file("a.txt", "body"))) == ["text"]


async def test_a_lone_surrogate_in_a_tool_call_is_recorded_not_a_crash(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    """A model may send a broken surrogate in a tool's arguments: the audit hashes and
    stores the call like any other (review R2: it was an internal error). The next
    request carries it as U+FFFD (issue 33: the SDK's JSON refused it, the turn ended
    as bad_response): the turn is answered."""
    kernel = await make_kernel(sim)

    @kernel.tools.tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: the text
        """
        return "ok"

    sim.enqueue(Reply(ToolUse("echo", {"text": "x\ud83d"})), text_reply("done"))
    events = await run(kernel, "go")
    assert isinstance(events[-1], Completed) and events[-1].reply == "done"
    assert len(sim.requests) == 2 and "\ud83d" not in sim.requests[-1].raw.decode()
    rows = await session_rows(kernel)
    [call] = [facts(r) for r in rows if r.kind == "tool.call"]
    assert call["tool"] == "echo" and call["ok"] is True and len(call["args_sha256"]) == 64
    assert [r.kind for r in rows][-1] == "turn.answered"
    assert (await kernel.audit.verify(rows[0].session_id)).ok


async def test_an_edited_tool_result_or_tool_call_breaks_the_record(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    """Review R1: the tool call's arguments and its result are messages too; rewriting
    either in SQLite is named by verify (message_edited at the turn's end row)."""
    kernel = await make_kernel(sim)
    rows = await tool_turn(kernel, sim)
    session = rows[0].session_id
    assert (await kernel.audit.verify(session)).ok
    [answered] = [r for r in rows if r.kind == "turn.answered"]
    refs = [m["id"] for m in facts(answered)["messages"]]
    with closing(sqlite3.connect(kernel.store.path)) as conn:
        [(content,)] = conn.execute("SELECT content FROM messages WHERE id = ?", (refs[1],))
        assert SECRET_ANSWER in content  # the tool's result
    sql(
        kernel,
        "UPDATE messages SET content = ? WHERE id = ?",
        content.replace(SECRET_ANSWER, "sunny-forged"),
        refs[1],
    )
    verdict = await kernel.audit.verify(session)
    assert (verdict.ok, verdict.first_broken_seq, verdict.reason) == (
        False,
        answered.seq,
        "message_edited",
    )
