"""Configuration: location, env overrides, defaults == config.example.toml, refusals."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from kernel.__main__ import main
from kernel.config import Config, load_config

REPO = Path(__file__).resolve().parents[2]
BASE_ENV = {
    "KERNEL_TELEGRAM_TOKEN": "123456:telegram-token-abcdefgh",
    "KERNEL_TELEGRAM_ALLOWED_USER": "4242",
    "KERNEL_PROVIDER_ANTHROPIC_API_KEY": "sk-ant-env-0123456789",
}


def comparable(config: Config) -> dict[str, object]:
    data = config.model_dump()
    data.pop("path")
    data.pop("warnings")
    return data


def test_no_config_file_means_the_example_defaults(tmp_path: Path) -> None:
    defaults = load_config(tmp_path / "config.toml", env=BASE_ENV)
    example_copy = tmp_path / "config.toml"
    example_copy.write_text((REPO / "config.example.toml").read_text(encoding="utf-8"))
    from_example = load_config(example_copy, env=BASE_ENV)
    assert comparable(defaults) == comparable(from_example)
    assert defaults.general.data_dir == tmp_path / "data"
    assert defaults.providers["anthropic"].api_key == BASE_ENV["KERNEL_PROVIDER_ANTHROPIC_API_KEY"]
    assert defaults.telegram.allowed_user == 4242


def test_env_wins_and_paths_resolve_from_the_config_folder(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "config.toml").write_text(
        """
