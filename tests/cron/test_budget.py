"""Cron runs and the budget (issue 16): a job's own ``runtime.budget_daily`` (else
``budget.cron_job_daily``), and the day's limit, which a cron run never asks to raise.
A run refused before its first call is skipped with the reason and nothing sent to the
model; one stopped after it made calls has failed."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from kernel.store.usage import UsageFilter
from tests.clock import ManualClock
from tests.cron.test_scheduler import create, state, texts, webhook_config
from tests.gateway.conftest import Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply
from tests.sim.webhook_sim import WebhookSim
from tests.waiting import wait_until

TZ = ZoneInfo("Asia/Shanghai")
START = datetime(2025, 6, 1, 7, 0, tzinfo=TZ)
# Output at 0.001 a token: with max_tokens 1024 a call's worst case is a little over 1.02.
PRICED = """
[providers.main.prices.model-a]
input = 10.0
output = 1000.0
[budget]
daily = {daily}
cron_job_daily = {job}
"""


async def start(
    sidecar: SidecarFactory, model: AnthropicSim, hook: WebhookSim, daily: float, job: float
) -> Sidecar:
    extra = webhook_config(hook.url) + PRICED.format(daily=daily, job=job)
    return await sidecar(model, extra=extra, clock=ManualClock(START))


async def run_now(sc: Sidecar, job_id: str) -> dict[str, Any]:
    status, _, _ = await sc.call("POST", f"/cron/jobs/{job_id}/run")
    assert status == 202
    await wait_until(lambda: not sc.kernel.cron._runs)
    return await state(sc, job_id)


async def test_a_job_over_its_own_budget_is_skipped_and_sends_nothing(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await start(sidecar, echo, hook, daily=0.0, job=0.0)
    job = await create(
        sc, name="digest", schedule="every 1d", text="hi", runtime={"budget_daily": 0.5}
    )
    assert job["runtime"]["budget_daily"] == 0.5

    done = await run_now(sc, job["id"])

    assert echo.requests == []
    assert done["last_status"] == "skipped"
    assert "This cron job today" in done["last_error"] and "$0.50" in done["last_error"]
    await hook.wait_until(lambda: len(hook.posts) == 1)
    # a webhook is not the owner: it hears the job was skipped, not what the owner spent
    assert texts(hook)[0] == "⏸ Cron job “digest” skipped this run: over the budget"
    assert (await sc.kernel.agent.meter.ledger.total(UsageFilter())).calls == 0


async def test_the_default_job_limit_applies_unless_the_job_sets_its_own(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await start(sidecar, echo, hook, daily=0.0, job=0.5)
    limited = await create(sc, name="a", schedule="every 1d", text="one")
    free = await create(sc, name="b", schedule="every 1d", text="two", runtime={"budget_daily": 0})

    assert (await run_now(sc, limited["id"]))["last_status"] == "skipped"
    assert echo.requests == []
    done = await run_now(sc, free["id"])
    assert (done["last_status"], done["last_result"]) == ("succeeded", "echo: two")
    rows = await sc.kernel.agent.meter.ledger.entries(UsageFilter(job_id=free["id"]))
    assert [(r.purpose, r.job_id) for r in rows] == [("cron", free["id"])]


async def test_the_days_limit_skips_a_run_and_never_asks(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await start(sidecar, echo, hook, daily=0.5, job=0.0)
    job = await create(sc, name="daily", schedule="every 1d", text="hi")

    done = await run_now(sc, job["id"])

    assert echo.requests == [] and sc.kernel.agent.asks.waiting() == []
    assert done["last_status"] == "skipped" and "Today" in done["last_error"]


async def test_a_run_stopped_after_it_made_calls_has_failed(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await start(sidecar, echo, hook, daily=0.0, job=2.0)
    job = await create(sc, name="loop", schedule="every 1d", text="work")
    echo.enqueue(tool_reply("no_such_tool", {}, usage=(0, 1500)), text_reply("never sent"))

    done = await run_now(sc, job["id"])

    assert len(echo.requests) == 1  # the second call was refused before it was sent
    assert done["last_status"] == "failed" and "$1.50" in done["last_error"]
    await hook.wait_until(lambda: len(hook.posts) == 1)
    assert "failed" in texts(hook)[0]


async def test_budget_daily_is_validated_like_the_other_runtime_fields(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await start(sidecar, echo, hook, daily=0.0, job=0.0)
    for bad in (-1, "5", True, 2_000_000):
        body = {"name": "x", "schedule": "every 1d", "text": "x", "runtime": {"budget_daily": bad}}
        body["dispatch"] = {"channel": "webhook"}
        status, error, _ = await sc.call("POST", "/cron/jobs", body)
        assert status == 400, bad
        assert error["error"]["message"] == (
            "runtime.budget_daily must be a number from 0 to 1000000 (0: no limit for this job)"
        )
    job = await create(sc, name="x", schedule="every 1d", text="x")
    assert job["runtime"]["budget_daily"] is None  # unset: budget.cron_job_daily
    path = f"/cron/jobs/{job['id']}"
    status, changed, _ = await sc.call("PUT", path, {"runtime": {"budget_daily": 3}})
    assert status == 200 and changed["runtime"]["budget_daily"] == 3.0
    assert sc.kernel.agent.meter.job_limit(job["id"]) == 3.0


async def test_a_workflow_refused_at_its_first_turn_is_skipped(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await start(sidecar, echo, hook, daily=0.0, job=0.5)
    workflow = {
        "nodes": [
            {"id": "s", "type": "start"},
            {"id": "one", "type": "text_event", "text": "first", "continue_on_error": True},
            {"id": "two", "type": "text_event", "text": "second"},
        ],
        "edges": [
            {"id": "e1", "source": "s", "target": "one"},
            {"id": "e2", "source": "one", "target": "two"},
        ],
    }
    job = await create(sc, name="flow", schedule="every 1d", workflow=workflow)

    done = await run_now(sc, job["id"])

    assert echo.requests == []
    assert done["last_status"] == "skipped" and "$0.50" in done["last_error"]
    nodes = [(n["node_id"], n["status"]) for n in done["last_execution"]["nodes"]]
    assert nodes == [("one", "failed"), ("two", "skipped")]  # no second refusal tried
