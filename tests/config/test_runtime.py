"""data/runtime.toml layered over config.toml; the sidecar's config keys; aliases,
``enabled``, URLs and [envs]."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest

from kernel.config import gateway_of, load_config
from kernel.config.secrets import is_sensitive
from kernel.core.errors import ConfigError
from kernel.runtime import Runtime, child_env

KEY = "sk-ant-0123456789abcdef"
ENV = {"KERNEL_PROVIDER_ANTHROPIC_API_KEY": KEY}


def write(folder: Path, text: str, runtime: str | None = None) -> Path:
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    if runtime is not None:
        (folder / "data").mkdir(exist_ok=True)
        (folder / "data" / "runtime.toml").write_text(runtime, encoding="utf-8")
    return path


def test_overlay_changes_the_default_pair_without_replacing_it(tmp_path: Path) -> None:
    runtime = '[providers.openai]\napi_key = "sk-openai-abcdefgh"\nmodels = ["gpt-5.5"]\n'
    config = load_config(write(tmp_path, "", runtime), env=ENV, require_telegram=False)
    assert set(config.providers) == {"anthropic", "openai"}
    assert config.providers["openai"].enabled
    assert config.providers["openai"].models == ["gpt-5.5"]
    assert config.providers["anthropic"].api_base == "https://api.anthropic.com"


def test_overlay_wins_over_config_toml_table_by_table(tmp_path: Path) -> None:
    text = (
        '[providers.anthropic]\ntype = "claude"\nmax_tokens = 100\ndefault_model = "m"\n'
        'api_base = "https://a.example"\n[envs]\nA = "from config"\nB = "b"\n'
    )
    runtime = '[providers.anthropic]\napi_base = "http://127.0.0.1:9"\n[envs]\nA = "runtime"\n'
    config = load_config(write(tmp_path, text, runtime), env=ENV, require_telegram=False)
    p = config.providers["anthropic"]
    assert (p.api_base, p.max_tokens, p.default_model) == ("http://127.0.0.1:9", 100, "m")
    assert config.envs == {"A": "runtime", "B": "b"}
    assert child_env(config, {"PATH": "/bin", "A": "process"}) == {
        "PATH": "/bin",
        "A": "runtime",
        "B": "b",
    }


def test_broken_runtime_file_is_a_one_line_refusal(tmp_path: Path) -> None:
    path = write(tmp_path, "", "[providers\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env=ENV, require_telegram=False)
    assert "runtime.toml" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[gateway]\nport = 70000\n", "gateway.port"),
        ("[gateway]\nread_timeout = 0\n", "gateway.read_timeout"),
        ("[gateway]\nmax_body_bytes = -1\n", "gateway.max_body_bytes"),
        ("[gateway]\nqueue_timeout = 'x'\n", "gateway.queue_timeout"),
        ("[providers.anthropic]\nenabled = false\n", "providers.anthropic.enabled"),
        ('[providers.anthropic]\naliases = { s = "gpt" }\n', "providers.anthropic.aliases.s"),
        ('[providers.anthropic]\napi_base = "api.example.com"\n', "providers.anthropic.api_base"),
        ('[envs]\n"1X" = "v"\n', "envs.1X"),
        ("[envs]\nX = 1\n", "envs.X"),
    ],
)
def test_refusals_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    base = '[providers.anthropic]\ntype = "claude"\nmax_tokens = 10\ndefault_model = "m"\n'
    if text.startswith("[providers.anthropic]"):
        text = base + text.split("\n", 1)[1]
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), env=ENV, require_telegram=False)
    assert info.value.key == key
    assert "\n" not in str(info.value)


def test_switched_off_provider_and_aliases(tmp_path: Path) -> None:
    text = (
        '[providers.anthropic]\ntype = "claude"\nmax_tokens = 10\ndefault_model = "m"\n'
        'models = ["m", "big"]\naliases = { large = "big" }\n'
        '[providers.spare]\ntype = "openai_compat"\napi_key = "k-123456789"\n'
        'default_model = "x"\nenabled = false\n'
    )
    config = load_config(write(tmp_path, text), env=ENV, require_telegram=False)
    assert not config.providers["spare"].enabled and "spare" not in config.enabled_providers
    assert config.providers["anthropic"].resolve("large") == "big"
    assert config.providers["anthropic"].resolve("m") == "m"
    assert config.providers["anthropic"].resolve("nope") is None


def test_gateway_of_reads_only_the_gateway(tmp_path: Path) -> None:
    # The rest would be refused (no key for the default provider): the client still works.
    path = write(tmp_path, '[gateway]\nport = 9001\napi_key = "gw-key-12345678"\n')
    with pytest.raises(ConfigError):
        load_config(path, env={}, require_telegram=False)
    gateway = gateway_of(path, env={})
    assert (gateway.url, gateway.api_key) == ("http://127.0.0.1:9001", "gw-key-12345678")
    assert gateway_of(path, env={"KERNEL_GATEWAY_API_KEY": "env-key"}).api_key == "env-key"
    wildcard = write(tmp_path, '[gateway]\nhost = "::"\napi_key = "k"\n')
    assert gateway_of(wildcard, env={}).url == "http://[::1]:8088"


async def test_runtime_update_validates_then_writes_atomically(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    config = load_config(path, env=ENV, require_telegram=False)
    runtime = Runtime(config)
    changed: list[set[str]] = []
    runtime.on_providers_changed(changed.append)

    def bad(overlay: dict[str, object]) -> None:
        overlay["providers"] = {"anthropic": {"enabled": False}}

    with pytest.raises(ConfigError):
        await runtime.update(bad)
    assert not config.runtime_path.exists() and changed == []

    def good(overlay: dict[str, object]) -> None:
        overlay["providers"] = {"openai": {"api_key": "sk-openai-abcdefgh"}}
        overlay["envs"] = {"GH_TOKEN": "ghp_x"}

    await runtime.update(good)
    assert changed == [{"openai"}]
    assert config.providers["openai"].enabled and config.envs == {"GH_TOKEN": "ghp_x"}
    assert stat.S_IMODE(config.runtime_path.stat().st_mode) == 0o600
    assert tomllib.loads(config.runtime_path.read_text())["envs"] == {"GH_TOKEN": "ghp_x"}
    assert path.read_text() == ""  # config.toml never rewritten
    assert [p.name for p in config.runtime_path.parent.iterdir()] == ["runtime.toml"]


def test_sensitive_names() -> None:
    for name in ("OPENAI_API_KEY", "gh_token", "APP_SECRET", "api_key"):
        assert is_sensitive(name)
    for name in ("REGION", "KEYBOARD", "TOKENS_LIMIT"):
        assert not is_sensitive(name)
