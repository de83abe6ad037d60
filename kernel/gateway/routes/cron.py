"""``/cron/jobs``: scheduled jobs (seed 000's cron routes; kernel/cron has the rules).

A job view is its spec (``id``, ``name``, ``enabled``, ``schedule``, ``task_type``,
``text`` / ``workflow``, ``dispatch``, ``runtime``, ``meta``) with its ``state``
(``next_run_at`` in local time, ``last_run_at``, ``last_status``, ``last_result``,
``last_error``, ``last_execution``, ``paused``, ``running``). The protected job
``cron-default`` refuses deletion with ``400 default_cron_protected``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from kernel.config.channels import QQTargetType
from kernel.core.errors import CronError
from kernel.core.i18n import t
from kernel.cron.jobs import CronJob, job_view, state_view
from kernel.cron.scheduler import CronScheduler
from kernel.cron.spec import JobSpecModel, check_body
from kernel.gateway.api import (
    Router,
    bounded,
    deps_of,
    json_response,
    path_param,
    query_int,
    query_param,
)
from kernel.gateway.schema import BodyModel, OpenShape, Shape, documented_required
from kernel.store.cron import KEEP_RUNS

router = Router("cron", "Scheduled jobs: CRUD, pause/resume, run now, state")

JOB_ID = path_param("job_id", "the job's id, e.g. cron-default")


class JobSchedule(Shape):
    type: Literal["cron", "interval", "once"]
    cron: str | None = None
    every: str | int | None = None
    at: str | None = None
    timezone: str | None = Field(default=None, description="read-only: general.timezone")


Schedule = Annotated[
    str | JobSchedule,
    Field(description="an object, or the text form: '2025-06-02T09:00', 'every 30m', '0 9 * * 1'"),
]


class JobState(Shape):
    paused: bool
    running: bool
    next_run_at: str | None = None
    last_run_at: str | None = None
    last_status: str | None = None
    last_result: str | None = None
    last_error: str | None = None
    last_execution: OpenShape | None = None
    run_count: int


class Workflow(Shape):
    version: Literal["v1"] | None = None
    nodes: list[OpenShape] | None = None
    edges: list[OpenShape] | None = None


class DispatchTarget(Shape):
    user_id: str | None = None
    session_id: str | None = None
    target_type: QQTargetType | None = None


class Dispatch(Shape):
    channel: str | None = None
    target: DispatchTarget | None = None


class JobRuntime(Shape):
    timeout_seconds: float | None = None
    misfire_grace_seconds: float | None = None


class JobChange(BodyModel, JobSpecModel):
    """A job's spec (the cron package's :class:`JobSpecModel`): the fields given replace
    the job's. Each is checked as that package reads it (its codes and words); the
    schedule, the channel and what a job needs are checked by the scheduler."""

    model_config = ConfigDict(strict=False, extra="ignore")
    _sent: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        return data  # as the cron package reads a body: ``enabled: null`` is no boolean

    @model_validator(mode="wrap")
    @classmethod
    def _read_as_cron_reads(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        if isinstance(data, dict):
            check_body(data)  # its first fault in the cron package's words and codes
        job = handler(data)
        job._sent = dict(data) if isinstance(data, dict) else {}
        return job

    def given(self) -> dict[str, Any]:
        """The body as sent, now checked, for the scheduler: it reads the schedule in
        the owner's zone and a workflow's nodes whole (their fields are per node type)."""
        return self._sent


class NewJob(JobChange):
    """A new job's spec: ``name``, ``schedule`` and ``text`` (or ``workflow``)."""

    model_config = {**documented_required("name", "schedule"), "strict": False}


class JobFields(Shape):
    id: Annotated[str, Field(pattern="^[A-Za-z0-9_-]{1,64}$")] | None = None
    name: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    enabled: bool | None = None
    schedule: Schedule | None = None
    task_type: Literal["text", "workflow"] | None = None
    text: str | None = None
    workflow: Workflow | None = Field(default=None, description="null for a text job")
    dispatch: Dispatch | None = None
    runtime: JobRuntime | None = None
    meta: dict[str, Any] | None = None


class Job(JobFields):
    id: Annotated[str, Field(pattern="^[A-Za-z0-9_-]{1,64}$")]
    name: Annotated[str, Field(min_length=1, max_length=200)]
    enabled: bool
    schedule: Schedule
    task_type: Literal["text", "workflow"]
    dispatch: Dispatch
    state: JobState


class JobList(Shape):
    jobs: list[Job]


class JobDeleted(Shape):
    deleted: bool
    id: str | None = None


