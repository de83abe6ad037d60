"""[stt] and [tts]: defaults as documented, env keys, refusals naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernel.config import SttConfig, TtsConfig, load_config
from kernel.config.secrets import secrets_of
from kernel.core.errors import ConfigError
from tests.config.test_config import BASE_ENV, REPO


def load(tmp_path: Path, text: str, **env: str) -> object:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={**BASE_ENV, **env})


def uncommented_voice_sections() -> str:
    """The example's commented [stt] and [tts] blocks with their key lines switched on."""
    example = (REPO / "config.example.toml").read_text(encoding="utf-8")
    out, on = [], False
    for line in example.splitlines():
        if re.match(r"# \[(stt|tts)\]$", line):
            on = True
            out.append(line[2:])
        elif on and re.match(r"# [a-z_]+ = ", line):
            out.append(line[2:])
        elif not line.startswith("#"):
            on = False
    return "\n".join(out) + "\n"


def test_the_documented_voice_keys_are_the_defaults(tmp_path: Path) -> None:
    text = uncommented_voice_sections()
    assert text.count("=") >= 15, text  # every documented key was picked up
    config = load(tmp_path, text, KERNEL_STT_API_KEY="stt-key", KERNEL_TTS_API_KEY="tts-key")
    assert config.stt == SttConfig(api_key="stt-key")  # type: ignore[attr-defined]
    assert config.tts == TtsConfig(api_key="tts-key")  # type: ignore[attr-defined]
    assert not hasattr(config, "extra")  # Config.extra is gone: sections are read for real


def test_without_sections_voice_is_off(tmp_path: Path) -> None:
    config = load_config(tmp_path / "config.toml", env=BASE_ENV)
    assert config.stt is None and config.tts is None


def test_env_keys_win_and_types_pick_their_default_voice(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        '[stt]\napi_base = "http://127.0.0.1:1/v1/"\napi_key = "file"\nmodel = "w"\n'
        'headers = { X-Team = "t" }\ntimeout = 5\n'
        '[tts]\ntype = "openai"\napi_key = "file"\nformat = "opus"\nffmpeg = "bin/ffmpeg"\n'
        "max_chars = 80\n",
        KERNEL_STT_API_KEY="env-stt",
        KERNEL_TTS_API_KEY="env-tts",
    )
    stt, tts = config.stt, config.tts  # type: ignore[attr-defined]
    assert (stt.api_base, stt.api_key, stt.model, stt.timeout) == (
        "http://127.0.0.1:1/v1",
        "env-stt",
        "w",
        5.0,
    )
    assert stt.headers == {"X-Team": "t"}
    assert (tts.api_key, tts.voice, tts.format, tts.max_chars) == ("env-tts", "alloy", "opus", 80)
    assert tts.ffmpeg == str(tmp_path / "bin" / "ffmpeg")  # relative to config.toml
    edge = load(tmp_path, "[tts]\n").tts  # type: ignore[attr-defined]
    assert (edge.type, edge.voice, edge.api_key) == ("edge", "zh-CN-XiaoxiaoNeural", "")


def test_sections_without_a_needed_key_are_off_with_a_warning(tmp_path: Path) -> None:
    config = load(tmp_path, '[stt]\nmodel = "whisper-1"\n[tts]\ntype = "openai"\n')
    assert config.stt is None and config.tts is None  # type: ignore[attr-defined]
    warnings = " ".join(config.warnings)  # type: ignore[attr-defined]
    assert "KERNEL_STT_API_KEY" in warnings and "KERNEL_TTS_API_KEY" in warnings


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[tts]\ntype = "azure"\n', "tts.type"),
        ('[tts]\ntype = "openai"\napi_key = "k"\nformat = "ogg"\n', "tts.format"),
        ("[tts]\nmax_chars = 0\n", "tts.max_chars"),
        ('[tts]\ntimeout = "soon"\n', "tts.timeout"),
        ('[tts]\nvoice = ""\n', "tts.voice"),
        ('[stt]\napi_key = "k"\nmodel = ""\n', "stt.model"),
        ("[stt]\napi_key = 12345678901\n", "stt.api_key"),
        ("[stt]\nheaders = 'x'\n", "stt.headers"),
        ("stt = 1\n", "stt"),
    ],
)
def test_bad_voice_settings_are_refused_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    assert caught.value.key == key and key in str(caught.value)
    assert "12345678901" not in str(caught.value)  # a key in the wrong place is masked


def test_voice_secrets_are_known_to_the_log_redactor(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        '[stt]\napi_key = "stt-secret-123456"\nheaders = { X-Token = "stt-header-123456" }\n'
        '[tts]\nproxy = "http://u:proxy-pass-123456@127.0.0.1:3128"\n',
    )
    secrets = secrets_of(config)  # type: ignore[arg-type]
    assert {"stt-secret-123456", "stt-header-123456"} <= set(secrets)
    assert any("proxy-pass-123456" in s for s in secrets)
