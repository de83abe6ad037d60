"""delegate_to_cli in the Telegram chat: live progress edits, /status, /cancel, refusals.

Real PTB against the Bot API simulator, the real anthropic SDK against the model
simulator scripting the tool call, and a stand-in CLI as a real child process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.core.messages import ToolResultBlock, ToolUseBlock
from tests.delegate.conftest import cli_section, record_of, wait_dead
from tests.delegate.standins import alive, make_cli
from tests.sim.script import text_reply, tool_reply
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import CONV, BotHarness, Factory, asking

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable

INTERVAL = 0.2


async def start(bot: Factory, tmp_path: Path, shape: str = "claude_code") -> BotHarness:
    command = make_cli(tmp_path / "bin", shape)
    extra = f"progress_interval = {INTERVAL}\n" + cli_section("claude_code", command=str(command))
    return await bot(extra=extra)


def edits(h: BotHarness) -> list[tuple[float, str]]:
    return [(c.at, str(c.params["text"])) for c in h.tg.calls_to("editMessageText") if c.ok]


async def test_progress_is_edited_while_the_cli_runs_then_the_summary_arrives(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each step lasts longer than the chat's budget of about one edit a second
    # (kernel.telegram.budget), so every step gets its moment in the progress message.
    monkeypatch.setenv("STANDIN_DELAY", "1.5")
    h = await start(bot, tmp_path)
    h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "count the files"}),
        text_reply("There are **two** files."),
    )

    last = await h.converse("how many files are in my project?")

    reply, ran = last.split("\n\n")
    assert reply == "There are two files."
    assert ran.startswith("✅ claude_code finished (")  # folded into the answer (issue 34)
    shown = edits(h)
    texts = [text for _, text in shown]
    assert texts[0].startswith("⏳ Running the task… (claude_code)")
    assert any("Now: Bash: ls -la" in text for text in texts)
    assert all("Elapsed: " in text for text in texts[:-2])
    progress = [at for at, text in shown if text.startswith("⏳")]
    assert len(progress) >= 3
    gaps = [b - a for a, b in zip(progress, progress[1:], strict=False)]
    assert min(gaps) >= INTERVAL * 0.9  # at most one progress edit per interval
    assert h.texts() == [last]  # the progress message went when the answer came
    failed = [c for c in h.tg.calls if c.method != "getUpdates" and not c.ok]
    assert failed == []  # no "message is not modified", no bad request
    fed = h.model.requests[1].body["messages"][-1]["content"][0]
    assert json.loads(fed["content"])["output"] == "Done: count the files"
    assert "CLI delegation: idle" in await h.ask("/status full")


async def test_cancel_mid_delegation_kills_the_cli_names_it_and_the_chat_goes_on(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "record.json"
    for key, value in {
        "STANDIN_MODE": "step_then_hang",
        "STANDIN_GRANDCHILD": "1",
        "STANDIN_IGNORE_TERM": "1",
        "STANDIN_RECORD": str(record),
    }.items():
        monkeypatch.setenv(key, value)
    h = await start(bot, tmp_path)
    h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "refactor everything"}), text_reply("Hello again.")
    )
    h.tg.inject_text("refactor my project")
    delegator = h.kernel.delegator
    await h.tg.wait_until(
        lambda: any("Now: Let me look around." in text for _, text in edits(h)), timeout=30
    )
    status = await h.ask("/status full")
    assert "CLI delegation: claude_code running for " in status
    info = record_of(record)

    assert await h.ask("/cancel") == "Cancelled; stopped claude_code"
    await h.settle()

    assert not alive(info["pid"])
    await wait_dead(info["grandchild"])
    assert delegator.running is None
    assert h.bot_messages()[0].text.startswith("⏹ claude_code cancelled by /cancel (")
    assert await h.converse("are you there?") == "Hello again."
    # The stored history answers the delegate call, and the model API accepted it.
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None
    stored = await h.kernel.store.load_messages(session)
    uses = [b for m in stored for b in m.content if isinstance(b, ToolUseBlock)]
    results = [b for m in stored for b in m.content if isinstance(b, ToolResultBlock)]
    assert [u.name for u in uses] == ["delegate_to_cli"]
    assert [r.tool_use_id for r in results] == [uses[0].id] and results[0].is_error
    assert "Nothing is running" in await h.ask("/cancel")


async def test_a_refused_delegation_shows_why_and_the_model_still_answers(
    bot: Factory, tmp_path: Path
) -> None:
    # Only codex is found, so delegate_to_cli is offered (with nothing to choose); the
    # model asks for Claude Code anyway, as if the owner had named it.
    extra = (
        f"progress_interval = {INTERVAL}\n"
        + cli_section("claude_code", command="claude-not-installed-here")
        + cli_section("codex", command=str(make_cli(tmp_path / "bin", "codex")))
    )
    h = await bot(extra=extra)
    h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "x", "cli": "claude_code"}),
        text_reply("Claude Code is not installed on this machine."),
    )
    reply, ran = (await h.converse("do it")).split("\n\n")
    assert reply == "Claude Code is not installed on this machine."
    assert ran.startswith("❌ claude_code: claude_code is not available")  # folded in
    assert "claude-not-installed-here is not on PATH" in ran


async def test_an_approved_delegation_shows_progress_below_the_question(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_DELAY", "0.2")
    command = make_cli(tmp_path / "bin", "claude_code")
    extra = (
        f"progress_interval = {INTERVAL}\n"
        + cli_section("claude_code", command=str(command))
        + "\n[tools.delegate_to_cli]\napproval = true\n"
    )
    h = await bot(extra=extra)
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": "tidy the repo"}), text_reply("Tidied."))
    h.tg.inject_text("tidy my repo")

    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    asked = next(m for m in h.bot_messages() if asking(m))
    assert "Hand to Claude Code\ntidy the repo" in asked.text
    assert not [m for m in h.bot_messages() if m.text.startswith("⏳")]  # nothing runs yet
    approve = asked.reply_markup["inline_keyboard"][0][0]["callback_data"]  # type: ignore[index]
    h.tg.inject_callback(approve, message_id=asked.message_id)
    await h.settle()

    texts = h.texts()
    reply, ran = texts[-1].split("\n\n")
    assert reply == "Tidied." and ran.startswith("✅ claude_code")
    history = [m.text for m in h.tg.history(OWNER) if m.from_bot]
    outcome = next(i for i, text in enumerate(history) if text.startswith("✅ claude_code"))
    assert history.index(asked.text) < outcome  # the progress followed the question
    failed = [c for c in h.tg.calls if c.method != "getUpdates" and not c.ok]
    assert failed == []


async def test_a_denied_delegation_never_starts_the_cli(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    command = make_cli(tmp_path / "bin", "claude_code")
    extra = cli_section("claude_code", command=str(command))
    h = await bot(extra=extra + "\n[tools.delegate_to_cli]\napproval = true\n")
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": "rm -rf"}), text_reply("Not done."))
    h.tg.inject_text("clean up")

    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    asked = next(m for m in h.bot_messages() if asking(m))
    deny = asked.reply_markup["inline_keyboard"][0][1]["callback_data"]  # type: ignore[index]
    h.tg.inject_callback(deny, message_id=asked.message_id)
    await h.settle()

    assert h.texts()[-1] == "Not done."
    assert not record.exists()  # the stand-in never ran
    assert not [t for t in h.texts() if t.startswith(("⏳", "✅", "⛔"))]


@pytest.mark.parametrize(
    ("mode", "keys", "outcome"),
    [
        ("fail", {}, "❌ claude_code did not succeed (exit code 3, "),
        ("hang", {"timeout": 1.0}, "⏱ claude_code timed out and was stopped ("),
        ("step_then_hang", {"idle_timeout": 1.0}, "⏱ claude_code went silent and was stopped ("),
    ],
)
async def test_the_outcome_line_says_how_the_cli_ended(
    bot: Factory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    keys: dict[str, float],
    outcome: str,
) -> None:
    monkeypatch.setenv("STANDIN_MODE", mode)
    command = make_cli(tmp_path / "bin", "claude_code")
    extra = f"progress_interval = {INTERVAL}\n" + cli_section(
        "claude_code", command=str(command), **keys
    )
    h = await bot(extra=extra)
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": "try"}), text_reply("It failed."))

    reply, ran = (await h.converse("try it")).split("\n\n")
    assert reply == "It failed."
    assert ran.startswith(outcome), ran  # folded into the answer (issue 34)
    fed = json.loads(h.model.requests[1].body["messages"][-1]["content"][0]["content"])
    assert fed["ok"] is False