class JobRun(Shape):
    """One run: when it began (or was due, for a missed one; local time), its outcome
    (running, succeeded, failed, skipped: refused or still running, missed: due while
    Kernel was down, beyond the grace; interrupted: cut by a shutdown), why (the error or
    the reason it did not run) and what it answered."""

    at: str
    outcome: Literal["running", "succeeded", "failed", "skipped", "missed", "interrupted"]
    reason: str | None = None
    result: str | None = None


class JobRuns(Shape):
    id: str
    run_count: int = Field(description="runs finished so far")
    runs: list[JobRun] = Field(description="newest first")


class JobStarted(Shape):
    started: bool
    id: str


def _scheduler(request: web.Request) -> CronScheduler:
    scheduler = deps_of(request).cron
    if not scheduler.started:
        raise CronError("cron_disabled", t("gw.cron_off"))
    return scheduler


def _view(scheduler: CronScheduler, job: CronJob) -> dict[str, Any]:
    return job_view(job, scheduler.rules, running=scheduler.running(job.id))


@router.get(
    "/cron/jobs",
    summary="All scheduled jobs with their state",
    response=JobList,
    errors=(400,),
)
async def list_jobs(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    return json_response({"jobs": [_view(scheduler, job) for job in scheduler.list()]})


@router.post(
    "/cron/jobs",
    summary="Create a job (id generated unless given)",
    body=NewJob,
    response=Job,
    status=201,
    errors=(409,),
)
async def create_job(request: web.Request, body: NewJob) -> web.Response:
    scheduler = _scheduler(request)
    job = await scheduler.create(body.given())
    return json_response(_view(scheduler, job), status=201)


@router.get("/cron/jobs/{job_id}", summary="One job", params=(JOB_ID,), response=Job, errors=(404,))
async def get_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    return json_response(_view(scheduler, scheduler.get(request.match_info["job_id"])))


@router.put(
    "/cron/jobs/{job_id}",
    summary="Change a job: the fields given replace the job's",
    params=(JOB_ID,),
    body=JobChange,
    response=Job,
    errors=(404,),
)
async def update_job(request: web.Request, body: JobChange) -> web.Response:
    scheduler = _scheduler(request)
    job = await scheduler.update(request.match_info["job_id"], body.given())
    return json_response(_view(scheduler, job))


@router.delete(
    "/cron/jobs/{job_id}",
    summary="Delete a job (cron-default is protected)",
    params=(JOB_ID,),
    response=JobDeleted,
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
    response=Job,
    errors=(404,),
)
async def pause_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    return json_response(_view(scheduler, await scheduler.pause(request.match_info["job_id"])))


@router.post(
    "/cron/jobs/{job_id}/resume",
    summary="Resume a paused job (its next run is planned from now)",
    params=(JOB_ID,),
    response=Job,
    errors=(404,),
)
async def resume_job(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    return json_response(_view(scheduler, await scheduler.resume(request.match_info["job_id"])))


@router.post(
    "/cron/jobs/{job_id}/run",
    summary="Run a job now (its schedule is untouched); the outcome shows in its state",
    params=(JOB_ID,),
    response=JobStarted,
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
    response=JobState,
    errors=(404,),
)
async def job_state(request: web.Request) -> web.Response:
    scheduler = _scheduler(request)
    job = scheduler.get(request.match_info["job_id"])
    return json_response(state_view(job, scheduler.rules, running=scheduler.running(job.id)))


@router.get(
    "/cron/jobs/{job_id}/runs",
    summary="A job's latest runs, newest first, with each one's outcome and reason",
    params=(JOB_ID, query_param("limit", bounded(1, KEEP_RUNS), f"how many ({KEEP_RUNS})")),
    response=JobRuns,
    errors=(400, 404),
)
async def job_runs(request: web.Request) -> web.Response:
    """The store keeps each job's last 50 runs. A run still going comes first, as
    ``running``."""
    scheduler = _scheduler(request)
    job = scheduler.get(request.match_info["job_id"])
    limit = query_int(request, "limit", KEEP_RUNS, minimum=1, maximum=KEEP_RUNS)
    tz = scheduler.rules.tz
    runs: list[dict[str, Any]] = []
    running = scheduler.running(job.id)
    if running and job.row.last_run_at is not None:
        at = job.row.last_run_at.astimezone(tz).isoformat(timespec="seconds")
        runs.append({"at": at, "outcome": "running", "reason": None, "result": None})
    for run in await scheduler.runs(job.id, limit):
        at = run.at.astimezone(tz).isoformat(timespec="seconds")
        runs.append({"at": at, "outcome": run.outcome, "reason": run.reason, "result": run.result})
    return json_response({"id": job.id, "run_count": job.row.run_count, "runs": runs[:limit]})
