"""The scheduler through the sidecar's /cron/jobs routes, with an injected clock, the
model simulator answering every prompt ("echo: …") and results delivered to the
webhook receiver simulator."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tests.clock import ManualClock
from tests.gateway.conftest import Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply
from tests.sim.webhook_sim import WebhookSim
from tests.waiting import wait_until

TZ = ZoneInfo("Asia/Shanghai")
START = datetime(2025, 6, 1, 7, 0, tzinfo=TZ)


def webhook_config(url: str, **extra: Any) -> str:
    lines = ["[channels.webhook]", "enabled = true", f'url = "{url}"']
    lines += [f"{k} = {v!r}".replace("'", '"') for k, v in extra.items()]
    return "\n" + "\n".join(lines) + "\n"


async def start(
    sidecar: SidecarFactory, model: AnthropicSim, hook: WebhookSim, clock: ManualClock, **kw: Any
) -> Sidecar:
    return await sidecar(model, extra=webhook_config(hook.url), clock=clock, **kw)


async def create(sc: Sidecar, **body: Any) -> dict[str, Any]:
    body.setdefault("dispatch", {"channel": "webhook"})
    status, job, _ = await sc.call("POST", "/cron/jobs", body)
    assert status == 201, job
    return dict(job)


async def state(sc: Sidecar, job_id: str) -> dict[str, Any]:
    status, data, _ = await sc.call("GET", f"/cron/jobs/{job_id}/state")
    assert status == 200, data
    return dict(data)


async def settled(sc: Sidecar, clock: ManualClock) -> None:
    """No job is running and the scheduler sleeps again."""
    cron = sc.kernel.cron
    await wait_until(lambda: not cron._runs and any(not f.done() for _, f in clock._sleepers))


def texts(hook: WebhookSim) -> list[str]:
    return [post.json["text"] for post in hook.posts]


async def test_cron_expression_and_interval_jobs_fire_on_time(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    clock = ManualClock(START)
    sc = await start(sidecar, echo, hook, clock)
    daily = await create(
        sc, name="morning", schedule={"type": "cron", "cron": "30 8 * * *"}, text="news"
    )
    every = await create(sc, name="water", schedule="every 2h", text="drink")
    assert daily["schedule"] == {"type": "cron", "cron": "30 8 * * *", "timezone": "Asia/Shanghai"}
    assert daily["state"]["next_run_at"] == "2025-06-01T08:30:00+08:00"
    assert every["state"]["next_run_at"] == "2025-06-01T09:00:00+08:00"
    assert every["schedule"]["every"] == "2h" and every["dispatch"]["channel"] == "webhook"

    clock.advance(to=datetime(2025, 6, 1, 8, 30, tzinfo=TZ))
    await hook.wait_until(lambda: texts(hook) == ["echo: news"])
    await settled(sc, clock)
    assert (await state(sc, daily["id"]))["next_run_at"] == "2025-06-02T08:30:00+08:00"

    clock.advance(to=datetime(2025, 6, 1, 9, 0, tzinfo=TZ))
    await hook.wait_until(lambda: len(hook.posts) == 2)
    await settled(sc, clock)
    clock.advance(to=datetime(2025, 6, 1, 11, 0, tzinfo=TZ))
    await hook.wait_until(lambda: len(hook.posts) == 3)
    await settled(sc, clock)
    water = await state(sc, every["id"])
    assert water["next_run_at"] == "2025-06-01T13:00:00+08:00"  # the interval keeps its phase
    assert (water["run_count"], water["last_status"], water["last_result"]) == (
        2,
        "succeeded",
        "echo: drink",
    )

    # Across the day boundary the cron job comes back at 08:30 local (00:30 UTC): the
    # zone has no DST, so it is the same instant every day.
    clock.advance(to=datetime(2025, 6, 2, 8, 30, tzinfo=TZ))
    await hook.wait_until(lambda: texts(hook).count("echo: news") == 2)
    await settled(sc, clock)
    morning = await state(sc, daily["id"])
    assert morning["next_run_at"] == "2025-06-03T08:30:00+08:00"
    assert morning["last_run_at"] == "2025-06-02T08:30:00+08:00"
    payload = [p.json for p in hook.posts if p.json["text"] == "echo: news"][-1]
    assert (payload["channel"], payload["session_id"]) == ("cron", daily["id"])
    # The interval job, far behind after the jump, ran once, not once per missed slot.
    assert texts(hook).count("echo: drink") == 3


async def test_missed_runs_after_a_restart_follow_the_grace_policy(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    clock = ManualClock(datetime(2025, 6, 1, 10, 0, tzinfo=TZ))
    sc = await start(sidecar, echo, hook, clock)
    hourly = await create(sc, name="hourly", schedule="every 1h", text="tick")
    lenient = await create(
        sc,
        name="lenient",
        schedule="0 11 * * *",
        text="report",
        runtime={"misfire_grace_seconds": 3600},
    )
    once = await create(sc, name="once", schedule="2025-06-01T11:00", text="ping")
    await sc.stop()  # down from 10:00 …

    clock = ManualClock(datetime(2025, 6, 1, 11, 30, tzinfo=TZ))  # … until 11:30
    sc = await start(sidecar, echo, hook, clock, keep_config=True)
    await hook.wait_until(lambda: texts(hook) == ["echo: report"])  # within its grace: once
    await settled(sc, clock)
    assert len(echo.requests) == 1  # only that one ran

    skipped = await state(sc, hourly["id"])
    assert skipped["last_status"] == "skipped" and skipped["run_count"] == 0
    assert "2025-06-01 11:00" in skipped["last_error"] and "300" in skipped["last_error"]
    assert skipped["next_run_at"] == "2025-06-01T12:00:00+08:00"
    ran = await state(sc, lenient["id"])
    assert (ran["last_status"], ran["run_count"]) == ("succeeded", 1)
    assert ran["next_run_at"] == "2025-06-02T11:00:00+08:00"
    _, gone, _ = await sc.call("GET", f"/cron/jobs/{once['id']}")
    assert gone["state"]["last_status"] == "skipped" and gone["enabled"] is False
    assert gone["state"]["next_run_at"] is None

    clock.advance(to=datetime(2025, 6, 1, 12, 0, tzinfo=TZ))
    await hook.wait_until(lambda: "echo: tick" in texts(hook))


async def test_a_run_missed_by_exactly_the_grace_runs_and_one_second_more_is_skipped(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    # The documented rule: a run missed by at most misfire_grace_seconds runs at start.
    clock = ManualClock(datetime(2025, 6, 1, 10, 0, tzinfo=TZ))
    sc = await start(sidecar, echo, hook, clock)
    grace = {"misfire_grace_seconds": 600}
    at_grace = await create(
        sc, name="at", schedule="2025-06-01T11:00:00", text="on time", runtime=grace
    )
    past_grace = await create(
        sc, name="past", schedule="2025-06-01T10:59:59", text="too late", runtime=grace
    )
    await sc.stop()  # down from 10:00 …

    clock = ManualClock(datetime(2025, 6, 1, 11, 10, tzinfo=TZ))  # … 600 s and 601 s late
    sc = await start(sidecar, echo, hook, clock, keep_config=True)
    await hook.wait_until(lambda: texts(hook) == ["echo: on time"])
    await settled(sc, clock)
    assert len(echo.requests) == 1  # the other one did not run
    ran = await state(sc, at_grace["id"])
    assert (ran["last_status"], ran["run_count"]) == ("succeeded", 1)
    _, skipped, _ = await sc.call("GET", f"/cron/jobs/{past_grace['id']}")
    assert skipped["state"]["last_status"] == "skipped" and skipped["state"]["run_count"] == 0
    assert "601" in skipped["state"]["last_error"] and "600" in skipped["state"]["last_error"]
    assert skipped["enabled"] is False and skipped["state"]["next_run_at"] is None


async def test_pause_resume_run_and_state(sidecar: SidecarFactory, hook: WebhookSim) -> None:
    model = await AnthropicSim().start()
    try:
        clock = ManualClock(START)
        sc = await start(sidecar, model, hook, clock)
        job = await create(sc, name="digest", schedule="every 1h", text="digest please")
        path = f"/cron/jobs/{job['id']}"
        status, paused, _ = await sc.call("POST", path + "/pause")
        assert status == 200 and paused["state"]["paused"] is True
        assert paused["state"]["next_run_at"] is None
        clock.advance(timedelta(hours=3).total_seconds())
        await settled(sc, clock)
        assert hook.posts == [] and model.requests == []

        status, resumed, _ = await sc.call("POST", path + "/resume")
        assert resumed["state"]["paused"] is False
        assert resumed["state"]["next_run_at"] == "2025-06-01T11:00:00+08:00"  # from now

        model.enqueue(Reply(Text("slow answer", chunks=["slow ", "answer"]), stall_after=2))
        status, started, _ = await sc.call("POST", path + "/run")
        assert (status, started) == (202, {"started": True, "id": job["id"]})
        await model.wait_for_requests(1)
        assert (await state(sc, job["id"]))["running"] is True
        status, busy, _ = await sc.call("POST", path + "/run")
        assert status == 409 and busy["error"]["code"] == "cron_busy"
        assert (await state(sc, job["id"]))["last_status"] == "running"
    finally:
        await model.stop()  # the stalled answer breaks off: the run fails
    await wait_until(lambda: not sc.kernel.cron._runs)
    failed = await state(sc, job["id"])
    assert failed["last_status"] == "failed" and failed["last_error"]
    assert failed["next_run_at"] == "2025-06-01T11:00:00+08:00"  # a manual run moves nothing

    status, missing, _ = await sc.call("POST", "/cron/jobs/nope/run")
    assert status == 404 and missing["error"]["code"] == "not_found"


async def test_run_now_reports_its_outcome_in_state(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    clock = ManualClock(START)
    sc = await start(sidecar, echo, hook, clock)
    job = await create(sc, name="now", schedule="every 1d", text="hello there")
    status, _, _ = await sc.call("POST", f"/cron/jobs/{job['id']}/run")
    assert status == 202
    await hook.wait_until(lambda: texts(hook) == ["echo: hello there"])
    await wait_until(lambda: not sc.kernel.cron._runs)
    done = await state(sc, job["id"])
    assert (done["last_status"], done["last_result"], done["run_count"]) == (
        "succeeded",
        "echo: hello there",
        1,
    )
    assert done["last_run_at"] == "2025-06-01T07:00:00+08:00"


async def test_the_default_job_is_kept_and_cannot_be_deleted(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    clock = ManualClock(START)
    sc = await start(sidecar, echo, hook, clock)
    status, jobs, _ = await sc.call("GET", "/cron/jobs")
    [default] = [j for j in jobs["jobs"] if j["id"] == "cron-default"]
    assert (default["name"], default["task_type"], default["text"], default["enabled"]) == (
        "hello text job",
        "text",
        "hello",
        False,
    )
    assert default["meta"]["system_default"] is True and default["state"]["next_run_at"] is None
    status, refused, _ = await sc.call("DELETE", "/cron/jobs/cron-default")
    assert status == 400 and refused["error"]["code"] == "default_cron_protected"
    # It can be changed and run like any job, and survives a restart.
    status, changed, _ = await sc.call("PUT", "/cron/jobs/cron-default", {"enabled": True})
    assert (
        changed["enabled"] is True
        and changed["state"]["next_run_at"] == "2025-06-01T09:00:00+08:00"
    )
    status, tool, _ = await sc.call(
        "POST",
        "/agent/process",
        {
            "input": [{"role": "user", "content": "x"}],
            "biz_params": {"tool": {"name": "cron_delete", "input": {"id": "cron-default"}}},
        },
    )
    assert "cannot be deleted" in tool["reply"]
    await sc.stop()
    sc = await start(sidecar, echo, hook, ManualClock(START), keep_config=True)
    status, again, _ = await sc.call("GET", "/cron/jobs/cron-default")
    assert status == 200 and again["enabled"] is True and again["meta"]["system_default"]
    status, _, _ = await sc.call("DELETE", "/cron/jobs/cron-default")
    assert status == 400


async def test_a_workflow_with_delay_and_if_event(
    sidecar: SidecarFactory, hook: WebhookSim
) -> None:
    async with AnthropicSim() as model:
        clock = ManualClock(START)
        sc = await start(sidecar, model, hook, clock)
        workflow = {
            "version": "v1",
            "nodes": [
                {"id": "s", "type": "start"},
                {"id": "ask", "type": "text_event", "text": "明天天气怎样？"},
                {"id": "rain", "type": "if_event", "if_condition": 'last_reply contains "雨"'},
                {"id": "wait", "type": "delay", "delay_seconds": 300},
                {"id": "remind", "type": "text_event", "text": "提醒我带伞"},
            ],
            "edges": [
                {"id": "e1", "source": "s", "target": "ask"},
                {"id": "e2", "source": "ask", "target": "rain"},
                {"id": "e3", "source": "rain", "target": "wait"},
                {"id": "e4", "source": "wait", "target": "remind"},
            ],
        }
        job = await create(sc, name="umbrella", schedule="0 20 * * *", workflow=workflow)
        assert job["task_type"] == "workflow" and len(job["workflow"]["edges"]) == 4
        path = f"/cron/jobs/{job['id']}"

        model.enqueue(text_reply("明天有雨。"), text_reply("记得带伞！"))
        await sc.call("POST", path + "/run")
        await hook.wait_until(lambda: texts(hook) == ["明天有雨。"])
        await clock.wait_for_sleeper(300)  # the delay node waits on the clock
        assert len(model.requests) == 1
        clock.advance(300)
        await hook.wait_until(lambda: texts(hook) == ["明天有雨。", "记得带伞！"])
        await wait_until(lambda: not sc.kernel.cron._runs)
        run = (await state(sc, job["id"]))["last_execution"]
        assert [(n["node_id"], n["status"]) for n in run["nodes"]] == [
            ("ask", "succeeded"),
            ("rain", "succeeded"),
            ("wait", "succeeded"),
            ("remind", "succeeded"),
        ]

        model.enqueue(text_reply("明天晴。"))
        await sc.call("POST", path + "/run")
        await wait_until(lambda: not sc.kernel.cron._runs)
        assert texts(hook)[-1] == "明天晴。" and len(model.requests) == 3  # no umbrella
        done = await state(sc, job["id"])
        assert done["last_status"] == "succeeded"
        assert [(n["node_id"], n["status"]) for n in done["last_execution"]["nodes"]] == [
            ("ask", "succeeded"),
            ("rain", "succeeded"),
            ("wait", "skipped"),
            ("remind", "skipped"),
        ]


async def test_bad_schedules_and_workflows_are_refused_with_the_fix(
    sidecar: SidecarFactory, echo: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await start(sidecar, echo, hook, ManualClock(START))
    cases = [
        ({"schedule": "明天九点"}, "invalid_cron_schedule", "YYYY-MM-DDTHH:MM"),
        ({"schedule": "2025-05-30T09:00"}, "invalid_cron_schedule", "2025-06-01T07:00"),
        ({"schedule": "every 5s"}, "invalid_cron_schedule", "60"),
        ({"schedule": "61 9 * * *"}, "invalid_cron_schedule", "Asia/Shanghai"),
        ({"schedule": {"type": "weekly"}}, "invalid_cron_schedule", "cron, interval, once"),
        (
            {"schedule": "every 1h", "dispatch": {"channel": "fax"}},
            "channel_not_supported",
            "webhook",
        ),
        (
            {
                "schedule": "every 1h",
                "workflow": {"nodes": [{"type": "if_event", "if_condition": "x"}]},
            },
            "invalid_cron_workflow",
            "last_reply",
        ),
        (
            {"schedule": "every 1h", "workflow": {"nodes": [{"type": "teleport"}]}},
            "invalid_cron_workflow",
            "text_event",
        ),
    ]
    for body, code, hint in cases:
        body = {"name": "bad", "text": "x", **body}
        status, data, _ = await sc.call("POST", "/cron/jobs", body)
        assert status == 400, (body, data)
        assert data["error"]["code"] == code and hint in data["error"]["message"], data
    status, data, _ = await sc.call("PUT", "/cron/jobs/cron-default", {"id": "other"})
    assert status == 400 and data["error"]["code"] == "job_id_mismatch"
