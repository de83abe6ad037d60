"""``kernel tui`` over an in-process Kernel core, driven headless by Textual's pilot: the
real agent, the Anthropic SDK against the simulator, SQLite on disk."""

from __future__ import annotations

import sqlite3

import pytest

from kernel.core.events import ErrorEvent, ModelSwitched, PlanUpdated
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Stall, Text, ToolUse, text_reply, tool_reply
from tests.tui.conftest import TEXTUAL_MISSING, lines, send, until

pytest.importorskip("textual", reason=TEXTUAL_MISSING)

from kernel.tui.app import KernelTui  # noqa: E402
from kernel.tui.local import LocalBackend  # noqa: E402
from kernel.tui.screens import AskScreen, AuditScreen, TextLine  # noqa: E402


def roles(request_body: dict[str, object]) -> list[str]:
    messages = request_body["messages"]
    assert isinstance(messages, list)
    return [m["role"] for m in messages]


async def test_a_conversation_with_a_tool_then_a_held_turn_cancelled_with_esc(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(
        Reply(Text("Noting that."), ToolUse("memory_add", {"text": "The owner likes tea"})),
        text_reply("Saved: you like tea."),
        Stall(),
        text_reply("Still here."),
    )
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        assert lines(app) == []  # a fresh database: a new chat is open
        await send(pilot, "I like tea, remember it")
        await until(pilot, lambda: "Saved: you like tea." in lines(app, "assistant"))
        assert lines(app, "owner") == ["› I like tea, remember it"]
        assert any(line.startswith("⚙ memory_add(") for line in lines(app, "tool"))
        assert any(line.startswith("  ✓ ") for line in lines(app, "tool"))
        assert "Noting that." in lines(app, "assistant")
        # the chat is stored and listed
        await until(pilot, lambda: not app.busy and app.chat.stored)
        assert [c.session for c in app.chat_list] == [app.chat.session]

        # a turn the model holds (the simulator answers nothing): Esc cancels it
        await send(pilot, "and now something slow")
        await until(pilot, lambda: len(anthropic_sim.requests) == 3 and app.busy)
        await pilot.press("escape")
        await until(pilot, lambda: "[Cancelled]" in lines(app, "note"))
        await until(pilot, lambda: not app.busy)

        # the history is valid: the next message is answered, roles alternating
        await send(pilot, "are you there?")
        await until(pilot, lambda: "Still here." in lines(app, "assistant"))
        sent = roles(anthropic_sim.requests[-1].body)
        assert sent[0] == "user" and sent[-1] == "user"
        assert all(a != b for a, b in zip(sent, sent[1:], strict=False))
    assert [m.text for m in await kernel.store.list_memories()] == ["The owner likes tea"]


async def test_reopening_a_chat_shows_its_history_and_a_new_chat_is_empty(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(text_reply("First answer."))
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        await send(pilot, "first question")
        await until(pilot, lambda: not app.busy and app.chat.stored)
        await pilot.press("f2")  # a new chat
        await until(pilot, lambda: not app.chat.stored and lines(app) == [])
        await send(pilot, "/new")  # also a new chat, never a message
        assert len(anthropic_sim.requests) == 1
        # the stored chat, opened from the list: its history
        app.query_one("#chats").index = 1
        app.query_one("#chats").focus()
        await pilot.press("enter")
        await until(pilot, lambda: "First answer." in lines(app, "assistant"))
        assert lines(app, "owner") == ["› first question"]


async def test_a_question_is_answered_in_the_modal(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(
        tool_reply("ask_user", {"question": "Tea or coffee?", "options": ["Tea", "[b]Coffee"]}),
        text_reply("Coffee it is."),
    )
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        await send(pilot, "ask me")
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, AskScreen)
                and bool(app.screen.query("#question"))
                and len(app.screen.query("Button")) == 2
            ),
        )
        modal = app.screen
        assert modal.query_one("#question", TextLine).text == "Tea or coffee?"
        labels = [str(b.label) for b in modal.query("Button")]
        assert labels == ["1  Tea", "2  [b]Coffee"]  # markup in an option shows literally
        await pilot.press("2")
        await until(pilot, lambda: "Coffee it is." in lines(app, "assistant"))
        assert "→ [b]Coffee" in lines(app, "note")
        assert not isinstance(app.screen, AskScreen)
    result = anthropic_sim.requests[1].body["messages"][-1]["content"][0]
    assert "[b]Coffee" in str(result["content"]) and not result.get("is_error")


