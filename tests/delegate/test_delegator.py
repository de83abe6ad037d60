"""delegate_to_cli against stand-in CLIs: real child processes, real files, real kills."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from kernel.core.errors import ToolError
from kernel.delegate.delegator import LATEST_KEPT
from tests.delegate.conftest import (
    ConfigFactory,
    cli_section,
    delegator_for,
    read,
    record_of,
    wait_dead,
)
from tests.delegate.standins import alive
from tests.waiting import wait_until

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable

EXPECTED = {
    "claude_code": "Done: count the files",
    "codex": "From the last-message file: Done: count the files",
    "gemini": "Done: count the files",
}
STEPS = {
    "claude_code": "Bash: ls -la",
    "codex": "✎ src/app.py",
    "gemini": "run_shell_command: ls -la",
}


@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_each_cli_stream_gives_the_final_text_and_the_result_fields(
    cli: str,
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    config = make_config(cli_section(cli, command=str(bin_dir[cli])))
    delegator = delegator_for(config)
    result = await delegator.delegate("count the files", cli=cli, conversation="c")

    assert result["ok"] is True
    assert result["cli"] == cli
    assert result["cwd"] == str(workspace)
    assert result["exit_code"] == 0
    assert result["output"] == EXPECTED[cli]
    saved = Path(result["output_path"])
    assert saved.parent == config.data_dir / "cli_outputs"
    assert saved.name.endswith(f"-{cli}.txt")
    assert '"type"' in read(saved)  # the raw JSONL stream is kept in full
    ran = record_of(record)
    assert ran["cwd"] == str(workspace)
    if cli == "gemini":
        assert ran["argv"][-1] == "--prompt=count the files"
    else:
        assert ran["argv"][-2:] == ["--", "count the files"]
    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "ok" and latest.steps >= 3
    assert STEPS[cli] in latest.recent
    assert not [s for s in latest.recent if "init" in s or "thread" in s]  # noise is no step
    assert delegator.running is None


async def test_codex_gets_cwd_and_last_message_file_and_its_answer_is_read_from_it(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    (workspace / "sub").mkdir()
    config = make_config(
        cli_section("codex", command=str(bin_dir["codex"]), args=["exec", "--json"])
    )
    result = await delegator_for(config).delegate("fix it", cwd="sub", cli="codex")

    argv = record_of(record)["argv"]
    assert argv[1:3] == ["exec", "--json"]
    assert argv[3:5] == ["-C", str(workspace / "sub")]
    assert argv[5] == "--output-last-message"
    last = Path(argv[6])
    assert last.parent == config.data_dir / "cli_outputs"
    assert read(last) == "From the last-message file: Done: fix it"
    assert argv[7:] == ["--", "fix it"]  # nothing in args can swallow the task
    assert result["output"] == "From the last-message file: Done: fix it"
    assert result["cwd"] == str(workspace / "sub")
    assert "stream copy" not in result["output"]


async def test_plain_text_mode_returns_stdout_and_output_can_be_forced(
    bin_dir: dict[str, Path], make_config: ConfigFactory
) -> None:
    text = make_config(cli_section("claude_code", command=str(bin_dir["text"]), args=["-p"]))
    assert text.cli["claude_code"].jsonl is False
    result = await delegator_for(text).delegate("say hi")
    assert result["ok"] is True
    assert "working on it\nDone: say hi" in result["output"]
    assert "\x1b[" not in result["output"]

    # JSONL stream printed by a CLI whose args do not show it: output = "jsonl" says so.
    forced = make_config(
        cli_section("claude_code", command=str(bin_dir["claude_code"]), args=[], output="jsonl")
    )
    assert (await delegator_for(forced).delegate("x"))["output"] == "Done: x"
    # And the reverse: stream-json args but read as text, so stdout is returned raw.
    raw = make_config(
        cli_section(
            "claude_code",
            command=str(bin_dir["claude_code"]),
            args=["--output-format", "stream-json"],
            output="text",
        )
    )
    assert '"type": "result"' in (await delegator_for(raw).delegate("x"))["output"]


async def test_missing_executable_and_bad_cwd_are_clear_tool_errors(
    bin_dir: dict[str, Path], make_config: ConfigFactory, workspace: Path
) -> None:
    config = make_config(cli_section("claude_code", command="no-such-claude-binary"))
    delegator = delegator_for(config)
    with pytest.raises(ToolError, match="no-such-claude-binary is not on PATH"):
        await delegator.delegate("x")
    assert delegator.running is None and delegator.latest("") is None

    ok = delegator_for(make_config(cli_section("claude_code", command=str(bin_dir["text"]))))
    with pytest.raises(ToolError, match="does not exist or is not a directory"):
        await ok.delegate("x", cwd="missing-folder")
    with pytest.raises(ToolError, match="task is empty"):
        await ok.delegate("   ")
    assert ok.running is None


async def test_a_second_concurrent_delegation_is_refused_naming_the_running_cli(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_DELAY", "0.1")
    config = make_config(
        cli_section("claude_code", command=str(bin_dir["claude_code"])),
        cli_section("codex", command=str(bin_dir["codex"])),
    )
    delegator = delegator_for(config)
    first = asyncio.create_task(delegator.delegate("long job", conversation="a"))
    await wait_until(lambda: delegator.running is not None)
    with pytest.raises(ToolError) as refused:
        await delegator.delegate("another", cli="codex", conversation="b")
    assert "busy" in str(refused.value) and "claude_code is already running" in str(refused.value)
    result = await first
    assert result["ok"] is True
    # Free again afterwards.
    assert (await delegator.delegate("next", cli="codex"))["ok"] is True


async def test_timeout_kills_the_whole_group_even_a_grandchild_ignoring_sigterm(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    for key, value in {
        "STANDIN_MODE": "hang",
        "STANDIN_GRANDCHILD": "1",
        "STANDIN_IGNORE_TERM": "1",
        "STANDIN_RECORD": str(record),
    }.items():
        monkeypatch.setenv(key, value)
    config = make_config(
        cli_section("claude_code", command=str(bin_dir["claude_code"]), timeout=0.5)
    )
    delegator = delegator_for(config, kill_grace=0.2)
    result = await delegator.delegate("never ends", conversation="c")

    info = record_of(record)
    assert result["ok"] is False
    assert "did not finish within 0.5 s; its whole process group was killed" in result["output"]
    # SIGTERM was ignored, SIGKILL ended it: no exit code, the signal and Kernel's say so
    assert (result["exit_code"], result["signal"]) == (None, "SIGKILL")
    assert result["kernel_signals"] == ["SIGTERM", "SIGKILL"]
    assert re.search(
        r"Exit status: Kernel sent SIGTERM, then SIGKILL after [0-9.]+ s; ended by SIGKILL\.",
        result["reason"],
    )
    assert not alive(info["pid"])
    await wait_dead(info["grandchild"])
    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "timeout"


async def test_idle_timeout_starts_only_after_displayable_output(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    section = cli_section(
        "claude_code", command=str(bin_dir["claude_code"]), timeout=30.0, idle_timeout=0.4
    )
    delegator = delegator_for(make_config(section))
    # Only system/init for longer than the idle limit: not idle yet, the run completes.
    monkeypatch.setenv("STANDIN_MODE", "noise_then_ok")
    monkeypatch.setenv("STANDIN_PAUSE", "1.0")
    assert (await delegator.delegate("slow start"))["ok"] is True

    # A displayable step, then silence: the idle timeout ends it.
    monkeypatch.setenv("STANDIN_MODE", "step_then_hang")
    result = await delegator.delegate("stalls", conversation="c")
    assert result["ok"] is False
    assert "printed nothing new for 0.4 s" in result["output"]
    assert "Let me look around." in result["output"]  # what it showed is kept
    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "idle"


@pytest.mark.parametrize("shape", ["text", "claude_code"])
async def test_200k_characters_are_saved_whole_and_cut_head_and_tail_for_the_model(
    shape: str,
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "big")
    monkeypatch.setenv("STANDIN_SIZE", "200000")
    args = ["-p"] if shape == "text" else ["-p", "--output-format", "stream-json", "--verbose"]
    config = make_config(cli_section("claude_code", command=str(bin_dir[shape]), args=args))
    result = await delegator_for(config).delegate("print a lot")

    assert result["ok"] is True
    output = result["output"]
    assert len(output) <= 50_000
    assert output.startswith("HEAD-") or output.startswith("working on it\nHEAD-")
    assert output.endswith("-TAIL") or output.endswith("-TAIL\n")
    assert "characters omitted; the full output is at output_path" in output
    saved = read(result["output_path"])
    assert saved.count("x") >= 199_990  # the file has everything


async def test_a_long_stderr_is_saved_whole_beside_the_output(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_STDERR_SIZE", "60000")
    config = make_config(cli_section("claude_code", command=str(bin_dir["text"])))
    result = await delegator_for(config).delegate("talk on stderr")

    output_path = Path(result["output_path"])
    saved = read(output_path)
    assert "ERR-HEAD-" in saved and "-ERR-TAIL" in saved and saved.count("e") < 30_000
    full = output_path.with_name(output_path.stem + ".stderr.txt")
    assert f"all of it in {full.name}" in saved
    text = read(full)
    assert text.startswith("ERR-HEAD-") and text.endswith("-ERR-TAIL") and len(text) == 60_000


async def test_a_short_stderr_needs_no_file_of_its_own(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_STDERR_SIZE", "100")
    config = make_config(cli_section("claude_code", command=str(bin_dir["text"])))
    result = await delegator_for(config).delegate("a little on stderr")
    output_path = Path(result["output_path"])
    assert "ERR-TAIL" in read(output_path)
    assert not output_path.with_name(output_path.stem + ".stderr.txt").exists()


async def test_nonzero_exit_is_a_failure_with_stderr_for_the_model(
    bin_dir: dict[str, Path], make_config: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "fail")
    config = make_config(cli_section("gemini", command=str(bin_dir["gemini"])))
    result = await delegator_for(config).delegate("x", cli="gemini")
    assert result["ok"] is False and result["exit_code"] == 3
    assert "exited with code 3" in result["output"]
    assert "fatal: the model refused the credentials" in result["output"]
    assert "fatal: the model refused" in read(result["output_path"])


async def test_a_cli_that_reports_done_but_does_not_exit_is_ended(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_MODE", "no_exit")
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    config = make_config(cli_section("codex", command=str(bin_dir["codex"])))
    result = await delegator_for(config, done_grace=0.2).delegate("x", cli="codex")
    assert result["ok"] is True
    assert result["output"] == "From the last-message file: Done: x"
    assert not alive(record_of(record)["pid"])


async def test_cancelling_the_caller_kills_the_group_and_reraises(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    for key, value in {
        "STANDIN_MODE": "step_then_hang",
        "STANDIN_GRANDCHILD": "1",
        "STANDIN_IGNORE_TERM": "1",
        "STANDIN_RECORD": str(record),
    }.items():
        monkeypatch.setenv(key, value)
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    delegator = delegator_for(config, kill_grace=0.2)
    task = asyncio.create_task(delegator.delegate("x", conversation="c"))
    await wait_until(lambda: delegator.running is not None and bool(delegator.running.step))
    assert delegator.running is not None and delegator.running.step == "Let me look around."
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    info = record_of(record)
    assert not alive(info["pid"])
    await wait_dead(info["grandchild"])
    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "cancelled"
    assert delegator.running is None


async def test_kernel_secrets_are_not_passed_to_the_cli(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    monkeypatch.setenv("KERNEL_TELEGRAM_TOKEN", "123:secret-token")
    config = make_config(
        cli_section("claude_code", command=str(bin_dir["text"]))
        + '\n[envs]\nSTANDIN_PROJECT_TOKEN = "tok-for-the-cli"\n'
    )
    await delegator_for(config).delegate("x")
    env = record_of(record)["env"]
    assert "STANDIN_RECORD" in env
    assert not [k for k in env if k.startswith("KERNEL_")]
    assert env["STANDIN_PROJECT_TOKEN"] == "tok-for-the-cli"  # the owner's [envs] do reach it


async def test_a_grandchild_left_behind_by_a_cli_that_exited_is_killed(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_GRANDCHILD", "1")
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    config = make_config(cli_section("gemini", command=str(bin_dir["gemini"])))
    result = await delegator_for(config).delegate("x", cli="gemini")
    assert result["ok"] is True
    info = record_of(record)
    assert not alive(info["pid"])
    await wait_dead(info["grandchild"])


async def test_stop_kills_a_delegation_and_its_caller_gets_a_clear_result(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The backup path when a turn outlives the shutdown bound: Delegator.stop()."""
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_MODE", "step_then_hang")
    monkeypatch.setenv("STANDIN_GRANDCHILD", "1")
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    delegator = delegator_for(config)
    task = asyncio.create_task(delegator.delegate("x", conversation="c"))
    await wait_until(lambda: delegator.running is not None and bool(delegator.running.step))
    await delegator.stop()
    result = await asyncio.wait_for(task, 30)
    assert result["ok"] is False
    assert "Kernel is stopping; claude_code was killed" in result["output"]
    info = record_of(record)
    assert not alive(info["pid"])
    await wait_dead(info["grandchild"])
    latest = delegator.latest("c")
    assert latest is not None and latest.outcome == "stopped"
    with pytest.raises(ToolError, match="stopping"):  # and no new one starts
        await delegator.delegate("another", conversation="c")


async def test_a_file_that_cannot_be_executed_is_a_clear_tool_error(
    make_config: ConfigFactory, tmp_path: Path
) -> None:
    broken = tmp_path / "bin" / "broken-cli"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    delegator = delegator_for(make_config(cli_section("claude_code", command=str(broken))))
    with pytest.raises(ToolError, match="could not start"):
        await delegator.delegate("x")
    assert delegator.running is None
    assert list((tmp_path / "data" / "cli_outputs").glob("*")) == []


async def test_the_last_run_is_kept_for_the_most_recent_chats_only(
    bin_dir: dict[str, Path], make_config: ConfigFactory
) -> None:
    """Issue 37: each sidecar, cron or QQ chat that delegates is a conversation of its
    own; their last runs are not all kept for the life of the process."""
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    delegator = delegator_for(config)
    chats = [f"session:{n}" for n in range(LATEST_KEPT + 4)]
    for chat in chats:
        result = await delegator.delegate("count the files", conversation=chat)
        assert result["ok"] is True
    assert len(delegator._latest) == LATEST_KEPT
    assert delegator.latest(chats[0]) is None
    newest = delegator.latest(chats[-1])
    assert newest is not None and newest.outcome == "ok" and newest.conversation == chats[-1]
