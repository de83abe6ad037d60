"""/audit in the Telegram simulator after a real turn: the chat's events in plain words
and the proof line, split into several messages when long, listed by /help (not among
the menu's ten)."""

from __future__ import annotations

from tests.sim.script import text_reply
from tests.telegram.conftest import CONV, Factory


async def test_audit_shows_the_chats_events_and_its_proof(bot: Factory) -> None:
    h = await bot()
    h.model.enqueue(text_reply("Hello!"))
    assert await h.converse("hi") == "Hello!"
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None
    audit = h.kernel.audit
    await audit.record(
        "tool.call", session_id=session, actor="model", tool="memory_search", ok=True, ms=120
    )
    await audit.record("cron.missed", job_id="daily-news", reason="down")  # not this chat's

    text = await h.ask("/audit 1")
    lines = text.splitlines()
    assert lines[0] == "🧾 The last 1 events of this session:"
    assert lines[1].startswith("#") and lines[1].endswith("🔧 tool memory_search ✓ 120 ms")
    total = len(await audit.events(session, limit=1000))
    assert lines[2] == f"✅ record whole: {total} events"
    assert "daily-news" not in text

    assert (await h.ask("/audit soon")).startswith("Unknown argument soon: use /audit")

    # 50 long events: more than one Telegram message holds, sent as several.
    for n in range(50):
        await audit.record(
            "config.changed", session_id=session, keys=[f"providers.p{n}.models"] * 8
        )
    before = len(h.tg.calls_to("sendMessage"))
    h.tg.inject_text("/audit 50")
    await h.tg.wait_until(lambda: "✅ record whole" in h.texts()[-1])
    sent = [str(c.params["text"]) for c in h.tg.calls_to("sendMessage")[before:]]
    assert len(sent) >= 2 and all(len(s) <= 4096 for s in sent)
    joined = "\n".join(sent)
    assert joined.count("⚙️ configuration changed") == 50

    # Not among the menu's ten (issue 34); /help lists it, /help audit explains it.
    menu = h.tg.calls_to("setMyCommands")[-1].params["commands"]
    assert "audit" not in [c["command"] for c in menu]
    assert "⚙️ System: /status /usage /audit" in await h.ask("/help")
    assert (await h.ask("/help audit")).startswith("/audit — Recent actions on record")
