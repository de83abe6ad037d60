"""/config/channels: list, types, get, set; secrets masked; changes kept in
data/runtime.toml, validated as a whole configuration, live at once and after a restart."""

from __future__ import annotations

import tomllib

from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim

QQ_SECRET = "qq-client-secret-abcdefgh"


async def test_channel_settings_list_get_set_and_persist(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, listed, _ = await sc.call("GET", "/config/channels")
    assert status == 200 and set(listed["channels"]) == {"console", "webhook", "qq"}
    assert listed["channels"]["webhook"]["enabled"] is False
    assert listed["channels"]["qq"]["token_url"] == "https://bots.qq.com/app/getAppAccessToken"

    status, types, _ = await sc.call("GET", "/config/channels/types")
    qq = next(k for k in types["types"] if k["name"] == "qq")
    fields = {f["name"]: f for f in qq["fields"]}
    assert fields["client_secret"]["secret"] is True and fields["enabled"]["type"] == "boolean"

    status, refused, _ = await sc.call("PUT", "/config/channels/qq", {"enabled": True})
    assert status == 400 and "channels.qq.app_id" in refused["error"]["message"]
    change = {"enabled": True, "app_id": "1020", "client_secret": QQ_SECRET, "bot_prefix": "[K] "}
    status, saved, _ = await sc.call("PUT", "/config/channels/qq", change)
    assert status == 200, saved
    assert saved["client_secret"] == "qq-c…efgh" and QQ_SECRET not in str(saved)
    assert sc.kernel.config.channels.qq.client_secret == QQ_SECRET  # live now
    overlay = tomllib.loads(sc.kernel.config.runtime_path.read_text())
    assert overlay["channels"]["qq"]["client_secret"] == QQ_SECRET
    assert (sc.kernel.config.runtime_path.stat().st_mode & 0o777) == 0o600

    # Sending the masked value back (as a form would) keeps the secret.
    status, again, _ = await sc.call(
        "PUT", "/config/channels/qq", {"client_secret": "qq-c…efgh", "target_type": "group"}
    )
    assert status == 200 and again["target_type"] == "group"
    assert sc.kernel.config.channels.qq.client_secret == QQ_SECRET

    status, got, _ = await sc.call("GET", "/config/channels/qq")
    assert got["bot_prefix"] == "[K] " and got["client_secret"] == "qq-c…efgh"

    for body, hint in (
        ({"colour": "red"}, "colour"),
        ({"timeout_seconds": "fast"}, "timeout_seconds"),
        ({"target_type": "planet"}, "channels.qq.target_type"),
        ({"api_base": "ftp://x"}, "channels.qq.api_base"),
    ):
        status, data, _ = await sc.call("PUT", "/config/channels/qq", body)
        assert status == 400 and hint in data["error"]["message"], data
    status, data, _ = await sc.call("GET", "/config/channels/sms")
    assert status == 400 and data["error"]["code"] == "channel_not_supported"
    status, data, _ = await sc.call("PUT", "/config/channels/webhook", {"enabled": True})
    assert status == 400 and "channels.webhook.url" in data["error"]["message"]

    await sc.stop()
    sc = await sidecar(anthropic_sim, keep_config=True)
    status, got, _ = await sc.call("GET", "/config/channels/qq")
    assert (got["enabled"], got["app_id"], got["target_type"]) == (True, "1020", "group")
