"""A coding CLI added by a plugin (seed 003; issue 38 item 9): one adapter registered
through ``Plugins.add_cli`` (its command line, its output format, its version probe),
read from ``[cli.<name>]`` and delegated to with no change to the configuration's types
or to the Delegator; its ``env`` reaches that CLI only, and a loader variable in it is
the owner's to set (the privilege rule refuses a sidecar console's)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel.config import cli as cli_config
from kernel.config import load_config
from kernel.config.cli import CliSpec
from kernel.core.errors import CodedError
from kernel.delegate import adapters
from kernel.delegate.adapters import CliAdapter
from kernel.delegate.formats import DISPLAY_NAMES, Formatter
from kernel.plugins import DEFAULT_PLUGINS, Plugins, load_plugins
from kernel.runtime import Runtime
from tests.delegate.conftest import ConfigFactory, delegator_for

NAME = "echo_cli"

# A CLI none of the built-ins knows: its task follows --task, its version is asked with
# "version", and it prints its own JSONL ({"type": "say"}, then {"type": "result"}).
SCRIPT = """#!{python}
import json, os, sys
if sys.argv[1:] == ["version"]:
    print("echo-cli 9.9.9")
    sys.exit(0)
with open(os.environ["ECHO_RECORD"], "w") as out:
    json.dump({{"argv": sys.argv, "env": dict(os.environ)}}, out)
task = sys.argv[sys.argv.index("--task") + 1]
for text in ("working on " + task, "greeting: " + os.environ.get("ECHO_GREETING", "-")):
    print(json.dumps({{"type": "say", "text": text}}), flush=True)
print(json.dumps({{"type": "result", "ok": True}}), flush=True)
"""


class EchoStream(Formatter):
    def __init__(self) -> None:
        super().__init__()
        self.said: list[str] = []

    def event(self, kind: str, event: dict[str, Any]) -> list[str]:
        if kind != "say":
            return []
        self.said.append(str(event["text"]))
        return [str(event["text"])]

    def answer(self) -> str:
        return "\n".join(self.said)


class EchoCli(CliAdapter):
    spec = CliSpec(NAME, "echo-cli", ("--quiet",), defaults={"output": "jsonl"})
    display = "Echo CLI"

    def stream(self) -> Formatter:
        return EchoStream()

    def argv(
        self, executable: str, args: list[str], task: str, extra: list[str], system: str
    ) -> list[str]:
        return [executable, *args, *extra, "--task", task]

    def version_argv(self, executable: str) -> list[str]:
        return [executable, "version"]


def echo_plugin(plugins: Plugins) -> None:
    plugins.add_cli(EchoCli())


@pytest.fixture
def plugged() -> Iterator[Plugins]:
    """The built-ins and the echo plugin; registrations are process-wide, so the echo
    CLI is taken away again after the test."""
    assert NAME not in cli_config.SPECS
    try:
        yield load_plugins([*DEFAULT_PLUGINS, "tests.delegate.test_cli_plugin:echo_plugin"])
    finally:
        cli_config.SPECS.pop(NAME, None)
        adapters.ADAPTERS.pop(NAME, None)
        DISPLAY_NAMES.pop(NAME, None)


def echo_section(command: Path, env: dict[str, str]) -> str:
    pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
    return f"[cli.{NAME}]\ncommand = {json.dumps(str(command))}\nenv = {{ {pairs} }}\n"


def echo_script(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "echo-cli"
    path.write_text(SCRIPT.format(python=sys.executable), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


async def test_a_cli_registered_by_a_plugin_is_delegated_to_with_its_own_env(
    plugged: Plugins,
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert plugged.clis == [NAME]
    record = tmp_path / "record.json"
    monkeypatch.setenv("ECHO_RECORD", str(record))
    script = echo_script(tmp_path / "bin")
    config = make_config(echo_section(script, {"ECHO_GREETING": "hello from [cli] env"}))
    assert config.cli[NAME].jsonl and config.cli[NAME].args == ["--quiet"]  # its defaults
    result = await delegator_for(config).delegate("count the files", cli=NAME, conversation="c")
    assert result["ok"] is True, result
    assert result["cli"] == NAME and result["version"] == "echo-cli 9.9.9"
    assert result["output"] == "working on count the files\ngreeting: hello from [cli] env"
    ran = json.loads(record.read_text())
    assert ran["argv"][1:] == ["--quiet", "--task", "count the files"]
    assert ran["env"]["ECHO_GREETING"] == "hello from [cli] env"
    assert "ECHO_GREETING" not in os.environ and "ECHO_GREETING" not in config.envs
    assert config.cli["claude_code"].env == {}  # that CLI's own, no other's


async def test_a_loader_variable_in_a_cli_env_is_the_owners_to_set(
    plugged: Plugins, make_config: ConfigFactory, tmp_path: Path
) -> None:
    config = make_config(echo_section(echo_script(tmp_path / "bin"), {"ECHO_GREETING": "hi"}))
    runtime = Runtime(config)

    def preload(overlay: dict[str, Any]) -> None:
        overlay["cli"] = {NAME: {"env": {"ECHO_GREETING": "hi", "LD_PRELOAD": "/tmp/evil.so"}}}

    # A web-console session, with no Telegram to confirm it in: refused, naming the field.
    with pytest.raises(CodedError) as refused:
        await runtime.update(preload, caller="console")
    assert refused.value.code == "privilege_required"
    assert refused.value.details["fields"] == [f"cli.{NAME}.env.LD_PRELOAD"]
    message = str(refused.value)
    assert f"cli.{NAME}.env.LD_PRELOAD" in message and f"[cli.{NAME}] env" in message
    assert "LD_PRELOAD" not in config.cli[NAME].env and not config.runtime_path.exists()

    # A credential's name is anyone's with the sidecar; the owner may set the loader.
    def token(overlay: dict[str, Any]) -> None:
        overlay["cli"] = {NAME: {"env": {"ECHO_API_KEY": "sk-echo"}}}

    fresh = await runtime.update(token, caller="console")
    assert fresh.cli[NAME].env == {"ECHO_GREETING": "hi", "ECHO_API_KEY": "sk-echo"}
    fresh = await runtime.update(preload, caller="owner")
    assert fresh.cli[NAME].env["LD_PRELOAD"] == "/tmp/evil.so"


def test_an_unregistered_cli_table_is_left_out_with_a_warning(
    make_config: ConfigFactory, tmp_path: Path
) -> None:
    config = make_config(echo_section(tmp_path / "echo-cli", {}))
    assert NAME not in config.cli and list(config.cli) == ["claude_code", "codex", "gemini"]
    assert any(NAME in w for w in config.warnings)


def test_registration_reads_no_config_and_loads_a_plugin_cli(
    plugged: Plugins, make_config: ConfigFactory, tmp_path: Path
) -> None:
    config = make_config("")
    assert list(config.cli) == ["claude_code", "codex", "gemini", NAME]
    assert config.cli[NAME].command == "echo-cli"
    path = tmp_path / "config.toml"
    again = load_config(path, env={}, require_telegram=False)
    assert NAME in again.cli