[telegram]
token = "file-token"
allowed_user = 1
api_base = "http://127.0.0.1:9999/"
[general]
data_dir = "state"
default_provider = "local"
[providers.local]
type = "openai_compat"
api_base = "http://127.0.0.1:1234/v1"
api_key = "file-key"
default_model = "m"
[providers.spare]
type = "openai_compat"
default_model = "m2"
[[mcp.servers]]
name = "docs"
url = "http://127.0.0.1:1/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
[[mcp.servers]]
name = "ok"
url = "http://127.0.0.1:2/mcp"
headers = { X-Key = "${OK_TOKEN}" }
""",
        encoding="utf-8",
    )
    env = {
        "KERNEL_CONFIG": str(folder / "config.toml"),
        "KERNEL_TELEGRAM_TOKEN": "env-token",
        "KERNEL_PROVIDER_LOCAL_API_KEY": "env-key",
        "OK_TOKEN": "abc",
    }
    config = load_config(env=env)
    assert config.telegram.token == "env-token"
    assert config.telegram.api_base == "http://127.0.0.1:9999"
    assert config.providers["local"].api_key == "env-key"
    assert config.providers["local"].api_base == "http://127.0.0.1:1234/v1"
    assert config.data_dir == folder / "state"
    assert config.general.soul == folder / "SOUL.md"
    assert list(config.enabled_providers) == ["local"]  # spare has no key: disabled
    assert any("spare" in w and "KERNEL_PROVIDER_SPARE_API_KEY" in w for w in config.warnings)
    assert [s.name for s in config.mcp_servers] == ["ok"]
    assert config.mcp_servers[0].headers == {"X-Key": "abc"}
    assert any("docs" in w and "DOCS_TOKEN" in w for w in config.warnings)


REFUSALS = [
    # (config.toml text or None, env changes, key named in the refusal)
    (None, {"KERNEL_TELEGRAM_TOKEN": None}, "telegram.token"),
    (None, {"KERNEL_TELEGRAM_ALLOWED_USER": None}, "telegram.allowed_user"),
    (None, {"KERNEL_TELEGRAM_ALLOWED_USER": "me"}, "telegram.allowed_user"),
    (None, {"KERNEL_PROVIDER_ANTHROPIC_API_KEY": None}, "providers.anthropic.api_key"),
    ('[general]\ndefault_provider = "nope"\n', {}, "general.default_provider"),
    (
        "[providers.c]\ntype = 'claude'\ndefault_model = 'x'\napi_key = 'k'\n"
        "[general]\ndefault_provider = 'c'\n",
        {},
        "providers.c.max_tokens",
    ),
    ("[providers.x]\ntype = 'gpt'\n", {}, "providers.x.type"),
    ("[providers.anthropic]\ntype = 'claude'\nmax_tokens = 10\n", {}, "default_model"),
    ("[general]\ncontext_rounds = 'many'\n", {}, "general.context_rounds"),
    ("[general]\ncontext_rounds = 0\n", {}, "general.context_rounds"),
    ('[general]\ntimezone = "Mars/Olympus"\n', {}, "general.timezone"),
    ('[general]\nlanguage = "fr"\n', {}, "general.language"),
    ('[gateway]\nhost = "0.0.0.0"\n', {}, "gateway.api_key"),
    ("[telegram\ntoken = 1\n", {}, "config.toml"),
    ("[tools.memory_add]\napproval = 'yes'\n", {}, "tools.memory_add.approval"),
    ("[tools.memory_add]\napproval_timeout = 0\n", {}, "tools.memory_add.approval_timeout"),
    ("[tools]\nmemory_add = true\n", {}, "tools.memory_add"),
    (None, {"KERNEL_CONFIG": "/nonexistent/kernel.toml"}, "KERNEL_CONFIG"),
]


@pytest.mark.parametrize(("text", "env_changes", "key"), REFUSALS)
def test_refusals_are_one_line_exit_2(
    text: str | None,
    env_changes: dict[str, str | None],
    key: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if text is not None:
        (tmp_path / "config.toml").write_text(text, encoding="utf-8")
    env = {**BASE_ENV, **env_changes}
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)

    assert main([]) == 2

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kernel: ")
    assert key in err
    assert "Traceback" not in err
    for secret in BASE_ENV.values():
        assert secret not in err


@pytest.mark.slow
def test_refusal_through_the_real_entry_point(tmp_path: Path) -> None:
    """`python -m kernel` as the owner runs it: exit code 2, one line, no traceback."""

    async def run() -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kernel",
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "KERNEL_LANGUAGE": "en"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        return proc.returncode or 0, err.decode()

    code, err = asyncio.run(run())
    assert code == 2
    assert err.strip().splitlines() == [err.strip()]
    assert "telegram.token" in err and "@BotFather" in err


def test_other_provider_without_key_is_only_disabled(tmp_path: Path) -> None:
    config = load_config(tmp_path / "config.toml", env=BASE_ENV)
    assert "openai" in config.providers and "openai" not in config.enabled_providers
    assert any("KERNEL_PROVIDER_OPENAI_API_KEY" in w for w in config.warnings)


def test_tool_switches(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[tools.memory_delete]\nenabled = false\n"
        "[tools.delegate_to_cli]\napproval = true\napproval_timeout = 60\n",
        encoding="utf-8",
    )
    config = load_config(path, env=BASE_ENV)
    assert "memory_delete" in config.general.disabled_tools
    policy = config.tools["delegate_to_cli"]
    assert policy.approval and policy.approval_timeout == 60.0


def test_misspelled_keys_are_warned_about_and_the_example_has_none(tmp_path: Path) -> None:
    example = tmp_path / "config.toml"
    example.write_text((REPO / "config.example.toml").read_text(encoding="utf-8"))
    assert [w for w in load_config(example, env=BASE_ENV).warnings if "unknown" in w] == []

    example.write_text(
        '[telegram]\ntokne = "x"\n[providers.anthropic]\ntype = "claude"\nmax_tokens = 9\n'
        'default_model = "m"\nmodle = "n"\n[tools.ask_user]\napprove = true\n[colour]\n',
        encoding="utf-8",
    )
    warnings = " | ".join(load_config(example, env={**BASE_ENV, "KERNEL_LANGUAGE": "en"}).warnings)
    for key in ("telegram.tokne", "providers.anthropic.modle", "tools.ask_user.approve", "colour"):
        assert f"unknown key {key} " in warnings


def test_kernel_language_applies_to_a_refused_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.toml").write_text("[telegram\n", encoding="utf-8")
    for name, value in {**BASE_ENV, "KERNEL_LANGUAGE": "en"}.items():
        monkeypatch.setenv(name, value)
    assert main([]) == 2
    assert "is not valid TOML" in capsys.readouterr().err
