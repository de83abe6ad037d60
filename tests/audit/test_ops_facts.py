"""The facts the operations' audit rows hold (issue 23): a delegation's command line with
its task and instructions as hashes, secrets and outside paths never verbatim; where it
ran; the dotted names of a configuration change, never its values."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kernel.config import Config, load_config
from kernel.delegate.argv import build_argv, output_flags
from kernel.delegate.recording import command_line, place
from kernel.runtime import changed_keys
from tests.conftest import write_config

TASK = "fix the flaky test in billing/ledger.py and tell me why it failed"
SYSTEM = "You are careful. Never push."
TOKEN = "tok-0123456789abcdef"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def task_mark(text: str = TASK) -> str:
    return f"<task sha256:{sha(text)} chars:{len(text)}>"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    work = tmp_path / "work"
    (work / "app").mkdir(parents=True)
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", default_workspace=str(work))
    path.write_text(path.read_text() + f'\n[envs]\nDEPLOY_TOKEN = "{TOKEN}"\nLEVEL = "2"\n')
    return load_config(path, env={}, require_telegram=False)


def test_claudes_command_line_keeps_flags_and_hides_the_task_and_instructions(
    config: Config,
) -> None:
    data = config.data_dir
    args = ["-p", "--output-format=stream-json", "--verbose"]
    extra = ["--mcp-config", str(data / "run" / "s1" / "mcp.json"), "--permission-prompt-tool"]
    argv = build_argv("claude_code", "/opt/tools/bin/claude", args, TASK, extra, SYSTEM)

    shown = command_line(argv, TASK, SYSTEM, config, "/opt/tools/bin/claude")

    assert shown == [
        "claude",
        *args,
        "--mcp-config",
        "data/run/s1/mcp.json",
        "--permission-prompt-tool",
        f"--append-system-prompt=<instructions sha256:{sha(SYSTEM)} chars:{len(SYSTEM)}>",
        "--",
        task_mark(),
    ]
    assert TASK not in str(shown) and SYSTEM not in str(shown) and "/opt" not in str(shown)


def test_codex_and_gemini_carry_the_instructions_inside_the_task(config: Config) -> None:
    work = config.general.default_workspace
    flags, _ = output_flags(config.data_dir / "cli_outputs", "s2", work / "app")
    codex = build_argv("codex", "codex", ["exec", "--json"], TASK, flags, SYSTEM)
    gemini = build_argv("gemini", "gemini", ["--output-format", "stream-json", "-p"], TASK)

    both = f"<instructions sha256:{sha(SYSTEM)} chars:{len(SYSTEM)}> {task_mark()}"
    assert command_line(codex, TASK, SYSTEM, config, "codex") == [
        "codex",
        "exec",
        "--json",
        "-C",
        "app",  # the working folder, workspace-relative
        "--output-last-message",
        "data/cli_outputs/s2-codex-last.txt",
        "--",
        both,
    ]
    assert command_line(gemini, TASK, "", config, "gemini") == [
        "gemini",
        "--output-format",
        "stream-json",
        f"--prompt={task_mark()}",
    ]


def test_secrets_and_outside_paths_never_appear(config: Config) -> None:
    outside = "/home/someone/private/notes"
    args = [
        "--token",
        "abc-not-in-config",  # a value under a secret's name
        "--api-key=whatever-it-is",
        f"--header=X-Deploy: {TOKEN}",  # an envs value, wherever it is
        "--level",
        "2",  # a short envs value is a setting, kept
        f"--add-dir={outside}",
        outside,
        f"--key={config.providers['main'].api_key}",
    ]
    argv = build_argv("claude_code", "claude", args, TASK)

    shown = command_line(argv, TASK, "", config, "claude")

    assert shown[1:9] == [
        "--token",
        "<secret>",
        "--api-key=<secret>",
        "--header=<secret>",
        "--level",
        "2",
        f"--add-dir=<path sha256:{sha(outside)}>",
        f"<path sha256:{sha(outside)}>",
    ]
    assert shown[9] == "--key=<secret>"
    text = str(shown)
    for hidden in ("abc-not-in-config", "whatever-it-is", TOKEN, "someone", "private"):
        assert hidden not in text


def test_where_a_delegation_ran(config: Config, tmp_path: Path) -> None:
    work = config.general.default_workspace
    project = tmp_path / "projects" / "shop"
    (project / "api").mkdir(parents=True)
    assert place(work, config) == "."
    assert place(work / "app", config) == "app"
    assert place(project, config, "shop", str(project)) == "project:shop"
    assert place(project / "api", config, "shop", str(project)) == "project:shop/api"
    elsewhere = tmp_path / "elsewhere"
    assert place(elsewhere, config, "shop", str(project)) == (
        f"<path sha256:{sha(str(elsewhere))}>"
    )


def test_changed_keys_are_names_never_values() -> None:
    before = {
        "providers": {"openai": {"default_model": "a", "api_key": "sk-old"}},
        "envs": {"FOO": "1"},
        "mcp": {"servers": [{"name": "x"}]},
    }
    after = {
        "providers": {
            "openai": {"default_model": "b", "api_key": "sk-new"},
            "local": {"type": "openai_compat", "headers": {"X-A": "secret"}},
        },
        "envs": {"BAR": "2"},
        "channels": {"qq": {"enabled": True}},
        "mcp": {"servers": []},
    }

    keys = changed_keys(before, after)

    assert keys == [
        "channels.qq.enabled",
        "envs.BAR",
        "envs.FOO",
        "mcp.servers",
        "providers.local.headers",  # three deep: a deeper table is named by its parent
        "providers.local.type",
        "providers.openai.api_key",
        "providers.openai.default_model",
    ]
    assert changed_keys(before, before) == []
    assert not any(value in str(keys) for value in ("sk-", "secret", "openai_compat"))


def test_secrets_given_by_name_without_a_flag_are_hidden(config: Config) -> None:
    """Review R1: codex's `-c x.api_key=…`, `-e NAME_KEY=…` and a header value in its own
    argument came through verbatim."""
    args = [
        "-c",
        "model_providers.corp.api_key=sk-live-7d1e0c2b9a",
        "--header",
        "Authorization: Bearer ghp_a1b2c3d4e5f6",
        "-e",
        "OPENAI_API_KEY=sk-proj-99ab12cd34",
        "-c",
        "model=gpt-5",
    ]
    argv = build_argv("codex", "codex", args, TASK)
    shown = command_line(argv, TASK, "", config, "codex")
    text = str(shown)
    for hidden in ("sk-live-7d1e0c2b9a", "ghp_a1b2c3d4e5f6", "sk-proj-99ab12cd34"):
        assert hidden not in text
    assert "model_providers.corp.api_key=<secret>" in shown
    assert "OPENAI_API_KEY=<secret>" in shown
    assert "model=gpt-5" in shown  # settings that are not secrets stay as written
