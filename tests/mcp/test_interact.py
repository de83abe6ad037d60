"""End to end, what a running MCP tool does besides returning: recorded real result
shapes reaching the model once, progress notifications (turn events and the edited
Telegram message), sampling answered by the model simulator, elicitation answered by a
Telegram button press."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from kernel.agent.agent import UserInput
from kernel.config import ModelPrice
from kernel.core.event_wire import event_to_dict
from kernel.core.events import (
    AskUser,
    Completed,
    ErrorEvent,
    ToolProgress,
    ToolResult,
)
from kernel.store.usage import UsageFilter
from kernel.telegram.budget import RateBudget
from tests.mcp.conftest import MCPKernel, mcp_toml, stdio_server
from tests.mcp.test_results import PNG
from tests.mcp.test_turn import tool_results
from tests.sim.anthropic_sim import AnthropicSim, system_text, without_cache_control
from tests.sim.script import Reply, ToolUse, text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import BotHarness, Factory
from tests.waiting import wait_until

BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{64,}")


def replay(fixture: str, index: int) -> ToolUse:
    return ToolUse("mcp_test__replay", {"fixture": fixture, "index": index})


async def test_recorded_results_reach_the_model_once(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    """Issue 13: read_media_file sent the image's base64 as text too; every filesystem
    tool's text arrived twice. Here the recorded results go through a real stdio server,
    the SDK and the agent to the model simulator."""
    kernel = await mcp_kernel(model, [stdio_server("test")])
    model.enqueue(
        Reply(
            replay("server-filesystem-2026.8.31.json", 0),  # read_text_file
            replay("server-filesystem-2026.8.31.json", 1),  # read_media_file
            replay("server-everything-2026.8.31.json", 1),  # get-structured-content
            replay("mcp-server-time-2026.10.19.json", 0),  # get_current_time
        ),
        text_reply("Done."),
    )

    turn = kernel.agent.start_turn("test:1", UserInput("read them"))
    events = [e async for e in turn]

    assert [e.ok for e in events if isinstance(e, ToolResult)] == [True] * 4
    request = model.requests[1]
    results = [text for _, text in tool_results(model, 1)]
    assert results[0] == "hello from notes\nsecond line\n"
    assert results[1].startswith("[image image/png, 70 bytes]")  # + the "images follow" note
    assert results[2] == '{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}'
    assert json.loads(results[3]) == {
        "timezone": "Europe/Paris",
        "datetime": "2026-11-23T23:45:31+01:00",
        "day_of_week": "Monday",
        "is_dst": False,
    }
    assert results[3].count("Europe/Paris") == 1
    assert not any(BASE64_RUN.search(r) for r in results)
    body = request.body
    assert body is not None
    images = [b for b in body["messages"][-1]["content"] if b["type"] == "image"]
    assert [b["source"]["data"] for b in images] == [PNG]  # the image once, as an image
    assert len(request.raw) < 20_000  # was 456 KB for a 264 KB PNG


async def test_progress_notifications_become_turn_events(
    model: AnthropicSim, mcp_kernel: MCPKernel, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    release.touch()
    kernel = await mcp_kernel(model, [stdio_server("test")])
    model.enqueue(
        tool_reply("mcp_test__steps", {"count": 3, "release": str(release)}),
        text_reply("All steps done."),
    )

    turn = kernel.agent.start_turn("test:1", UserInput("run the steps"))
    events = [e async for e in turn]

    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert [(e.name, e.text) for e in progress] == [
        ("mcp_test__steps", "1/3 step 1"),
        ("mcp_test__steps", "2/3 step 2"),
        ("mcp_test__steps", "3/3 step 3"),
    ]
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert {e.id for e in progress} == {result.id}
    assert events.index(progress[-1]) < events.index(result)
    assert event_to_dict(progress[0]) == {  # what the sidecar's SSE sends
        "type": "tool_progress",
        "step": 1,
        "tool_progress": {"id": result.id, "name": "mcp_test__steps", "text": "1/3 step 1"},
    }


async def test_progress_shows_in_the_telegram_draft(bot: Factory, tmp_path: Path) -> None:
    release = tmp_path / "release"
    h = await bot(extra="progress_interval = 0.05\n" + mcp_toml([stdio_server("test")]))
    h.model.enqueue(
        tool_reply("mcp_test__steps", {"count": 3, "release": str(release)}),
        text_reply("All steps done."),
    )
    h.tg.inject_text("run the steps")

    def drafted(text: str) -> bool:
        return any(c.params.get("text") == text for c in h.tg.calls_to("sendMessageDraft"))

    # The tool waits for the release file until the chat shows its last step.
    await h.tg.wait_until(lambda: drafted("⏳ mcp_test__steps: 3/3 step 3"))
    assert not release.exists()
    release.touch()
    await h.settle()

    # The progress line was the draft's (issue 37: no message for it); the reply is the
    # turn's one message, the one that notifies (issue 34).
    assert h.texts() == ["All steps done."]
    assert [m.text for m in h.tg.history(OWNER) if m.from_bot] == ["All steps done."]
    assert h.tg.calls_to("editMessageText") == []


async def test_without_drafts_progress_shows_in_a_silent_placeholder(
    bot: Factory, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    h = await bot(
        extra="progress_interval = 0.05\nstream = false\n" + mcp_toml([stdio_server("test")])
    )
    h.model.enqueue(
        tool_reply("mcp_test__steps", {"count": 3, "release": str(release)}),
        text_reply("All steps done."),
    )
    h.tg.inject_text("run the steps")

    def edited(text: str) -> bool:
        return any(c.params.get("text") == text for c in h.tg.calls_to("editMessageText"))

    await h.tg.wait_until(lambda: edited("⏳ mcp_test__steps: 3/3 step 3"))
    assert not release.exists()
    release.touch()
    await h.settle()

    # The progress line was the placeholder's; it went when the reply came (issue 34:
    # the reply is a new message, the one that notifies; no progress message stays).
    assert h.texts() == ["All steps done."]
    progress = [
        c for c in h.tg.calls_to("editMessageText") if str(c.params["text"]).startswith("⏳")
    ]
    (placeholder,) = {c.params["message_id"] for c in progress}
    assert [m.deleted for m in h.tg.history(OWNER) if m.message_id == placeholder] == [True]
    [sent] = [c for c in h.tg.calls_to("sendMessage") if c.result["message_id"] == placeholder]
    assert sent.params["disable_notification"] is True
    assert sent.params["text"] == "⚙ Running mcp_test__steps…"  # sent for the line


async def test_a_tool_line_the_budget_thinned_shows_while_the_tool_runs(
    bot: Factory, tmp_path: Path
) -> None:
    """The chat is blocked (a 429 on the typing action) when the tool starts, so the rate
    budget thins the draft "⚙ Running …": it shows once the block is over, while the
    tool still runs, instead of never (the seeded soak's kill during a tool found it:
    right after a reply, the line never came)."""
    release = tmp_path / "release"
    h = await bot(  # the 429's block is real seconds
        extra="progress_interval = 0.05\n" + mcp_toml([stdio_server("test")]), real_pace=True
    )
    gate = asyncio.Event()
    h.model.enqueue(
        tool_reply("mcp_test__steps", {"count": 0, "release": str(release)}, gate=gate),
        text_reply("Done."),
    )
    h.tg.inject_text("run it")
    await h.tg.wait_until(lambda: len(h.model.requests) == 1)  # the model has it (gated)
    h.tg.fail("sendChatAction", status=429, retry_after=3)  # the next typing action
    await h.tg.wait_until(lambda: any(c.status == 429 for c in h.tg.calls_to("sendChatAction")))
    gate.set()  # the tool call comes while the chat is blocked

    running = "⚙ Running mcp_test__steps…"
    await h.tg.wait_until(
        lambda: any(c.params.get("text") == running for c in h.tg.calls_to("sendMessageDraft"))
    )
    limiter = h.channel.bot.rate_limiter
    assert isinstance(limiter, RateBudget)
    assert limiter.stats()["thinned"].get("draft", 0) >= 1  # it was thinned first
    assert not release.exists()  # shown while the tool runs
    release.touch()
    await h.settle()
    assert h.texts() == ["Done."]


async def test_sampling_is_answered_by_the_active_model(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(
        model, [stdio_server("test")], settings={"sampling": "auto", "sampling_max_tokens": 50}
    )
    model.enqueue(
        tool_reply("mcp_test__summarize", {"text": "a long story", "max_tokens": 5000}),
        text_reply("short story"),  # the sampling request
        text_reply("Summarised."),
    )

    turn = kernel.agent.start_turn("test:1", UserInput("summarise"))
    events = [e async for e in turn]

    assert isinstance(events[-1], Completed) and events[-1].reply == "Summarised."
    sampled = model.requests[1].body
    assert sampled is not None
    assert sampled["max_tokens"] == 50  # the configured ceiling, not the server's 5000
    assert system_text(sampled) == "Summarise."
    assert without_cache_control(sampled["messages"]) == [
        {"role": "user", "content": [{"type": "text", "text": "a long story"}]}
    ]
    assert not sampled.get("tools")
    [(_, result)] = tool_results(model, 2)
    assert result == f"model {kernel.agent.selection.model} said: short story"
    rows = await kernel.agent.meter.ledger.entries(UsageFilter())
    assert [r.purpose for r in reversed(rows)] == ["turn", "sampling", "turn"]


async def test_sampling_the_budget_refuses_is_not_sent(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(
        model, [stdio_server("test")], settings={"sampling": "auto", "sampling_max_tokens": 50}
    )
    # Output at 1,000 a million: the turn's call may cost 1.024 (max_tokens 1024) and
    # costs 1.0; the sampling call's worst case (0.05) would then pass 1.04.
    kernel.config.providers["main"].prices = {"model-a": ModelPrice(input=0.0, output=1000.0)}
    kernel.config.budget.daily = 1.04
    model.enqueue(
        tool_reply("mcp_test__summarize", {"text": "a long story"}, usage=(100, 1000)),
        text_reply("never sent"),
    )
    final = await kernel.agent.start_turn("test:1", UserInput("summarise", channel="api")).wait()
    assert isinstance(final, ErrorEvent) and final.code == "budget_exceeded"
    assert len(model.requests) == 1  # neither the sampling call nor the next step was sent
    rows = await kernel.agent.meter.ledger.entries(UsageFilter())
    assert [r.purpose for r in rows] == ["turn"]


async def test_sampling_waits_for_the_owners_approval(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])  # sampling = "ask" by default
    model.enqueue(
        tool_reply("mcp_test__summarize", {"text": "a long story", "max_tokens": 20}),
        text_reply("Could not summarise."),
    )

    turn = kernel.agent.start_turn("test:1", UserInput("summarise"))
    events = []
    async for event in turn:
        events.append(event)
        if isinstance(event, AskUser):
            assert event.kind == "approval" and "test" in event.question
            assert "a long story" in event.question
            kernel.agent.asks.answer(event.id, 1)  # Deny

    assert len(model.requests) == 2  # no sampling call reached the model
    [(_, result)] = tool_results(model, 1)
    assert "the owner declined the sampling request" in result


async def test_free_text_elicitation_is_declined(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])
    model.enqueue(tool_reply("mcp_test__name_please", {}), text_reply("Declined."))

    turn = kernel.agent.start_turn("test:1", UserInput("go"))
    events = [e async for e in turn]

    assert not any(isinstance(e, AskUser) for e in events)
    [(_, result)] = tool_results(model, 1)
    assert result == "answer: decline"


async def question(h: BotHarness, after: int) -> ChatMessage:
    """The first message with buttons sent after the bot's first ``after`` messages."""
    await h.tg.wait_until(lambda: any(m.reply_markup for m in h.bot_messages()[after:]))
    return next(m for m in h.bot_messages()[after:] if m.reply_markup)


