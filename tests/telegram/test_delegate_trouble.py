"""A delegated CLI that cannot reach its API, as the owner sees it in Telegram: the
progress message names the API error and the retry count; the no-progress limit ends the
run early with that reason; the model gets a summary. Real PTB against the Bot API
simulator, the real anthropic SDK against the model simulator, stand-in CLIs printing
the retry shapes recorded from claude 2.1.197, codex-cli 0.169.0 and gemini-cli 0.61.0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.delegate.conftest import cli_section
from tests.delegate.standins import make_cli
from tests.sim.script import text_reply, tool_reply
from tests.telegram.conftest import BotHarness, Factory

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable

INTERVAL = 0.2
SHOWN = {
    "claude_code": "⚠️ Claude Code cannot reach its API: no HTTP response (unknown) · retry ",
    "codex": "⚠️ Codex cannot reach its API: Connection failed: error sending request · retry ",
    "gemini": "⚠️ Gemini CLI cannot reach its API: exception TypeError: fetch failed sending"
    " request · retry ",
}
NAMES = {"claude_code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}


async def start(bot: Factory, tmp_path: Path, cli: str, limit: float) -> BotHarness:
    command = make_cli(tmp_path / "bin", cli)
    section = cli_section(cli, command=str(command), no_progress_timeout=limit)
    return await bot(extra=f"progress_interval = {INTERVAL}\n" + section)


def edits(h: BotHarness) -> list[str]:
    return [str(c.params["text"]) for c in h.tg.calls_to("editMessageText") if c.ok]


@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_retries_show_in_the_progress_message(
    cli: str, bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "unreachable")  # retries until stopped
    monkeypatch.setenv("STANDIN_DELAY", "0.1")
    h = await start(bot, tmp_path, cli, limit=600.0)
    h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "say hello", "cli": cli}), text_reply("Stopped.")
    )
    h.tg.inject_text("say hello through the CLI")

    await h.tg.wait_until(lambda: any(SHOWN[cli] in text for text in edits(h)), timeout=30)

    shown = next(text for text in edits(h) if SHOWN[cli] in text)
    assert shown.startswith(f"⏳ Running the task… ({cli})")
    assert await h.ask("/cancel") == f"Cancelled; stopped {cli}"


@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_no_progress_ends_the_run_early_and_the_model_gets_the_reason(
    cli: str, bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "unreachable")
    monkeypatch.setenv("STANDIN_DELAY", "0.05")
    h = await start(bot, tmp_path, cli, limit=0.5)
    h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "say hello", "cli": cli}),
        text_reply("The CLI cannot reach its API."),
    )

    reply, outcome = (await h.converse("say hello through the CLI")).split("\n\n")
    assert reply == "The CLI cannot reach its API."  # the outcome folded into it

    assert outcome.startswith(f"⚠️ {NAMES[cli]} could not reach its API (")
    assert "ended early after " in outcome
    fed = h.model.requests[1].body["messages"][-1]["content"][0]
    result = json.loads(fed["content"])
    assert result["ok"] is False
    assert result["reason"].startswith(f"{NAMES[cli]} could not reach its API: ")
    assert '{"type"' not in result["output"]
