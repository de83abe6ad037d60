"""``kernel cron …`` and ``kernel channels …``: the real command as a process, against
a live sidecar."""

from __future__ import annotations

import json

from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.gateway.test_cli import kernel
from tests.sim.anthropic_sim import AnthropicSim
from tests.waiting import wait_until


async def test_cron_verbs(sidecar: SidecarFactory) -> None:
    async with AnthropicSim(fallback="echo") as model:
        sc = await sidecar(model, api_key=API_KEY)
        code, out, err = await kernel(
            sc,
            "cron",
            "create",
            "--id",
            "water",
            "--name",
            "喝水",
            "--every",
            "2h",
            "--text",
            "提醒喝水",
            "--channel",
            "console",
        )
        assert (code, err) == (0, "") and out.startswith('created water "喝水", next run: ')

        code, out, _ = await kernel(sc, "cron", "list")
        lines = out.splitlines()
        assert lines[0].split() == ["ID", "STATUS", "SCHEDULE", "NEXT", "LAST", "CHANNEL", "NAME"]
        default = next(line for line in lines if line.startswith("cron-default"))
        assert default.split()[1] == "disabled" and default.endswith("hello text job")
        water = next(line for line in lines if line.startswith("water"))
        assert water.split()[1:4] == ["enabled", "every", "2h"] and water.endswith("喝水")

        code, out, _ = await kernel(sc, "cron", "update", "water", "--cron", "0 9 * * *")
        assert code == 0 and "next run:" in out and "09:00" in out
        code, out, _ = await kernel(sc, "cron", "pause", "water")
        assert (code, out) == (0, 'paused water "喝水"\n')
        code, out, _ = await kernel(sc, "cron", "state", "water")
        assert "paused: true" in out and "next_run_at: -" in out
        code, out, _ = await kernel(sc, "cron", "resume", "water")
        assert code == 0 and out.startswith('resumed water "喝水", next run: ')

        code, out, _ = await kernel(sc, "cron", "run", "water")
        assert (code, out) == (0, "water started; see the outcome with kernel cron state water\n")
        await wait_until(lambda: sc.kernel.cron.jobs["water"].row.last_status == "succeeded")
        code, out, _ = await kernel(sc, "cron", "state", "water", "--json")
        state = json.loads(out)
        assert (state["last_status"], state["last_result"]) == ("succeeded", "echo: 提醒喝水")
        # console delivery: the result is in a console chat
        _, chats, _ = await sc.call("GET", "/chats?channel=console")
        assert any(c["session_id"] == "water" for c in chats["chats"])

        code, out, err = await kernel(
            sc, "cron", "create", "--name", "x", "--every", "1s", "--text", "y"
        )
        assert code == 1 and "(invalid_cron_schedule)" in err and "Asia/Shanghai" in err
        code, out, err = await kernel(sc, "cron", "delete", "cron-default")
        assert code == 1 and "(default_cron_protected)" in err
        code, out, _ = await kernel(sc, "cron", "delete", "water")
        assert (code, out) == (0, "deleted water\n")
        code, _, err = await kernel(sc, "cron", "state", "water")
        assert code == 1 and "(not_found)" in err


async def test_channels_verbs(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    code, out, _ = await kernel(sc, "channels", "types")
    assert code == 0 and "qq: the official QQ bot open platform" in out and "client_secret*" in out
    code, out, err = await kernel(
        sc,
        "channels",
        "set",
        "webhook",
        "enabled=true",
        "url=http://127.0.0.1:9/hook",
        "secret=whsec-abcdefghijkl",
        "max_retries=1",
    )
    assert code == 0, err
    assert "saved channel webhook" in out and "secret = whse…ijkl" in out
    assert "whsec-abcdefghijkl" not in out
    code, out, _ = await kernel(sc, "channels", "get", "webhook")
    assert "  enabled = true" in out and "  max_retries = 1" in out
    code, out, _ = await kernel(sc, "channels", "list", "--json")
    assert json.loads(out)["channels"]["webhook"]["url"] == "http://127.0.0.1:9/hook"
    assert sc.kernel.config.channels.webhook.secret == "whsec-abcdefghijkl"
    code, _, err = await kernel(sc, "channels", "set", "webhook", "max_retries=lots")
    assert code == 1 and "max_retries" in err
    code, _, err = await kernel(sc, "channels", "get", "fax")
    assert code == 1 and "(channel_not_supported)" in err