def press(h: BotHarness, message: ChatMessage, label: str) -> None:
    assert message.reply_markup is not None
    buttons = [b for row in message.reply_markup["inline_keyboard"] for b in row]
    [button] = [b for b in buttons if b["text"] == label]
    h.tg.inject_callback(button["callback_data"], message_id=message.message_id)


async def test_elicitation_is_answered_with_telegram_buttons(bot: Factory) -> None:
    h = await bot(extra=mcp_toml([stdio_server("test")]))
    h.model.enqueue(tool_reply("mcp_test__choose", {}), text_reply("Green it is."))
    h.tg.inject_text("let me choose")

    color = await question(h, 0)
    assert color.text.startswith("❓ The MCP server test asks: Pick a colour\nColor")
    labels = [b["text"] for row in color.reply_markup["inline_keyboard"] for b in row]  # type: ignore[index]
    assert labels == ["red", "green", "blue", "🚫 Decline"]
    press(h, color, "green")
    seen = h.bot_messages().index(color) + 1
    sure = await question(h, seen)
    assert sure.text.endswith("\nSure")
    press(h, sure, "Yes")
    await h.settle()

    assert h.texts()[-1] == "Green it is."
    blocks = h.model.requests[1].body["messages"][-1]["content"]
    [result] = [b for b in blocks if b["type"] == "tool_result"]
    assert result["content"] in (
        "picked green, sure=True",
        [{"type": "text", "text": "picked green, sure=True"}],
    )


async def test_status_says_what_servers_may_ask(bot: Factory) -> None:
    settings = {"sampling": "off", "elicitation": False}
    h = await bot(extra=mcp_toml([stdio_server("test")], settings))

    status = await h.ask("/status full")

    assert (
        "MCP server requests: sampling not supported (off); elicitation not supported (off)"
        in status.splitlines()
    )


async def test_cancel_withdraws_a_servers_question(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])
    model.enqueue(tool_reply("mcp_test__choose", {}), text_reply("unused"))

    turn = kernel.agent.start_turn("test:1", UserInput("let me choose"))
    events = []
    async for event in turn:
        events.append(event)
        if isinstance(event, AskUser):
            assert kernel.agent.asks.waiting("test:1")
            turn.cancel()

    assert isinstance(events[-1], Completed) and events[-1].cancelled
    # The server's elicitation does not outlive the turn (the SDK cancels the callback).
    await wait_until(lambda: not kernel.agent.asks.waiting())
