"""``/cron/jobs``: scheduled jobs (seed 000's cron routes; kernel/cron has the rules).

A job view is its spec (``id``, ``name``, ``enabled``, ``schedule``, ``task_type``,
``text`` / ``workflow``, ``dispatch``, ``runtime``, ``meta``) with its ``state``
(``next_run_at`` in local time, ``last_run_at``, ``last_status``, ``last_result``,
``last_error``, ``last_execution``, ``paused``, ``running``). The protected job
``cron-default`` refuses deletion with ``400 default_cron_protected``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kernel.core.errors import CronError
from kernel.core.i18n import t
from kernel.cron.jobs import CronJob, job_view, state_view
from kernel.cron.scheduler import CronScheduler
from kernel.gateway.api import Router, json_response, kernel_of, path_param, read_object

router = Router("cron", "Scheduled jobs: CRUD, pause/resume, run now, state")

JOB_ID = path_param("job_id", "the job's id, e.g. cron-default")

SCHEDULE_SCHEMA: dict[str, Any] = {
    "description": "an object, or the text form: '2025-06-02T09:00', 'every 30m', '0 9 * * 1'",
    "oneOf": [
        {"type": "string"},
        {
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": {"type": "string", "enum": ["cron", "interval", "once"]},
                "cron": {"type": "string"},
                "every": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "at": {"type": "string"},
                "timezone": {"type": "string", "description": "read-only: general.timezone"},
            },
        },
    ],
}
STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["paused", "running", "run_count"],
    "properties": {
        "paused": {"type": "boolean"},
        "running": {"type": "boolean"},
        "next_run_at": {"type": "string", "nullable": True},
        "last_run_at": {"type": "string", "nullable": True},
        "last_status": {"type": "string", "nullable": True},
        "last_result": {"type": "string", "nullable": True},
        "last_error": {"type": "string", "nullable": True},
        "last_execution": {"type": "object", "nullable": True},
        "run_count": {"type": "integer"},
    },
}
SPEC_PROPERTIES: dict[str, Any] = {
    "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
    "name": {"type": "string", "minLength": 1, "maxLength": 200},
    "enabled": {"type": "boolean"},
    "schedule": SCHEDULE_SCHEMA,
    "task_type": {"type": "string", "enum": ["text", "workflow"]},
    "text": {"type": "string"},
    "workflow": {
        "type": "object",
        "nullable": True,  # null for a text job
        "properties": {
            "version": {"type": "string", "enum": ["v1"]},
            "nodes": {"type": "array", "items": {"type": "object"}},
            "edges": {"type": "array", "items": {"type": "object"}},
        },
    },
    "dispatch": {
        "type": "object",
        "properties": {
            "channel": {"type": "string"},
            "target": {
                "type": "object",
                "properties": {
                    "user_id": {"type": "string"},
                    "session_id": {"type": "string"},
                    "target_type": {"type": "string", "enum": ["c2c", "group", "guild", "dm"]},
                },
            },
        },
    },
    "runtime": {
        "type": "object",
        "properties": {
            "timeout_seconds": {"type": "number", "nullable": True},
            "misfire_grace_seconds": {"type": "number", "nullable": True},
        },
    },
    "meta": {"type": "object"},
}
JOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "enabled", "schedule", "task_type", "dispatch", "state"],
    "properties": {**SPEC_PROPERTIES, "state": STATE_SCHEMA},
}


def _scheduler(request: web.Request) -> CronScheduler:
    scheduler = kernel_of(request).cron
    if not scheduler.started:
        raise CronError("cron_disabled", t("gw.cron_off"))
    return scheduler


def _view(scheduler: CronScheduler, job: CronJob) -> dict[str, Any]:
    return job_view(job, scheduler.rules, running=scheduler.running(job.id))


@router.get(
    "/cron/jobs",
    summary="All scheduled jobs with their state",
    response={
        "type": "object",
        "required": ["jobs"],
        "properties": {"jobs": {"type": "array", "items": JOB_SCHEMA}},
    },
    errors=(400,),
)
async def list_jobs(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    return json_response({"jobs": [_view(scheduler, job) for job in scheduler.list()]})


@router.post(
    "/cron/jobs",
    summary="Create a job (id generated unless given)",
    body={"type": "object", "required": ["name", "schedule"], "properties": SPEC_PROPERTIES},
    response=JOB_SCHEMA,
    status=201,
    errors=(409,),
)
async def create_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    body = await read_object(request)
    job = await scheduler.create(body.data)
    return json_response(_view(scheduler, job), status=201)


@router.get(
    "/cron/jobs/{job_id}", summary="One job", params=(JOB_ID,), response=JOB_SCHEMA, errors=(404,)
)
async def get_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    return json_response(_view(scheduler, scheduler.get(request.match_info["job_id"])))


@router.put(
    "/cron/jobs/{job_id}",
    summary="Change a job: the fields given replace the job's",
    params=(JOB_ID,),
    body={"type": "object", "properties": SPEC_PROPERTIES},
    response=JOB_SCHEMA,
    errors=(404,),
)
async def update_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    body = await read_object(request)
    job = await scheduler.update(request.match_info["job_id"], body.data)
    return json_response(_view(scheduler, job))


@router.delete(
    "/cron/jobs/{job_id}",
    summary="Delete a job (cron-default is protected)",
    params=(JOB_ID,),
    response={
        "type": "object",
        "required": ["deleted"],
        "properties": {"deleted": {"type": "boolean"}, "id": {"type": "string"}},
    },
    errors=(404,),
)
async def delete_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    job_id = request.match_info["job_id"]
    await scheduler.delete(job_id)
    return json_response({"deleted": True, "id": job_id})


@router.post(
    "/cron/jobs/{job_id}/pause",
    summary="Pause a job (no runs until resumed)",
    params=(JOB_ID,),
    response=JOB_SCHEMA,
    errors=(404,),
)
async def pause_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    return json_response(_view(scheduler, await scheduler.pause(request.match_info["job_id"])))


@router.post(
    "/cron/jobs/{job_id}/resume",
    summary="Resume a paused job (its next run is planned from now)",
    params=(JOB_ID,),
    response=JOB_SCHEMA,
    errors=(404,),
)
async def resume_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    return json_response(_view(scheduler, await scheduler.resume(request.match_info["job_id"])))


@router.post(
    "/cron/jobs/{job_id}/run",
    summary="Run a job now (its schedule is untouched); the outcome shows in its state",
    params=(JOB_ID,),
    response={
        "type": "object",
        "required": ["started", "id"],
        "properties": {"started": {"type": "boolean"}, "id": {"type": "string"}},
    },
    status=202,
    errors=(404, 409),
)
async def run_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    job = await scheduler.run_now(request.match_info["job_id"])
    return json_response({"started": True, "id": job.id}, status=202)


@router.get(
    "/cron/jobs/{job_id}/state",
    summary="A job's state: next run, last run, last result and error",
    params=(JOB_ID,),
    response=STATE_SCHEMA,
    errors=(404,),
)
async def job_state(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    job = scheduler.get(request.match_info["job_id"])
    return json_response(state_view(job, scheduler.rules, running=scheduler.running(job.id)))
