"""A Telegram turn in the audit trail (issue 23): the real PTB Application against the
Bot API simulator, the anthropic SDK against the model simulator, SQLite on disk. The
turn's rows in its session's chain; each outbox row finished (sent, refused, expired)
in the global chain; never a text."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import timedelta
from typing import Any

from kernel.store.audit import AuditRow
from kernel.telegram.outbox import Undeliverable, plain_items
from tests.sim.script import Reply, Text, ToolUse, text_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import CONV, BotHarness, Factory

SECRET_TEXT = "owner-secret-words-41d9"
SECRET_ARG = "argument-secret-0b7e"
SECRET_REPLY = "reply-secret-c2a8"


def audit_dump(h: BotHarness) -> str:
    with closing(sqlite3.connect(h.kernel.store.path)) as conn:
        rows = conn.execute("SELECT * FROM audit_events").fetchall()
        heads = conn.execute("SELECT * FROM audit_heads").fetchall()
    return repr(rows) + repr(heads)


def facts(row: AuditRow) -> dict[str, Any]:
    assert row.data is not None
    return row.data


async def outbox_rows(h: BotHarness, after: int = 0) -> list[AuditRow]:
    rows = await h.kernel.audit.events(limit=1000)
    return [r for r in rows if r.kind.startswith("outbox.") and r.id > after]


async def test_a_telegram_tool_turn_and_its_deliveries(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(
        Reply(Text("checking"), ToolUse("memory_search", {"query": SECRET_ARG})),
        text_reply(SECRET_REPLY),
    )
    assert (await h.converse(SECRET_TEXT)).endswith(SECRET_REPLY)
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None

    turn = await h.kernel.audit.events(session)
    assert [(r.seq, r.kind) for r in turn] == [
        (1, "message.received"),
        (2, "model.call"),
        (3, "tool.call"),
        (4, "model.call"),
        (5, "turn.answered"),
    ]
    received = facts(turn[0])
    assert turn[0].actor == "owner"
    assert (received["channel"], received["parts"]) == ("telegram", ["text"])
    assert facts(turn[2])["tool"] == "memory_search" and facts(turn[2])["ok"] is True
    assert facts(turn[4])["outcome"] == "answered"

    # Every outbox row of the turn finished and was recorded, in the global chain only.
    sent = await outbox_rows(h)
    assert sent and all(r.kind == "outbox.sent" and r.session_id is None for r in sent)
    assert all(r.seq is None for r in sent)
    assert len({facts(r)["row"] for r in sent}) == len(sent)  # one row each
    for row in sent:
        f = facts(row)
        assert f["outcome"] == "sent" and f["action"] in ("send", "edit", "delete")
        assert f["chat"] == str(OWNER) and f["attempts"] >= 1
    final = h.bot_messages()[-1]
    assert any(facts(r).get("message") == final.message_id for r in sent)
    # The reply was delivered after the turn ended: its row comes after turn.answered.
    delivered = [r for r in sent if facts(r).get("message") == final.message_id]
    assert max(r.id for r in delivered) > turn[-1].id

    dump = audit_dump(h)
    for secret in (SECRET_TEXT, SECRET_ARG, SECRET_REPLY, "checking"):
        assert secret not in dump
    assert (await h.kernel.audit.verify(session)).ok
    assert (await h.kernel.audit.verify()).ok


async def test_refused_and_expired_rows_are_recorded_failed(bot: Factory) -> None:
    h = await bot()
    outbox = h.channel.outbox
    last = max([r.id for r in await h.kernel.audit.events(limit=1000)], default=0)

    h.tg.fail("sendMessage", status=403, times=1)
    try:
        await outbox.send(OWNER, plain_items(SECRET_TEXT)[0])
    except Undeliverable as exc:
        assert exc.state == "failed"
    else:
        raise AssertionError("a forbidden send must not be delivered")
    [refused] = await outbox_rows(h, last)
    assert refused.kind == "outbox.failed"
    assert facts(refused)["outcome"] == "forbidden" and facts(refused)["attempts"] == 1

    # Queued already past its time: it expires undelivered, and the owner is told once.
    shown = len(h.bot_messages())
    ticket = await outbox.put(OWNER, plain_items(SECRET_REPLY), expiry=timedelta(seconds=-1))
    assert await ticket.states() == ["expired"]
    await h.tg.wait_until(lambda: len(h.bot_messages()) > shown)  # the notice
    await h.tg.wait_until(lambda: not outbox.backlog(OWNER))  # and its row finished
    rows = await outbox_rows(h, refused.id)
    expired = [r for r in rows if r.kind == "outbox.failed"]
    assert [facts(r)["outcome"] for r in expired] == ["expired"]
    assert facts(expired[0])["row"] == ticket.ids[0]
    notices = [r for r in rows if r.kind == "outbox.sent"]
    assert [facts(r)["notice"] for r in notices] == ["undelivered"]

    dump = audit_dump(h)
    assert SECRET_TEXT not in dump and SECRET_REPLY not in dump
    assert (await h.kernel.audit.verify()).ok
