"""What the owner sees when a delegated CLI ends badly (issue 35): the outcome line says
how the process ended (Kernel's signal and the CLI's own exit code) and the CLI's last
known cause; /cancel says it was cancelled. Real PTB against the Bot API simulator, a
stand-in CLI printing the lines recorded from the real releases (tests/delegate/
test_ending.py)."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from tests.delegate.conftest import cli_section, leap_when_troubled, record_of
from tests.delegate.standins import make_cli
from tests.sim.script import text_reply, tool_reply
from tests.telegram.conftest import Factory

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable

INTERVAL = 0.2
GEMINI_CAUSE = (
    "Gemini CLI could not reach its API: exception TypeError: fetch failed sending request (retry "
)


@pytest.mark.parametrize(
    ("language", "said"),
    [
        (
            "en",
            (
                "⏱ gemini timed out and was stopped (",
                r"Exit status: Kernel sent SIGTERM after [0-9.]+ s; exit code 0",
                f"Last known cause: {GEMINI_CAUSE}",
            ),
        ),
        (
            "zh",
            (
                "⏱ gemini 超时，已终止（用时 ",
                r"退出状态：Kernel 在 [0-9.]+ 秒时发送了 SIGTERM；退出码 0",
                "最后已知原因：Gemini CLI 无法连接其 API：exception TypeError: fetch failed "
                "sending request（第 ",
            ),
        ),
    ],
)
async def test_gemini_timed_out_after_its_retries_shows_sigterm_exit_0_and_the_cause(
    bot: Factory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    language: str,
    said: tuple[str, str, str],
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "unreachable")  # retries until it is stopped
    monkeypatch.setenv("STANDIN_DELAY", "0.2")
    command = make_cli(tmp_path / "bin", "gemini")
    section = cli_section("gemini", command=str(command), timeout=300, no_progress_timeout=5000)
    h = await bot(extra=f"progress_interval = {INTERVAL}\n" + section, language=language)
    delegator = h.kernel.delegator
    delegator.clock = leap_when_troubled(delegator)
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": "say hello"}), text_reply("It failed."))

    reply, ran = (await h.converse("say hello through gemini")).split("\n\n")

    assert reply == "It failed."
    headline, exit_line, cause_line = ran.split("\n")
    assert headline.startswith(said[0])
    assert re.fullmatch(said[1], exit_line)
    assert cause_line.startswith(said[2])
    if language == "zh":
        return  # the tool result below holds the same facts, its words checked in en
    fed = json.loads(h.model.requests[1].body["messages"][-1]["content"][0]["content"])
    assert (fed["ok"], fed["exit_code"], fed["signal"]) == (False, 0, "SIGTERM")
    assert fed["cause"].startswith(GEMINI_CAUSE)
    assert f"Last known cause: {GEMINI_CAUSE}" in fed["reason"]


async def test_cancel_says_cancelled_with_kernels_signal_and_the_exit(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_MODE", "step_then_hang")
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    command = make_cli(tmp_path / "bin", "claude_code")
    section = cli_section("claude_code", command=str(command))
    h = await bot(extra=f"progress_interval = {INTERVAL}\n" + section)
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": "refactor"}), text_reply("Again."))
    h.tg.inject_text("refactor my project")
    await h.tg.wait_until(lambda: record.exists() and h.kernel.delegator.running is not None)
    await h.tg.wait_until(
        lambda: any(
            "Now: Let me look around." in str(c.params["text"])
            for c in h.tg.calls_to("editMessageText")
        ),
        timeout=30,
    )
    assert record_of(record)["pid"]

    assert await h.ask("/cancel") == "Cancelled; stopped claude_code"
    await h.settle()

    shown = h.bot_messages()[0].text
    headline, exit_line = shown.split("\n")
    assert headline.startswith("⏹ claude_code cancelled by /cancel (")
    # Claude Code exits 143 on SIGTERM (recorded from 2.1.332): Kernel's signal is named.
    assert re.fullmatch(
        r"Exit status: Kernel sent SIGTERM after [0-9.]+ s; exit code 143", exit_line
    )


async def test_a_cli_killed_from_outside_is_said_so_with_its_signal(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_MODE", "hang")
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    command = make_cli(tmp_path / "bin", "gemini")
    h = await bot(
        extra=f"progress_interval = {INTERVAL}\n" + cli_section("gemini", command=str(command))
    )
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": "say hello"}), text_reply("It died."))
    h.tg.inject_text("say hello through gemini")
    await h.tg.wait_until(record.exists, timeout=60)
    os.kill(record_of(record)["pid"], signal.SIGKILL)  # not Kernel: someone else
    await h.settle()

    reply, ran = h.texts()[-1].split("\n\n")
    assert reply == "It died."
    assert re.fullmatch(r"❌ gemini was killed by SIGKILL from outside Kernel \(.+\)", ran)
    fed = json.loads(h.model.requests[1].body["messages"][-1]["content"][0]["content"])
    assert (fed["ok"], fed["exit_code"], fed["signal"], fed["kernel_signals"]) == (
        False,
        None,
        "SIGKILL",
        [],
    )


async def test_a_run_cancelled_before_it_started_shows_its_own_state_not_the_last_runs(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run A ends by /cancel; in the next turn run B (another CLI) is cancelled while
    Kernel still asks its ``--version``: B's message says B was cancelled, without A's
    exit status (review of issue 35)."""
    record, asked = tmp_path / "record.json", tmp_path / "version-asked"
    monkeypatch.setenv("STANDIN_MODE", "step_then_hang")
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    monkeypatch.setenv("STANDIN_SLOW_VERSION", "gemini")
    monkeypatch.setenv("STANDIN_SLOW_VERSION_MARK", str(asked))
    sections = cli_section("claude_code", command=str(make_cli(tmp_path / "bin", "claude_code")))
    sections += cli_section("gemini", command=str(make_cli(tmp_path / "bin", "gemini")))
    h = await bot(extra=f"progress_interval = {INTERVAL}\n" + sections, language="en")
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": "refactor", "cli": "claude_code"}))
    h.tg.inject_text("refactor my project")
    await h.tg.wait_until(lambda: record.exists() and h.kernel.delegator.running is not None)
    assert await h.ask("/cancel") == "Cancelled; stopped claude_code"
    await h.settle()
    first = h.bot_messages()[0].text
    assert first.startswith("⏹ claude_code cancelled by /cancel (") and "\nExit status: " in first

    h.model.enqueue(tool_reply("delegate_to_cli", {"task": "check", "cli": "gemini"}))
    h.tg.inject_text("check it with gemini")
    await h.tg.wait_until(asked.exists, timeout=60)
    h.tg.inject_text("/cancel")
    await h.tg.wait_until(lambda: "Cancelled; stopped gemini" in h.texts(), timeout=60)
    await h.settle()

    shown = [m.text for m in h.bot_messages() if m.text.startswith("⏹ gemini")]
    assert len(shown) == 1, [m.text for m in h.bot_messages()]
    assert re.fullmatch(r"⏹ gemini cancelled by /cancel \([^)\n]+\)", shown[0]), shown[0]
