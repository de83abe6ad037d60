"""Opt-in: the real coding CLIs from the npm registry as Kernel's delegates, with Kernel's
default arguments, pointed at the loopback simulators (never the internet):

- claude (``@anthropic-ai/claude-code``) via ``ANTHROPIC_BASE_URL`` → the Anthropic
  simulator;
- codex (``@openai/codex``) via a ``CODEX_HOME/config.toml`` model provider with
  ``wire_api = "responses"`` → the OpenAI simulator's ``/v1/responses``;
- gemini (``@google/gemini-cli``) via ``GOOGLE_GEMINI_BASE_URL`` (with
  ``security.auth.selectedType = "gemini-api-key"`` in its settings: the env variable
  alone selects the "gateway" auth type, which 0.61.0 refuses headless) → the Gemini
  simulator.

Each runs a tiny task whose stream is parsed to a completion, and one with
``instructions`` that reach the model (Claude Code's ``--append-system-prompt``, the
others' ``[SYSTEM]`` block); each, pointed at a closed
port, is ended early by the no-progress limit with the reason, and by a shorter time
limit with the last known cause and Kernel's signal named; ``kernel check`` passes
the defaults and fails codex's old ``--full-auto``. Versions are printed (``-s``)::

    scripts/install-real-clients
    KERNEL_TEST_REAL_CLIENTS=1 uv run pytest tests/real/test_cli_adapters.py -v -s
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import tests.sim.anthropic_sim as anthropic_sim
from kernel.check import _clis
from kernel.config import Config, load_config
from kernel.core.i18n import set_language
from kernel.delegate.delegator import Delegator
from tests.conftest import write_config
from tests.delegate.conftest import cli_section, leap_when_troubled
from tests.real import ENV, SKIP_REASON
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.gemini_sim import GeminiSim
from tests.sim.openai_sim import OpenAISim

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get(ENV), reason=SKIP_REASON),
]

COMMANDS = {"claude_code": "claude", "codex": "codex", "gemini": "gemini"}
NAMES = {"claude_code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}
TASK = "Say hello to the owner"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _without_system_role(validate: Any) -> Any:
    """Claude Code 2.x sends ``role: "system"`` messages, which the strict simulator
    rejects (that is the /v1/messages engineer's part); the rest is checked as usual."""

    def relaxed(body: dict[str, Any]) -> str | None:
        messages = [m for m in body.get("messages", []) if m.get("role") != "system"]
        return validate({**body, "messages": messages})

    return relaxed


def point_at(cli: str, home: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's own settings live in ``home``; its API is ``url``."""
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    if cli == "claude_code":
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-claude-code-0123456789")
        monkeypatch.setenv("DISABLE_AUTOUPDATER", "1")
        monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    elif cli == "codex":
        monkeypatch.setenv("CODEX_HOME", str(home))
        monkeypatch.setenv("SIM_API_KEY", "sk-test-codex-0123456789")
        (home / "config.toml").write_text(
            'model = "gpt-sim"\nmodel_provider = "sim"\ncheck_for_update_on_startup = false\n'
            f'[model_providers.sim]\nname = "sim"\nbase_url = "{url}"\nenv_key = "SIM_API_KEY"\n'
            'wire_api = "responses"\n' + CODEX_LOCAL,
            encoding="utf-8",
        )
    else:
        monkeypatch.setenv("GEMINI_API_KEY", "test-gemini-key-0123456789")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", url)
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        (home / ".gemini").mkdir(exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")


# What keeps Codex off chatgpt.com and github.com (plugins, apps, analytics), as the
# README's Codex config does (tests/real/test_codex_endpoint.py checks it with a proxy).
CODEX_LOCAL = """
[analytics]
enabled = false
[feedback]
enabled = false
[features]
plugins = false
remote_plugin = false
apps = false
plugin_sharing = false
tool_suggest = false
"""


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., Config]:
    workspace = tmp_path / "work"
    workspace.mkdir()

    def factory(*sections: str) -> Config:
        path = write_config(
            tmp_path,
            "http://127.0.0.1:9",
            "claude",
            default_workspace=str(workspace),
            language="en",
        )
        text = path.read_text(encoding="utf-8") + "\n" + "\n".join(sections)
        path.write_text(text, encoding="utf-8")
        config = load_config(path, env={}, require_telegram=False)
        set_language(config.general.language)  # as Kernel's entry points do
        return config

    return factory


@pytest.fixture
async def sim_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[dict[str, AnthropicSim | OpenAISim | GeminiSim]]:
    monkeypatch.setattr(
        anthropic_sim, "validate_request", _without_system_role(anthropic_sim.validate_request)
    )
    async with (
        AnthropicSim(fallback="echo") as claude,
        OpenAISim(fallback="echo") as openai,
        GeminiSim(fallback="echo") as gemini,
    ):
        yield {"claude_code": claude, "codex": openai, "gemini": gemini}


@pytest.fixture
def sims(sim_servers: dict[str, AnthropicSim | OpenAISim | GeminiSim]) -> dict[str, str]:
    return {cli: sim.base_url for cli, sim in sim_servers.items()}


def test_versions_of_the_installed_clis(real_bin: Callable[[str], Path]) -> None:
    for cli, command in COMMANDS.items():
        binary = real_bin(command)
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=120
        )
        print(f"\n{cli}: {binary} -> {done.stdout.strip()}")  # noqa: T201 (the suite's report)
        assert done.returncode == 0 and done.stdout.strip()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_default_args_run_a_tiny_task_to_completion(
    cli: str,
    real_bin: Callable[[str], Path],
    sims: dict[str, str],
    make_config: Callable[..., Config],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binary = real_bin(COMMANDS[cli])
    point_at(cli, tmp_path / "home", sims[cli], monkeypatch)
    delegator = Delegator(make_config(cli_section(cli, command=str(binary))))

    result = await delegator.delegate(TASK, cli=cli, conversation="real")

    print(f"\n{cli} {result['version']}: {result['reason']}")  # noqa: T201
    assert result["ok"] is True, result
    assert result["exit_code"] == 0 and result["version"], result
    assert "echo: " in result["output"] and TASK in result["output"]
    latest = delegator.latest("real")
    assert latest is not None and latest.outcome == "ok"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_instructions_reach_the_model_through_each_cli(
    cli: str,
    real_bin: Callable[[str], Path],
    sim_servers: dict[str, AnthropicSim | OpenAISim | GeminiSim],
    make_config: Callable[..., Config],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 19 point 3: Claude Code accepts ``--append-system-prompt=<text>`` (a text
    starting with "-" included) and sends it as system text; Codex and Gemini send the
    task's leading ``[SYSTEM]`` block."""
    binary = real_bin(COMMANDS[cli])
    sim = sim_servers[cli]
    point_at(cli, tmp_path / "home", sim.base_url, monkeypatch)
    marker = "-- KERNEL-INSTRUCTIONS-7f3a: answer in English."
    config = make_config(cli_section(cli, command=str(binary), instructions=marker))

    result = await Delegator(config).delegate(TASK, cli=cli, conversation="real")

    assert result["ok"] is True, result
    assert TASK in result["output"]
    bodies = [request.body for request in sim.requests]
    if cli == "claude_code":
        assert any(marker in json.dumps(body.get("system", "")) for body in bodies)
    else:
        block = json.dumps(f"[SYSTEM]\n{marker}\n[/SYSTEM]\n\n{TASK}")[1:-1]
        assert any(block in json.dumps(body) for body in bodies)


@pytest.mark.timeout(300)
async def test_a_variadic_flag_in_args_keeps_the_task(
    real_bin: Callable[[str], Path],
    sims: dict[str, str],
    make_config: Callable[..., Config],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 13 point 4: `--allowedTools Bash` used to swallow the task."""
    binary = real_bin("claude")
    point_at("claude_code", tmp_path / "home", sims["claude_code"], monkeypatch)
    args = ["-p", "--output-format=stream-json", "--verbose", "--allowedTools", "Bash"]
    config = make_config(cli_section("claude_code", command=str(binary), args=args))

    result = await Delegator(config).delegate(TASK, conversation="real")

    assert result["ok"] is True, result
    assert TASK in result["output"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_an_unreachable_api_ends_early_with_the_reason(
    cli: str,
    real_bin: Callable[[str], Path],
    make_config: Callable[..., Config],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binary = real_bin(COMMANDS[cli])
    port = closed_port()
    url = f"http://127.0.0.1:{port}" + ("/v1" if cli == "codex" else "")
    point_at(cli, tmp_path / "home", url, monkeypatch)
    config = make_config(cli_section(cli, command=str(binary), no_progress_timeout=10.0))
    delegator = Delegator(config)

    result = await delegator.delegate(TASK, cli=cli, conversation="real")

    print(f"\n{cli} {result['version']}: {result['reason']}")  # noqa: T201
    latest = delegator.latest("real")
    assert latest is not None and latest.outcome == "no_progress", result
    assert result["ok"] is False
    assert result["reason"].startswith(f"{NAMES[cli]} could not reach its API: ")
    assert '{"type"' not in result["output"]


# How each release ends on Kernel's SIGTERM (recorded 2026-12-05, tests/delegate/
# test_ending.py): claude 2.1.332 exits 143, gemini-cli 0.61.0 exits 0, codex dies of it.
EXIT_ON_SIGTERM = {"claude_code": 143, "codex": None, "gemini": 0}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cli", ["claude_code", "codex", "gemini"])
async def test_a_short_timeout_after_unreachable_warnings_names_the_cause_and_the_exit(
    cli: str,
    real_bin: Callable[[str], Path],
    make_config: Callable[..., Config],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 35: a time limit shorter than the no-progress one ends the run after the
    CLI's first retry warning; the result names that warning and Kernel's SIGTERM, not
    a bare "timed out" with exit code 0."""
    binary = real_bin(COMMANDS[cli])
    port = closed_port()
    url = f"http://127.0.0.1:{port}" + ("/v1" if cli == "codex" else "")
    point_at(cli, tmp_path / "home", url, monkeypatch)
    section = cli_section(cli, command=str(binary), timeout=120.0, no_progress_timeout=5000.0)
    delegator = Delegator(make_config(section), kill_grace=15.0)  # node may be slow to exit
    delegator.clock = leap_when_troubled(delegator)

    result = await delegator.delegate(TASK, cli=cli, conversation="real")

    print(f"\n{cli} {result['version']}: {result['reason']}")  # noqa: T201
    latest = delegator.latest("real")
    assert latest is not None and latest.outcome == "timeout", result
    assert result["ok"] is False
    assert (result["exit_code"], result["signal"]) == (EXIT_ON_SIGTERM[cli], "SIGTERM")
    assert result["kernel_signals"] == ["SIGTERM"]
    assert result["cause"].startswith(f"{NAMES[cli]} could not reach its API: ")
    assert f"Last known cause: {result['cause']}." in result["reason"]


@pytest.mark.timeout(300)
def test_kernel_check_passes_the_defaults_and_fails_full_auto(
    real_bin: Callable[[str], Path],
    make_config: Callable[..., Config],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    binaries = {cli: real_bin(command) for cli, command in COMMANDS.items()}
    defaults = make_config(*(cli_section(c, command=str(b)) for c, b in binaries.items()))
    lines = [line.render() for line in _clis(defaults)]
    print("\n" + "\n".join(lines))  # noqa: T201
    assert all(line.startswith("[ok  ]") for line in lines), lines

    old = ["exec", "--json", "--full-auto", "--skip-git-repo-check", "--color", "never"]
    broken = make_config(cli_section("codex", command=str(binaries["codex"]), args=old))
    codex = next(line.render() for line in _clis(broken) if line.part == "cli codex")
    assert codex.startswith("[FAIL] cli codex: Codex rejects the configured arguments: ")
    assert "error: unexpected argument '--full-auto' found" in codex
    assert os.environ["HOME"] == str(tmp_path / "home")
