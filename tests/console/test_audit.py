"""``kernel chat``: /audit shows the session's events and a whole record, also after
/retry and /undo cut the history; a bad argument is a ✗ line naming the fix (an
in-process Kernel, SQLite on disk)."""

from __future__ import annotations

import io

from kernel.console.chat import CONVERSATION, ConsoleChat
from kernel.core.i18n import t
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply


async def test_audit_in_the_terminal(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)
    assert await chat.handle("/help")
    assert "⚙️ System: /status /usage /audit /start /help" in out.getvalue()
    mark = len(out.getvalue())
    assert await chat.handle("/help audit")
    assert out.getvalue()[mark:].startswith(f"/audit — {t('help.cmd.audit')}")

    anthropic_sim.enqueue(text_reply("one"), text_reply("two"), text_reply("two again"))
    assert await chat.handle("q-one")
    assert await chat.handle("q-two")
    assert await chat.handle("/retry")
    assert await chat.handle("/undo")
    session = kernel.agent.sessions.current_session(CONVERSATION)
    assert session is not None
    await kernel.audit.record(
        "tool.call", session_id=session, actor="model", tool="memory_list", ok=True
    )
    mark = len(out.getvalue())
    assert await chat.handle("/audit 50")
    shown = out.getvalue()[mark:].splitlines()
    total = len(await kernel.audit.events(session, limit=1000))
    assert shown[0] == f"🧾 The last {total} events of this session:"
    assert shown[-2].startswith(f"#{total} ") and shown[-2].endswith("🔧 tool memory_list ✓")
    assert shown[-1] == f"✅ record whole: {total} events"  # cut history, whole record

    mark = len(out.getvalue())
    assert await chat.handle("/audit everything")
    assert out.getvalue()[mark:].startswith("✗ Unknown argument everything: use /audit")
