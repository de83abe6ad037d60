"""Where the task goes on each CLI's command line, and `kernel check`'s probe of the
configured arguments (stand-ins parse their argv as the real CLIs do; see standins.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.check import _clis, report
from tests.delegate.conftest import ConfigFactory, cli_section, delegator_for, record_of

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable


async def test_a_variadic_flag_before_the_task_does_not_swallow_it(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 13: `--allowedTools Bash` then the task made every delegation exit 1 with
    "Input must be provided"; Kernel now ends the options with `--` (claude 2.1.197
    accepts it, verified) so Bash stays the tool and the task stays the prompt."""
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    args = ["-p", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash"]
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"]), args=args))

    result = await delegator_for(config).delegate("--list the files", conversation="c")

    assert result["ok"] is True, result
    assert result["output"] == "Done: --list the files"
    assert record_of(record)["argv"][-3:] == ["Bash", "--", "--list the files"]


async def test_gemini_gets_its_task_as_prompt_and_skips_the_trust_check(
    bin_dir: dict[str, Path], make_config: ConfigFactory
) -> None:
    old = ["--output-format", "stream-json", "-p"]  # Kernel's old default: exit 55 today
    refused = make_config(cli_section("gemini", command=str(bin_dir["gemini"]), args=old))
    result = await delegator_for(refused).delegate("hi", cli="gemini", conversation="c")
    assert result["ok"] is False and result["exit_code"] == 55
    assert "not running in a trusted directory" in result["output"]

    config = make_config(cli_section("gemini", command=str(bin_dir["gemini"])))  # defaults
    result = await delegator_for(config).delegate("hi", cli="gemini", conversation="c")
    assert result["ok"] is True and result["output"] == "Done: hi"


def test_kernel_check_fails_a_cli_that_rejects_an_argument_and_says_the_fix(
    bin_dir: dict[str, Path], make_config: ConfigFactory
) -> None:
    old = ["exec", "--json", "--full-auto", "--skip-git-repo-check", "--color", "never"]
    config = make_config(
        cli_section("codex", command=str(bin_dir["codex"]), args=old),
        cli_section("claude_code", command=str(bin_dir["claude_code"])),
        cli_section("gemini", command=str(bin_dir["gemini"]), args=["-p"]),
    )

    lines = {line.part: line.render() for line in _clis(config)}
    printed, code = report(_clis(config))

    assert lines["cli codex"] == (
        "[FAIL] cli codex: Codex rejects the configured arguments: error: unexpected argument"
        f" '--full-auto' found — fix cli.codex.args in config.toml (see {bin_dir['codex']} exec"
        " --help)"
    )
    assert lines["cli claude_code"] == (
        f"[ok  ] cli claude_code: {bin_dir['claude_code']} (2.1.197 (Claude Code))"
    )
    assert lines["cli gemini"].startswith("[warn] cli gemini: Gemini CLI refuses to run headless")
    assert "--skip-trust" in lines["cli gemini"]
    assert code == 1 and "1 failed" in printed


def test_kernel_check_passes_the_default_arguments(
    bin_dir: dict[str, Path], make_config: ConfigFactory
) -> None:
    config = make_config(
        *(
            cli_section(name, command=str(bin_dir[name]))
            for name in ("claude_code", "codex", "gemini")
        )
    )
    lines = [line.render() for line in _clis(config)]
    assert lines == [
        f"[ok  ] cli claude_code: {bin_dir['claude_code']} (2.1.197 (Claude Code))",
        f"[ok  ] cli codex: {bin_dir['codex']} (codex-cli 0.169.0)",
        f"[ok  ] cli gemini: {bin_dir['gemini']} (0.61.0)",
    ]
