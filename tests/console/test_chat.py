"""`kernel chat` driven through a pipe, as a script would: a separate process, the real
SDK, the simulator, SQLite on disk."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import SECRET_KEY, kernel_env, spawn_kernel, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import recalled_of
from tests.sim.script import Reply, Text, ToolUse, text_reply

pytestmark = pytest.mark.slow  # real `kernel chat` processes


async def chat(cwd: Path, stdin: str) -> tuple[int, str, str]:
    env = kernel_env(KERNEL_LANGUAGE="en")
    proc = await spawn_kernel("chat", cwd=cwd, env=env, stdin=True)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_two_turns_with_a_tool_call_through_a_pipe(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    write_config(tmp_path, anthropic_sim.base_url, "claude")
    anthropic_sim.enqueue(
        Reply(Text("Noting that."), ToolUse("memory_add", {"text": "The owner likes jasmine tea"})),
        text_reply("Saved: you like jasmine tea."),
        text_reply("You like jasmine tea."),
    )

    code, out, err = await chat(tmp_path, "I like jasmine tea, remember it\nwhat do I like?\n")

    assert code == 0, err
    lines = out.splitlines()
    assert any(line.startswith("⚙ memory_add(") and "jasmine" in line for line in lines)
    assert "Saved: you like jasmine tea." in out
    assert lines[-1] == "You like jasmine tea."
    # the tool really ran: the memory is in the database, and it was recalled into the
    # context block of the second turn's message
    db = sqlite3.connect(tmp_path / "data" / "kernel.db")
    assert db.execute("select text from memories").fetchall() == [("The owner likes jasmine tea",)]
    db.close()
    assert "The owner likes jasmine tea" in recalled_of(anthropic_sim.requests[-1])
    assert SECRET_KEY not in out + err


async def test_commands_and_errors_in_a_pipe(anthropic_sim: AnthropicSim, tmp_path: Path) -> None:
    write_config(tmp_path, anthropic_sim.base_url, "claude")
    anthropic_sim.enqueue(text_reply("first answer"), text_reply("second answer"))
    script = "\n".join(
        [
            "hello",
            "/new",
            "again",
            "/history",
            "/resume #2",
            "/model model-b",
            "/model nope",
            "/provider",
            "/bogus",
            "/exit",
            "never sent",
        ]
    )

    code, out, err = await chat(tmp_path, script + "\n")

    assert code == 0, err
    assert "first answer" in out and "second answer" in out
    assert "#1 " in out and "#2 " in out
    assert "Resumed session #2" in out
    assert "Switched to model model-b" in out
    assert "model nope is not in provider main's models list" in out
    assert "Current provider: main" in out
    assert "✗ Unknown command: send /help for the list" in out  # Telegram's refusal
    assert len(anthropic_sim.requests) == 2  # "never sent" came after /exit


async def test_provider_error_sets_exit_code(anthropic_sim: AnthropicSim, tmp_path: Path) -> None:
    from tests.sim.script import Error

    write_config(tmp_path, anthropic_sim.base_url, "claude")
    anthropic_sim.enqueue(Error(400, "invalid_request_error", "bad things"))
    code, out, err = await chat(tmp_path, "hi\n")
    assert code == 1
    # issue 34: the same words as in Telegram; the raw detail only in the log's fields
    assert "main refused this request (not because of your message)" in err
    assert "bad things" not in err


@pytest.mark.posix
async def test_ctrl_c_cancels_the_turn_not_the_program(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    import signal

    write_config(tmp_path, anthropic_sim.base_url, "claude")
    anthropic_sim.enqueue(
        Reply(Text("a very long", chunks=["a very ", "long"]), stall_after=3),
        text_reply("short answer"),
    )
    env = kernel_env(KERNEL_LANGUAGE="en")
    proc = await spawn_kernel("chat", cwd=tmp_path, env=env, stdin=True)
    assert proc.stdin and proc.stdout
    proc.stdin.write(b"tell me everything\n")
    await proc.stdin.drain()
    first = await asyncio.wait_for(proc.stdout.read(7), timeout=30)
    assert first == b"a very "  # the reply is streaming and then stalls

    proc.send_signal(signal.SIGINT)
    proc.stdin.write(b"just the short version\n")
    proc.stdin.close()
    rest, err = await asyncio.wait_for(proc.communicate(), timeout=30)

    assert proc.returncode == 0, err.decode()
    out = (first + rest).decode()
    assert "[Cancelled]" in out
    assert out.splitlines()[-1] == "short answer"
    # the cancelled partial reply is in the history the model saw next
    assert "a very" in str(anthropic_sim.requests[-1].body["messages"])


async def test_approval_answered_on_the_next_input_line(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    config = write_config(tmp_path, anthropic_sim.base_url, "claude")
    config.write_text(config.read_text() + "[tools.memory_add]\napproval = true\n")
    anthropic_sim.enqueue(
        Reply(ToolUse("memory_add", {"text": "tea"})),
        text_reply("Saved."),
        Reply(ToolUse("memory_add", {"text": "coffee"})),
        text_reply("Not saved."),
    )

    # "x" is not an option and is asked again; then 1 approves, 2 denies.
    code, out, err = await chat(tmp_path, "remember tea\nx\n1\nremember coffee\n2\n")

    assert code == 0, err
    assert out.count("Your approval is needed: Remember something") == 2
    assert "  1) ✅ Approve" in out and "  2) ❌ Deny" in out
    assert out.count("Answer with a number (1-2)") == 3
    assert "Saved." in out and "Not saved." in out
    db = sqlite3.connect(tmp_path / "data" / "kernel.db")
    assert db.execute("select text from memories").fetchall() == [("tea",)]
    db.close()
    denied = anthropic_sim.requests[-1].body["messages"][-1]["content"][0]
    assert denied["is_error"] is True and "denied" in denied["content"]


async def test_the_shared_commands_in_a_pipe(anthropic_sim: AnthropicSim, tmp_path: Path) -> None:
    write_config(tmp_path, anthropic_sim.base_url, "claude")
    anthropic_sim.enqueue(text_reply("first answer"))
    script = "\n".join(
        [
            "hello",
            "/remember the owner likes jasmine tea",
            "/memory",
            "/forget #1",
            "/forget #1",
            "/resume",
            "/status full",
            "/usage",
            "/history",
            "/del_history #1",
            "/del_history #1 yes",
            "/history",
            "/retitle",
            "/cancel",
        ]
    )

    code, out, err = await chat(tmp_path, script + "\n")

    assert code == 0, err
    lines = out.splitlines()
    assert "Remembered (/memory lists them all)" in lines
    assert any(line.startswith("#1 ") and line.endswith("jasmine tea") for line in lines)
    assert "Deleted 1 memory(ies)" in lines
    assert any(line.startswith("✗ Invalid memory number #1") for line in lines)
    # a bare /resume lists the sessions as /history does (Telegram shows them as buttons)
    assert lines.count("Sessions (continue one with /resume #n):") == 2
    assert "State: idle" in lines and "Last error: —" in lines
    assert "📊 Usage and spend" in lines  # no price configured: the cost is unknown
    assert any(line.startswith("Today: unknown cost · 1 calls") for line in lines)
    assert "Delete #1 “hello”? This cannot be undone." in lines  # asked first
    assert "  [🗑 Delete] /del_history #1 yes" in lines  # what to type to confirm
    assert "Deleted #1 “hello”" in lines and "No sessions yet" in lines
    assert "✗ There is no current session yet: send a message first, or give #n" in lines
    assert lines[-1] == "Nothing is running"  # /cancel as in Telegram (Ctrl-C too)
    db = sqlite3.connect(tmp_path / "data" / "kernel.db")
    assert db.execute("select count(*) from memories").fetchone() == (0,)
    db.close()
