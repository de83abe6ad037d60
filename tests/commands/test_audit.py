"""/audit on a real Kernel (SQLite on disk, the model simulator): the session's last
events in words with its chain's verdict, /audit all for the global chain, a broken
record named, and refusals that name the fix."""

from __future__ import annotations

import sqlite3
from contextlib import closing

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.commands import SHARED, Commands
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply

A, B = "console:a", "console:b"


async def converse(kernel: Kernel, conversation: str, text: str) -> int:
    async for _ in kernel.agent.start_turn(conversation, UserInput(text, channel="console")):
        pass
    session = kernel.agent.sessions.current_session(conversation)
    assert session is not None
    return session


async def text_of(commands: Commands, conversation: str, arg: str = "") -> tuple[str, bool]:
    reply = await commands.run(conversation, "audit", arg)
    assert reply is not None
    return reply.text, reply.error


async def test_audit_of_this_session_and_of_everything(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    assert "audit" in SHARED
    commands = Commands(kernel)
    assert await text_of(commands, A) == (
        "This chat has no session yet: send a message first, or see the whole record"
        " with /audit all",
        False,
    )
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"))
    a = await converse(kernel, A, "first")
    b = await converse(kernel, B, "other")
    audit = kernel.audit
    base = len(await audit.events(a, limit=1000))  # what the recorders wrote for the turn
    await audit.record(
        "tool.call", session_id=a, actor="model", tool="memory_search", ok=True, ms=120
    )
    await audit.record("cron.missed", job_id="daily-news", reason="down")
    await audit.record(
        "tool.call", session_id=b, actor="model", tool="web_fetch", ok=False, error="timeout"
    )
    await audit.record("turn.answered", session_id=a, outcome="cancelled")

    text, error = await text_of(commands, A, "2")
    lines = text.splitlines()
    assert not error and lines[0] == "🧾 The last 2 events of this session:"
    assert lines[1].startswith(f"#{base + 1} ") and lines[1].endswith(
        "🔧 tool memory_search ✓ 120 ms"
    )
    assert lines[2].startswith(f"#{base + 2} ") and lines[2].endswith("💬 turn cancelled")
    assert lines[3] == f"✅ record whole: {base + 2} events"
    assert "web_fetch" not in text and "daily-news" not in text  # another chain's

    text, _ = await text_of(commands, B, "all")
    lines = text.splitlines()
    assert lines[0].startswith("🧾 The last ") and "of the whole record" in lines[0]
    assert any(line.endswith("⏰ cron job daily-news missed: Kernel was down") for line in lines)
    total = len(await audit.events(None, limit=1000))
    assert lines[-1] == f"✅ record whole: {total} events"
    text, _ = await text_of(commands, B, "ALL 1")
    assert text.splitlines()[1].startswith(f"#{total} ") and len(text.splitlines()) == 3

    # A row edited in the file: /audit names the first broken row and why.
    [row] = [r for r in await audit.events(a, limit=1000) if r.kind == "tool.call"]
    with closing(sqlite3.connect(kernel.store.path)) as conn:
        conn.execute(
            "UPDATE audit_events SET data = replace(data, 'memory_search', 'memory_delete')"
            " WHERE id = ?",
            (row.id,),
        )
        conn.commit()
    text, _ = await text_of(commands, A)
    assert "memory_delete" in text
    assert text.splitlines()[-1] == (
        f"⚠️ record broken at #{row.seq}: the row was changed after it was written"
    )
    text, _ = await text_of(commands, A, "all")
    assert text.splitlines()[-1] == (
        f"⚠️ record broken at #{row.id}: the row was changed after it was written"
    )


async def test_refusals_name_the_fix(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    commands = Commands(kernel)
    for arg in ("0", "51", "ten", "all 2 3", "-1", "²", "9" * 400):
        text, error = await text_of(commands, A, arg)
        assert error, arg
        assert text.endswith("use /audit, /audit N (1–50) or /audit all [N]"), text
        assert len(text) < 200
    text, error = await text_of(commands, A, "all 50")
    # A fresh Kernel's record: the audit key's own first row (issue 33).
    assert not error and text.splitlines()[-1] == "✅ record whole: 1 events"
