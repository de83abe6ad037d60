"""``GET /cron/jobs/{id}/runs`` on a live sidecar: a job's runs, newest first, with each
one's outcome and reason, through real runs against the model simulator (results
delivered to the webhook receiver simulator) and a restart that misses a run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.clock import ManualClock
from tests.gateway.conftest import Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error
from tests.sim.webhook_sim import WebhookSim
from tests.waiting import wait_until

START = datetime(2025, 6, 1, 7, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


@pytest.fixture
async def hook() -> AsyncIterator[WebhookSim]:
    async with WebhookSim() as sim:
        yield sim


@pytest.fixture
async def echo() -> AsyncIterator[AnthropicSim]:
    async with AnthropicSim(fallback="echo") as sim:
        yield sim


async def runs(sc: Sidecar, job_id: str, limit: str = "") -> dict[str, Any]:
    query = f"?limit={limit}" if limit else ""
    status, data, _ = await sc.call("GET", f"/cron/jobs/{job_id}/runs{query}")
    assert status == 200, data
    return dict(data)


async def run_now(sc: Sidecar, job_id: str) -> None:
    status, data, _ = await sc.call("POST", f"/cron/jobs/{job_id}/run")
    assert status == 202, data
    await wait_until(lambda: not sc.kernel.cron._runs)


async def test_runs_show_each_outcome_and_reason(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    extra = f'\n[channels.webhook]\nenabled = true\nurl = "{hook.url}"\n'
    sc = await sidecar(echo, extra=extra, clock=ManualClock(START))
    body = {
        "name": "tea",
        "schedule": "every 1d",
        "text": "tea time",
        "dispatch": {"channel": "webhook"},
    }
    status, job, _ = await sc.call("POST", "/cron/jobs", body)
    assert status == 201, job

    assert await runs(sc, job["id"]) == {"id": job["id"], "run_count": 0, "runs": []}

    await run_now(sc, job["id"])
    done = await runs(sc, job["id"])
    assert done["run_count"] == 1
    [run] = done["runs"]
    assert (run["outcome"], run["result"], run["reason"]) == ("succeeded", "echo: tea time", None)
    assert run["at"] == "2025-06-01T07:00:00+08:00"

    echo.enqueue(Error(400, "invalid_request_error", "model-a needs a paid plan"))
    await run_now(sc, job["id"])
    both = await runs(sc, job["id"])
    assert both["run_count"] == 2
    assert [r["outcome"] for r in both["runs"]] == ["failed", "succeeded"]
    assert "paid plan" in both["runs"][0]["reason"] and both["runs"][0]["result"] is None

    last = await runs(sc, job["id"], limit="1")
    assert [r["outcome"] for r in last["runs"]] == ["failed"]
    for bad in ("0", "51", "x"):
        status, error, _ = await sc.call("GET", f"/cron/jobs/{job['id']}/runs?limit={bad}")
        assert status == 400 and error["error"]["details"]["field"] == "limit", bad
    status, missing, _ = await sc.call("GET", "/cron/jobs/nope/runs")
    assert status == 404 and missing["error"]["code"] == "not_found"

    # Deleted with its job: a new job of the same id starts with no runs.
    status, _, _ = await sc.call("DELETE", f"/cron/jobs/{job['id']}")
    assert status == 200
    status, again, _ = await sc.call("POST", "/cron/jobs", body | {"id": job["id"]})
    assert status == 201, again
    assert (await runs(sc, job["id"]))["runs"] == []


async def test_a_run_missed_while_down_is_in_the_runs_with_its_reason(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    extra = f'\n[channels.webhook]\nenabled = true\nurl = "{hook.url}"\n'
    sc = await sidecar(echo, extra=extra, clock=ManualClock(START))
    body = {
        "name": "hourly",
        "schedule": "every 1h",
        "text": "tick",
        "dispatch": {"channel": "webhook"},
    }
    status, job, _ = await sc.call("POST", "/cron/jobs", body)
    assert status == 201, job
    await sc.stop()  # down from 07:00 until 09:30: the 08:00 run is missed
    later = ManualClock(START.replace(hour=9, minute=30))
    sc = await sidecar(echo, extra=extra, clock=later, keep_config=True)
    [missed] = (await runs(sc, job["id"]))["runs"]
    assert missed["outcome"] == "missed" and missed["result"] is None
    assert missed["at"] == "2025-06-01T08:00:00+08:00"
    assert "2025-06-01 08:00" in missed["reason"]
    assert echo.requests == []
