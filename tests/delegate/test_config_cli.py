"""[cli.<name>] and telegram.progress_interval: parsing, detection, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.config import Config, load_config
from kernel.core.errors import ConfigError
from tests.config.test_config import BASE_ENV


def load(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text('[general]\nlanguage = "en"\n' + text, encoding="utf-8")
    return load_config(path, env=BASE_ENV)


def test_defaults_stream_jsonl_and_keys_parse(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "[telegram]\nprogress_interval = 0.5\n"
        '[cli.codex]\ncommand = "/opt/codex"\ntimeout = 30\nidle_timeout = 5\n'
        '[cli.gemini]\nargs = ["-p"]\n'
        '[cli.claude_code]\nargs = ["-p"]\noutput = "jsonl"\n',
    )
    assert config.telegram.progress_interval == 0.5
    codex = config.cli["codex"]
    assert (codex.command, codex.timeout, codex.idle_timeout) == ("/opt/codex", 30.0, 5.0)
    assert codex.jsonl  # default args carry --json
    assert config.cli["gemini"].jsonl is False  # plain -p: text
    assert config.cli["claude_code"].jsonl is True  # forced
    defaults = load(tmp_path, "")
    assert all(c.jsonl for c in defaults.cli.values())
    assert all(c.timeout == 600.0 for c in defaults.cli.values())


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[cli.codex]\noutput = "yaml"\n', "cli.codex.output"),
        ("[cli.claude_code]\ntimeout = 0\n", "cli.claude_code.timeout"),
        ("[cli.gemini]\nidle_timeout = -1\n", "cli.gemini.idle_timeout"),
        ('[cli.claude_code]\ncommand = " "\n', "cli.claude_code.command"),
        ('[cli.codex]\nargs = "exec --json"\n', "cli.codex.args"),
        ("[telegram]\nprogress_interval = 0\n", "telegram.progress_interval"),
    ],
)
def test_bad_cli_settings_are_refused_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, text)
    assert refused.value.key == key and key in str(refused.value)


def test_an_unknown_cli_section_is_ignored_with_a_warning(tmp_path: Path) -> None:
    config = load(tmp_path, '[cli.aider]\ncommand = "aider"\n')
    assert "aider" not in config.cli
    assert any("[cli.aider]" in w and "claude_code" in w for w in config.warnings)


@pytest.mark.parametrize(
    ("cli", "args", "words"),
    [
        (
            "claude_code",
            ["-p", "--output-format=stream-json", "--verbose", "--allowedTools"],
            "ends with --allowedTools, which takes several values and would swallow the task;"
            " write --allowedTools=<value> (e.g. --allowedTools=Bash)",
        ),
        ("codex", ["exec", "--json", "--image"], "ends with --image"),
        ("claude_code", ["-p", "--", "--verbose"], "contains --: Kernel puts -- before the task"),
        ("gemini", ["-p", "--output-format=stream-json"], "has -p: Kernel passes the task as"),
    ],
)
def test_args_that_would_swallow_the_task_are_refused_naming_the_key(
    tmp_path: Path, cli: str, args: list[str], words: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, f"[cli.{cli}]\nargs = {json.dumps(args)}\n")
    key = f"cli.{cli}.args"
    assert refused.value.key == key
    assert str(refused.value).startswith(key) and words in str(refused.value)


@pytest.mark.slow
def test_the_variadic_refusal_is_one_line_and_exit_2_at_start(tmp_path: Path) -> None:
    """`python -m kernel` as the owner runs it with the args of issue 13's report."""
    (tmp_path / "config.toml").write_text(
        '[general]\nlanguage = "en"\n[cli.claude_code]\nargs = ["-p", "--allowedTools"]\n',
        encoding="utf-8",
    )
    env = {"PATH": "/usr/bin:/bin", "KERNEL_LANGUAGE": "en", **BASE_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "kernel"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "cli.claude_code.args ends with --allowedTools" in done.stderr
    assert "--allowedTools=Bash" in done.stderr and "Traceback" not in done.stderr
