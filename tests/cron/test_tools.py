"""The agent's cron tools as the model calls them (run directly through /agent/process
``biz_params.tool``, the same registry path a model's call takes): refusals tell the
model what to write instead, and the agent's jobs are capped by cron.max_jobs."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from kernel.app import Kernel
from kernel.config import load_config
from tests.clock import ManualClock
from tests.conftest import write_config
from tests.gateway.conftest import Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim

TZ = ZoneInfo("Asia/Shanghai")
START = datetime(2025, 6, 1, 21, 15, tzinfo=TZ)


async def tool(sc: Sidecar, tool_name: str, /, **arguments: Any) -> tuple[bool, str]:
    body = {
        "input": [{"role": "user", "content": "-"}],
        "biz_params": {"tool": {"name": tool_name, "input": arguments}},
    }
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 200, data
    result = data["events"][1]["tool_result"]
    return result["ok"], data["reply"]


async def test_cron_tools_create_list_update_delete_with_a_quota(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    extra = "\n[cron]\nmax_jobs = 2\n"
    sc = await sidecar(anthropic_sim, extra=extra, clock=ManualClock(START))
    ok, reply = await tool(
        sc, "cron_create", name="周报", schedule="0 8 * * 1", text="总结本周新闻"
    )
    assert ok, reply
    created = json.loads(reply)
    assert created["next_run_at"] == "2025-06-02T08:00+08:00"  # Monday 08:00 local
    assert (created["channel"], created["timezone"]) == ("telegram", "Asia/Shanghai")

    ok, reply = await tool(sc, "cron_create", name="x", schedule="明早9点", text="y")
    assert not ok
    assert "YYYY-MM-DDTHH:MM" in reply and "Asia/Shanghai" in reply and "every 30m" in reply
    ok, reply = await tool(sc, "cron_create", name="x", schedule="2025-06-01T09:00", text="y")
    assert not ok and "in the past" in reply and "2025-06-01T21:15" in reply

    ok, reply = await tool(sc, "cron_create", name="喝水", schedule="every 2h", text="提醒喝水")
    assert ok
    water = json.loads(reply)["id"]
    ok, reply = await tool(sc, "cron_create", name="third", schedule="every 3h", text="z")
    assert not ok and "maximum of 2" in reply and "cron_delete" in reply

    ok, reply = await tool(sc, "cron_update", id=water, schedule="every 3h", enabled=False)
    assert ok and json.loads(reply)["enabled"] is False
    ok, reply = await tool(sc, "cron_list")
    listed = {j["name"]: j for j in json.loads(reply)}
    assert set(listed) == {"hello text job", "周报", "喝水"}
    assert listed["喝水"]["schedule"] == "every 3h" and listed["喝水"]["next_run_at"] is None

    ok, reply = await tool(sc, "cron_delete", id=water)
    assert ok
    ok, reply = await tool(sc, "cron_create", name="third", schedule="every 3h", text="z")
    assert ok  # room again
    ok, reply = await tool(sc, "cron_delete", id="nope")
    assert not ok and "kernel cron list" in reply


async def test_cron_update_is_checked_as_cron_create_is(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """cron_update is offered without the field descriptions (it refers to cron_create's
    forms) but refuses the same things."""
    sc = await sidecar(anthropic_sim, clock=ManualClock(START))
    ok, reply = await tool(sc, "cron_create", name="喝水", schedule="every 2h", text="提醒喝水")
    assert ok, reply
    water = json.loads(reply)["id"]
    ok, reply = await tool(sc, "cron_update", id=water, schedule="明早9点")
    assert not ok and "YYYY-MM-DDTHH:MM" in reply and "every 30m" in reply
    ok, reply = await tool(sc, "cron_update", id=water, name="x" * 201)
    assert not ok and "name" in reply and "200" in reply
    ok, reply = await tool(sc, "cron_update", id=water, channel="nowhere")
    assert not ok and "telegram" in reply
    ok, reply = await tool(sc, "cron_update", id=water, text=7)
    assert not ok and "text" in reply
    ok, reply = await tool(sc, "cron_list")
    [job] = [j for j in json.loads(reply) if j["id"] == water]
    assert (job["name"], job["schedule"], job["channel"]) == ("喝水", "every 2h", "telegram")

    specs = {s.name: s.parameters for s in sc.kernel.tools.specs()}
    assert all("description" not in p for p in specs["cron_update"]["properties"].values())
    assert "description" in specs["cron_create"]["properties"]["schedule"]


@pytest.mark.parametrize("enabled", [True, False])
async def test_the_cron_tools_are_offered_only_when_cron_is_on(
    tmp_path: Path, anthropic_sim: AnthropicSim, enabled: bool
) -> None:
    path = write_config(tmp_path, anthropic_sim.base_url, "claude")
    path.write_text(path.read_text() + f"[cron]\nenabled = {str(enabled).lower()}\n")
    async with Kernel(load_config(path, env={}, require_telegram=False)) as kernel:
        offered = {name for name in kernel.tools.names() if name.startswith("cron_")}
    assert offered == (
        {"cron_create", "cron_list", "cron_update", "cron_delete"} if enabled else set()
    )
