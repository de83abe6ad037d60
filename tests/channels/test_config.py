"""[channels.*] and [cron] in config.toml: parsed, validated with one-line refusals that
name the key, secrets from the environment, misspellings warned about."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.config import Config, load_config
from kernel.config.secrets import secrets_of
from kernel.core.errors import ConfigError

ENV = {
    "KERNEL_TELEGRAM_TOKEN": "123456:telegram-token-abcdefgh",
    "KERNEL_TELEGRAM_ALLOWED_USER": "4242",
    "KERNEL_PROVIDER_ANTHROPIC_API_KEY": "sk-ant-env-0123456789",
    "KERNEL_LANGUAGE": "en",
}


def load(tmp_path: Path, text: str, **env: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env={**ENV, **env})


def test_channel_and_cron_sections_are_read(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        """
[channels.webhook]
enabled = true
url = "https://hooks.example.com/k/"
secret = "file-secret-0123"
max_retries = 0
[channels.qq]
app_id = 102030
allowed_users = ["u1"]
[cron]
max_jobs = 5
misfire_grace_seconds = 0
""",
        KERNEL_QQ_CLIENT_SECRET="env-qq-secret-0123",
    )
    channels = config.channels
    assert channels.webhook.url == "https://hooks.example.com/k"
    assert (channels.webhook.max_retries, channels.qq.app_id) == (0, "102030")
    assert channels.qq.client_secret == "env-qq-secret-0123"  # the environment wins
    assert channels.qq.allowed_users == ["u1"] and channels.console.enabled is True
    assert (config.cron.max_jobs, config.cron.misfire_grace_seconds) == (5, 0.0)
    assert {"file-secret-0123", "env-qq-secret-0123"} <= set(secrets_of(config))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[channels.webhook]\nenabled = true\n", "channels.webhook.url"),
        ('[channels.webhook]\nurl = "ftp://x"\n', "channels.webhook.url"),
        ('[channels.qq]\nenabled = true\napp_id = "1"\n', "channels.qq.client_secret"),
        ('[channels.qq]\ntarget_type = "room"\n', "channels.qq.target_type"),
        ("[channels.webhook]\nmax_retries = -1\n", "channels.webhook.max_retries"),
        ("[cron]\nmax_jobs = 0\n", "cron.max_jobs"),
        ("[cron]\nmisfire_grace_seconds = -5\n", "cron.misfire_grace_seconds"),
    ],
)
def test_refusals_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    assert info.value.key == key and key in str(info.value) and "\n" not in str(info.value)


def test_misspelled_channel_keys_are_warned_about(tmp_path: Path) -> None:
    config = load(tmp_path, "[channels.qq]\napp_idd = 1\n[channels.sms]\n[cron]\nmax_job = 3\n")
    warned = " ".join(config.warnings)
    for key in ("channels.qq.app_idd", "channels.sms", "cron.max_job"):
        assert key in warned


def test_a_webhook_slower_than_the_delivery_timeout_is_warned_about(tmp_path: Path) -> None:
    text = '[channels.webhook]\nenabled = true\nurl = "http://127.0.0.1:9/h"\n'
    quick = load(tmp_path, text + "max_retries = 1\ntimeout_seconds = 5.0\n")  # 2×5+1.2 = 11.2 s
    assert not [w for w in quick.warnings if "webhook" in w]
    slow = load(tmp_path, text + "[cron]\ndelivery_timeout = 10.0\n")  # 4×10+(1+2+4)×1.2 = 48.4 s
    [warning] = [w for w in slow.warnings if "webhook" in w]
    assert "channels.webhook.max_retries" in warning and "48.4 s" in warning and "10 s" in warning