async def test_esc_over_an_open_question_cancels_the_turn(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    """Review R3: the modal swallowed Esc; it cancels the turn that asks, as elsewhere."""
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(tool_reply("ask_user", {"question": "Tea?", "options": ["Yes", "No"]}))
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        await send(pilot, "ask me")
        await until(pilot, lambda: isinstance(app.screen, AskScreen))
        await pilot.press("escape")
        await until(pilot, lambda: "[Cancelled]" in lines(app, "note"))
        await until(pilot, lambda: not isinstance(app.screen, AskScreen) and not app.busy)


async def test_the_audit_key_shows_the_chats_events_and_the_verify_line(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(text_reply("Hello."))
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        await pilot.press("f3")  # a new chat has no record yet: nothing opens
        assert not isinstance(app.screen, AuditScreen)
        await send(pilot, "hi")
        await until(pilot, lambda: not app.busy and app.chat.stored)
        session = app.chat.session
        assert session is not None
        # the recorders of the turn are other parts' work: record what they would
        await kernel.audit.record("message.received", session_id=session, actor="owner")
        await kernel.audit.record("tool.call", session_id=session, actor="model", tool="x")
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen))
        rows = [w.text for w in app.screen.query(".audit-row")]
        assert len(rows) >= 2  # the turn's own records (other parts' work) come first
        assert [row.split()[0] for row in rows] == [f"#{n}" for n in range(1, len(rows) + 1)]
        assert "tool" in rows[-1]
        verdict = app.screen.query_one("#verdict", TextLine).text
        assert verdict.startswith("✅") and str(len(rows)) in verdict
        # a row edited in the database: the verify line names it
        with sqlite3.connect(kernel.config.data_dir / "kernel.db") as db:
            db.execute(
                "UPDATE audit_events SET data = '{}' WHERE session_id = ? AND seq = ?",
                (session, len(rows)),
            )
        db.close()
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, AuditScreen))
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen))
        verdict = app.screen.query_one("#verdict", TextLine).text
        assert verdict.startswith("⚠️") and f"#{len(rows)}" in verdict
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, AuditScreen))
        # typed into the input, "a" is a letter, not the audit key
        await pilot.press("a")
        assert app.query_one("#input").value == "a"
        assert not isinstance(app.screen, AuditScreen)


async def test_markup_in_a_reply_and_a_title_shows_literally(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    reply = "[bold]not bold[/bold] and [link=https://example.invalid]a link[/link] [/]"
    anthropic_sim.enqueue(text_reply(reply))
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        await send(pilot, "say it [red]plainly")
        await until(pilot, lambda: not app.busy and app.chat.stored)
        [shown] = [w for w in app.query("#conversation TextLine.assistant")]
        assert shown.text == reply
        assert shown.render().plain == reply  # drawn as those characters, no styles
        assert lines(app, "owner") == ["› say it [red]plainly"]
        await kernel.store.set_title(app.chat.session or 0, "[b]Tea[/b] talk")
        await app.refresh_chats()
        await pilot.pause()
        labels = [w.text for w in app.query("#chats TextLine")]
        assert any(label.startswith("[b]Tea[/b] talk") for label in labels)


async def test_ctrl_q_during_a_turn_cancels_it_first(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(Stall())
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        await send(pilot, "something slow")
        await until(pilot, lambda: len(anthropic_sim.requests) == 1 and app.busy)
        await pilot.press("ctrl+q")
        # The quit cancels the turn and waits for its end, which the app still shows.
        await until(pilot, lambda: "[Cancelled]" in lines(app, "note") or not app.is_running)
        assert "[Cancelled]" in lines(app, "note")
        await until(pilot, lambda: not app.is_running)
    assert app.return_value == 0
    # the turn ended cancelled, with the owner's message stored
    [row] = await kernel.store.list_sessions()
    stored = await kernel.store.load_transcript(row.id)
    assert stored[0].message.role == "user"
    assert not kernel.agent.sessions.is_busy(f"session:{row.id}")
    # Cancelled by the quit itself, before the app exited (review R3: a bare exit passed).
    ends = [r for r in await kernel.audit.events(row.id) if r.kind == "turn.answered"]
    assert [(r.data or {}).get("outcome") for r in ends] == ["cancelled"]


async def test_cancel_typed_as_a_command(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(Stall())
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        await send(pilot, "something slow")
        await until(pilot, lambda: len(anthropic_sim.requests) == 1 and app.busy)
        await send(pilot, "another message")  # one turn at a time
        assert lines(app, "note")[-1].startswith("Still working")
        await send(pilot, "/cancel")
        await until(pilot, lambda: "[Cancelled]" in lines(app, "note") and not app.busy)
        await send(pilot, "/bogus")
        assert lines(app, "note")[-1].startswith("Unknown command /bogus")
        assert len(anthropic_sim.requests) == 1


async def test_the_plan_a_model_switch_and_an_error_in_words(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    """The events as both backends hand them over (the wire shape of /agent/process)."""
    kernel = await make_kernel(anthropic_sim, language="en")
    app = KernelTui(LocalBackend(kernel))
    async with app.run_test() as pilot:
        plan = app.query_one("#plan", TextLine)
        assert not plan.display
        items = [
            {"content": "Read the [b]notes[/b]", "status": "in_progress"},
            {"content": "Write the summary", "status": "pending"},
        ]
        app.show(PlanUpdated(1, items))
        await pilot.pause()
        assert plan.display
        assert plan.text == "Plan\n▶ Read the [b]notes[/b]\n☐ Write the summary"
        items[0]["status"], items[1]["status"] = "completed", "in_progress"
        app.show(PlanUpdated(2, items))
        assert plan.text == "Plan\n☑ Read the [b]notes[/b]\n▶ Write the summary"
        app.show(ModelSwitched(1, "main:model-a", "main:model-b", "overloaded_error"))
        assert "main:model-b" in lines(app, "note")[-1]
        app.show(ErrorEvent(1, "x", "[b]boom"))
        assert lines(app, "error") == ["✗ [b]boom"]
