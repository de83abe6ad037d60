"""The scheduler: a tracked background component of the Kernel (``start``/``stop``).

Jobs live in SQLite (``cron_jobs``) and in a cache here; every change is written
through. One loop task sleeps (injectable clock: tests drive time) until the earliest
``next_run_at`` or until a change wakes it, fires what is due, and plans the next run
before the run starts, so a crash never repeats a run (at most once).

Policies:

- **Missed runs** (Kernel was down): at start, a job whose planned run passed at most
  ``misfire_grace_seconds`` ago (the job's ``runtime`` value, else
  ``cron.misfire_grace_seconds``) runs once now, however many runs were missed; one
  missed by more is skipped, recorded in its state (``last_status = "skipped"`` and why),
  and planned from now. A one-shot job skipped that way is disabled.
- **Never two runs at once**: a run that falls due while the job still runs is skipped
  and recorded; ``run`` now answers ``cron_busy``.
- **One-shot jobs** disable themselves once their planned run has run. One cut short
  by a shutdown stays enabled and due, so the missed-run policy runs it at the next
  start (``last_status = "interrupted"`` meanwhile).
- **A crash mid-run** leaves ``last_status = "running"`` in the database: at start it
  becomes ``"interrupted"``, and the run is not repeated (at most once).
- **A failing pass** (the database refusing a write, a bug) is logged and retried after
  1 s, 2 s, 4 s … up to a minute; the loop itself never ends, and a run whose plan could
  not be saved is late, not lost.
- **A schedule that cannot be planned** (stored before it was checked, or made so by a
  change of time zone) is recorded in the job's state at start, not fatal.
- **The audit trail** gets one row for each run ``cron_runs`` records: ``cron.fired``
  (succeeded or failed, in the run's session), ``cron.skipped``, ``cron.missed``,
  ``cron.interrupted``, each with the job id and its reason as a code.
- The protected job ``cron-default`` (``你好文本任务``, text ``你好``, disabled) always
  exists and refuses deletion with ``default_cron_protected``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from kernel.audit import AuditLog
from kernel.audit import kinds as audit_kinds
from kernel.config import Config
from kernel.core.backoff import Backoff, Retrying
from kernel.core.clock import Clock, sleep_unless
from kernel.core.errors import CronError, KernelError, StoreError
from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.cron import schedule as schedules
from kernel.cron.jobs import (
    DEFAULT_CHANNEL,
    DEFAULT_ID,
    DEFAULT_SCHEDULE,
    JOB_ID,
    CronJob,
    Dispatch,
    JobSpec,
    parse_spec,
    spec_from_row,
)
from kernel.cron.runner import JobRunner, RunOutcome
from kernel.cron.schedule import Rules, Schedule
from kernel.store.cron import CronRow, CronRun, CronStore

log = logging.getLogger(__name__)

MAX_SLEEP = 60.0  # re-read the clock at least this often (it may be stepped)
# After a failed pass: 1 s, doubled for each failure in a row, up to MAX_SLEEP.
PASS_BACKOFF = Backoff(first=1.0, cap=MAX_SLEEP)


# The audit kind of each outcome cron_runs records (succeeded and failed: fired).
_KINDS = {
    "skipped": audit_kinds.CRON_SKIPPED,
    "missed": audit_kinds.CRON_MISSED,
    "interrupted": audit_kinds.CRON_INTERRUPTED,
}

# The job whose run this code is part of (set in the run's task, copied into the turn's).
running_job: ContextVar[str | None] = ContextVar("running_job", default=None)


class CronScheduler:
    def __init__(
        self,
        config: Config,
        store: CronStore,
        runner: JobRunner,
        clock: Clock,
        channels: Callable[[], list[str]],
        *,
        audit: AuditLog | None = None,
    ) -> None:
        self.config = config
        self.audit = audit
        self.store = store
        self.runner = runner
        self.clock = clock
        self._channels = channels
        self.jobs: dict[str, CronJob] = {}
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._tasks = TaskSet("cron")  # the loop and the runs
        self._stopping = False
        self.started = False

    @property
    def rules(self) -> Rules:
        cron = self.config.cron
        return Rules(
            ZoneInfo(self.config.general.timezone), cron.min_interval_seconds, cron.run_timeout
        )

    # ----- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        rules, channels = self.rules, self._channels()
        for row in await self.store.list():
            try:
                spec = spec_from_row(row, rules, channels)
            except KernelError as exc:
                log.warning(
                    "cron job %s cannot be loaded (%s); left alone",
                    row.id,
                    getattr(exc, "code", type(exc).__name__),
                )
                continue
            self.jobs[row.id] = CronJob(spec, row)
        await self._ensure_default()
        now = self.clock.now()
        for job in list(self.jobs.values()):
            await self._recover(job)
            await self._plan_at_start(job, now)
        self._loop_task = self._tasks.spawn(self._loop(), "cron")
        self.started = True
        log.info("cron started: %d job(s)", len(self.jobs))

    async def stop(self) -> None:
        """Stop planning; cancel running jobs (their turns keep a valid history)."""
        self._stopping = True
        self._loop_task = None
        await self._tasks.close(self.config.general.shutdown_timeout)
        self.started = False

    async def _ensure_default(self) -> None:
        if DEFAULT_ID in self.jobs:
            return
        spec = JobSpec(
            name=t("cron.default_name"),
            schedule=Schedule("cron", cron=DEFAULT_SCHEDULE),  # valid: tests/cron
            text=t("cron.default_text"),
            enabled=False,
            dispatch=Dispatch(DEFAULT_CHANNEL),
            meta={"system_default": True},
        )
        now = self.clock.now()
        row = CronRow(DEFAULT_ID, spec.name, False, spec.to_store(), "system", now, now)
        await self.store.insert(row)
        self.jobs[DEFAULT_ID] = CronJob(spec, row)

    async def _recover(self, job: CronJob) -> None:
        """A run still "running" in the database was under way when Kernel died: it is
        marked interrupted and not repeated (a one-shot job counts as having run)."""
        if job.row.last_status != "running":
            return
        job.row.last_status = "interrupted"
        job.row.last_error = t("cron.interrupted_crash", id=job.id)
        if job.spec.schedule.kind == "once" and job.row.next_run_at is None:
            job.spec = replace(job.spec, enabled=False)
        log.warning("cron job %s was running when Kernel stopped unexpectedly", job.id)
        when = job.row.last_run_at or self.clock.now()
        await self._save(job, CronRun(when, "interrupted", job.row.last_error))
        await self._audit(job.id, "interrupted", "crash")

    async def _plan_at_start(self, job: CronJob, now: datetime) -> None:
        if not job.schedulable:
            return
        try:
            changed = self._replan_at_start(job, now)
        except CronError as exc:  # stored before schedules were checked this way
            job.row.next_run_at = None
            job.row.last_status = "skipped"
            job.row.last_error = t("cron.unplannable", error=str(exc), id=job.id)
            log.warning("cron job %s cannot be planned (%s); not scheduled", job.id, exc.code)
            changed = CronRun(now, "skipped", job.row.last_error)
        if changed:
            run = changed if isinstance(changed, CronRun) else None
            await self._save(job, run)
            if run is not None and run.outcome == "skipped":
                await self._audit(job.id, "skipped", "unplannable")
            elif run is not None:  # missed by more than its grace
                grace = job.spec.misfire_grace_seconds
                if grace is None:
                    grace = self.config.cron.misfire_grace_seconds
                await self._audit(
                    job.id,
                    "missed",
                    "late",
                    due=run.at.isoformat(timespec="seconds"),
                    late_seconds=int((now - run.at).total_seconds()),
                    grace_seconds=int(grace),
                )

    def _replan_at_start(self, job: CronJob, now: datetime) -> bool | CronRun:
        """Apply the missed-run policy; True when the row changed (the missed run when
        one was skipped). CronError when the schedule cannot be planned at all (checked
        first, so the loop never meets it)."""
        row, rules = job.row, self.rules
        schedules.check_plannable(job.spec.schedule, rules, now)
        due = row.next_run_at
        if due is None:
            row.next_run_at = job.spec.schedule.next_after(now, rules.tz)
        elif due <= now:
            grace = job.spec.misfire_grace_seconds
            if grace is None:
                grace = self.config.cron.misfire_grace_seconds
            late = (now - due).total_seconds()
            if late <= grace:
                log.info("cron job %s missed a run %.0f s ago; running it now", job.id, late)
                return False  # due now: the loop fires it first thing
            local = due.astimezone(rules.tz).strftime("%Y-%m-%d %H:%M")
            row.last_status = "skipped"
            row.last_error = t("cron.missed", at=local, late=int(late), grace=int(grace))
            row.next_run_at = job.spec.schedule.next_after(now, rules.tz, anchor=due)
            if job.spec.schedule.kind == "once":
                job.spec = replace(job.spec, enabled=False)
            log.warning("cron job %s missed its run by %.0f s; skipped", job.id, late)
            return CronRun(due, "missed", row.last_error)
        else:
            return False
        return True

    # ----- the loop -----------------------------------------------------------------

    async def _loop(self) -> None:
        retrying = Retrying(PASS_BACKOFF, self.clock)
        while True:
            self._wake.clear()
            try:
                await self._fire_due(self.clock.now())
            except Exception as exc:  # the database, a bug: this pass fails, the loop goes on
                delay = retrying.failed()
                if isinstance(exc, KernelError):
                    kind = type(exc).__name__
                    log.warning("cron pass failed (%s); retrying in %.0f s", kind, delay)
                else:
                    log.exception("cron pass failed; retrying in %.0f s", delay)
            else:
                retrying.succeeded()
                delay = self._seconds_to_next(self.clock.now())
            await self._pause(delay)

    async def _fire_due(self, now: datetime) -> None:
        async with self._lock:
            for job in list(self.jobs.values()):
                due = job.row.next_run_at
                if job.schedulable and due is not None and due <= now:
                    await self._fire(job, now)

    def _seconds_to_next(self, now: datetime) -> float:
        dues = [
            j.row.next_run_at
            for j in self.jobs.values()
            if j.schedulable and j.row.next_run_at is not None
        ]
        if not dues:
            return MAX_SLEEP
        return max(0.0, min(MAX_SLEEP, (min(dues) - now).total_seconds()))

    async def _pause(self, seconds: float) -> None:
        await sleep_unless(self.clock, seconds, self._wake)

    async def _fire(self, job: CronJob, now: datetime) -> None:
        """Plan the next run, then start this one (under the lock). When the plan cannot
        be saved, the row is put back as it was and the run not started: the loop's next
        pass tries again (the run is late, not lost)."""
        row = job.row
        before = (row.next_run_at, row.last_run_at, row.last_status, row.last_error)
        try:
            await self._plan_and_begin(job, now)
        except BaseException:
            row.next_run_at, row.last_run_at, row.last_status, row.last_error = before
            raise

    async def _plan_and_begin(self, job: CronJob, now: datetime) -> None:
        row, schedule = job.row, job.spec.schedule
        due = row.next_run_at
        if schedule.kind == "once":
            row.next_run_at = None
        else:
            try:
                row.next_run_at = schedule.next_after(now, self.rules.tz, anchor=due)
            except CronError as exc:  # this run goes ahead; there is no next one
                row.next_run_at = None
                log.warning("cron job %s cannot plan its next run (%s)", job.id, exc.code)
        if job.id in self._runs:
            row.last_status = "skipped"
            row.last_error = t("cron.skipped_running")
            log.warning("cron job %s still running; this run is skipped", job.id)
            await self._save(job, CronRun(due or now, "skipped", row.last_error))
            await self._audit(job.id, "skipped", "running")
            return
        await self._begin(job, now, due=due)

    async def _begin(self, job: CronJob, now: datetime, *, due: datetime | None) -> None:
        """Start a run: ``due`` is its planned time (None: run now by request)."""
        job.row.last_run_at = now
        job.row.last_status = "running"
        await self._save(job)
        task = self._tasks.spawn(self._run(job.id, due), f"cron-{job.id}")
        self._runs[job.id] = task
        task.add_done_callback(lambda _: self._runs.pop(job.id, None))

    async def _run(self, job_id: str, due: datetime | None) -> None:
        running_job.set(job_id)  # inherited by the turn (and its tools) this run starts
        self.runner.sessions.pop(job_id, None)  # this run's session is set when it opens
        job = self.jobs[job_id]
        timeout = job.spec.timeout_seconds or self.config.cron.run_timeout
        log.info("cron job %s running", job_id)
        try:
            async with asyncio.timeout(timeout):
                outcome = await self.runner.run(job, self.rules)
        except TimeoutError:
            error = t("cron.timeout", seconds=f"{timeout:g}")
            outcome = RunOutcome("failed", error=error, code="timeout")
        except asyncio.CancelledError:
            if self._stopping:  # not the job's fault: see _finish
                cut = RunOutcome("interrupted", error=t("cron.interrupted_stop"), code="stop")
            else:
                cut = RunOutcome("failed", error=t("cron.cancelled"), code="cancelled")
            await asyncio.shield(self._finish(job_id, cut, due))
            raise
        except Exception as exc:  # a bug must not kill the scheduler or hide the run
            log.exception("cron job %s failed", job_id)
            error = t("turn.internal_error", kind=type(exc).__name__)
            outcome = RunOutcome("failed", error=error, code="internal_error")
        await self._finish(job_id, outcome, due)

    async def _finish(self, job_id: str, outcome: RunOutcome, due: datetime | None) -> None:
        """Record the outcome. A planned one-shot run cut short by shutdown stays enabled
        and due at its time, so the missed-run policy runs it at the next start."""
        async with self._lock:
            job = self.jobs.get(job_id)
            if job is None:  # deleted while it ran
                return
            row = job.row
            row.last_status = outcome.status
            row.last_result = outcome.result or None
            row.last_error = outcome.error or None
            row.last_execution = outcome.execution
            once = due is not None and job.spec.schedule.kind == "once"
            if outcome.status == "interrupted":
                if once:
                    row.next_run_at = due
            else:
                row.run_count += 1
                if once:
                    job.spec = replace(job.spec, enabled=False)
            run = CronRun(
                row.last_run_at or self.clock.now(), outcome.status, row.last_error, row.last_result
            )
            try:
                await self._save(job, run)
            except StoreError as exc:  # kept in memory; the job's next save writes it
                kind = type(exc).__name__
                log.warning("cron job %s: its outcome could not be saved (%s)", job_id, kind)
            session = self.runner.sessions.pop(job_id, None)
            await self._audit(job_id, outcome.status, outcome.code, session_id=session)
        level = logging.INFO if outcome.status == "succeeded" else logging.WARNING
        log.log(level, "cron job %s %s", job_id, outcome.status)

    async def _audit(
        self, job_id: str, outcome: str, reason: str, *, session_id: int | None = None, **facts: Any
    ) -> None:
        """The audit row of one recorded run (``outcome`` as ``cron_runs`` has it)."""
        if self.audit is None:
            return
        kind = _KINDS.get(outcome, audit_kinds.CRON_FIRED)
        await self.audit.record(
            kind,
            session_id=session_id if kind == audit_kinds.CRON_FIRED else None,
            actor="cron",
            job=job_id,
            outcome=outcome,
            reason=reason or None,
            **facts,
        )

    async def _save(self, job: CronJob, run: CronRun | None = None) -> None:
        """Write the job's row; ``run``: a run that just ended (or was skipped) too."""
        row = job.row
        row.name = job.spec.name
        row.enabled = job.spec.enabled
        row.spec = job.spec.to_store()
        row.updated_at = self.clock.now()
        await self.store.save(row, run)

    async def runs(self, job_id: str, limit: int) -> list[CronRun]:
        """A job's recorded runs, newest first. CronError when there is no such job."""
        self.get(job_id)
        return await self.store.runs(job_id, limit)

    # ----- requests -----------------------------------------------------------------

    def running(self, job_id: str) -> bool:
        return job_id in self._runs

    def get(self, job_id: str) -> CronJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise CronError("not_found", t("cron.not_found", id=job_id[:64]), job_id=job_id[:64])
        return job

    def list(self) -> list[CronJob]:
        return sorted(self.jobs.values(), key=lambda j: (j.row.created_at, j.id))

    def count_by(self, created_by: str) -> int:
        return sum(1 for j in self.jobs.values() if j.row.created_by == created_by)

    def next_due(self) -> CronJob | None:
        due = [j for j in self.jobs.values() if j.schedulable and j.row.next_run_at is not None]
        return min(due, key=lambda j: j.row.next_run_at or self.clock.now(), default=None)

    async def create(self, data: dict[str, Any], *, created_by: str = "api") -> CronJob:
        job_id = data.get("id")
        if job_id is not None and (not isinstance(job_id, str) or not JOB_ID.match(job_id)):
            raise CronError("invalid_request", t("cron.bad_id"), field="id")
        async with self._lock:
            if created_by == "agent" and self.count_by("agent") >= self.config.cron.max_jobs:
                limit = self.config.cron.max_jobs
                raise CronError("cron_quota_exceeded", t("cron.quota", limit=limit), limit=limit)
            job_id = job_id or f"job-{uuid.uuid4().hex[:8]}"
            if job_id in self.jobs:
                raise CronError("cron_job_exists", t("cron.exists", id=job_id), job_id=job_id)
            now = self.clock.now()
            spec = parse_spec(data, self.rules, self._channels(), now=now)
            row = CronRow(job_id, spec.name, spec.enabled, spec.to_store(), created_by, now, now)
            job = CronJob(spec, row)
            if job.schedulable:
                row.next_run_at = spec.schedule.next_after(now, self.rules.tz)
            if not await self.store.insert(row):
                raise CronError("cron_job_exists", t("cron.exists", id=job_id), job_id=job_id)
            self.jobs[job_id] = job
        self._wake.set()
        log.info("cron job %s created by %s", job_id, created_by)
        return job

    async def update(self, job_id: str, data: dict[str, Any]) -> CronJob:
        if "id" in data and data["id"] != job_id:
            raise CronError("job_id_mismatch", t("cron.id_mismatch", id=job_id[:64]))
        async with self._lock:
            job = self.get(job_id)
            now = self.clock.now()
            # Everything is checked and planned before the job changes, so a refusal
            # leaves the job as it was, in memory and in the database alike.
            spec = parse_spec(data, self.rules, self._channels(), base=job.spec, now=now)
            next_run = job.row.next_run_at
            if "schedule" in data or spec.enabled != job.spec.enabled:
                schedulable = spec.enabled and not job.row.paused
                next_run = spec.schedule.next_after(now, self.rules.tz) if schedulable else None
            before = (job.spec, job.row.next_run_at)
            job.spec, job.row.next_run_at = spec, next_run
            try:
                await self._save(job)
            except BaseException:
                job.spec, job.row.next_run_at = before
                raise
        self._wake.set()
        return job

    async def delete(self, job_id: str) -> None:
        async with self._lock:
            job = self.get(job_id)
            if job.spec.meta.get("system_default") or job_id == DEFAULT_ID:
                raise CronError("default_cron_protected", t("cron.protected"), job_id=DEFAULT_ID)
            await self.store.delete(job_id)
            del self.jobs[job_id]
            task = self._runs.get(job_id)
        # A job deleting itself from its own turn ("stop reminding me"): that turn goes on
        # to its reply; cancelling it would lose the reply and tell the model it failed.
        if task is not None and running_job.get() != job_id:
            task.cancel()
        self._wake.set()
        log.info("cron job %s deleted", job_id)

    async def pause(self, job_id: str) -> CronJob:
        async with self._lock:
            job = self.get(job_id)
            job.row.paused = True
            job.row.next_run_at = None
            await self._save(job)
        self._wake.set()
        return job

    async def resume(self, job_id: str) -> CronJob:
        async with self._lock:
            job = self.get(job_id)
            now = self.clock.now()
            next_run = job.row.next_run_at
            if job.spec.enabled:
                next_run = job.spec.schedule.next_after(now, self.rules.tz)
            job.row.paused, job.row.next_run_at = False, next_run
            await self._save(job)
        self._wake.set()
        return job

    async def run_now(self, job_id: str) -> CronJob:
        """Start a run at once (its schedule is untouched); cron_busy while one runs."""
        async with self._lock:
            job = self.get(job_id)
            if job_id in self._runs:
                raise CronError("cron_busy", t("cron.busy", id=job_id), job_id=job_id)
            await self._begin(job, self.clock.now(), due=None)
        return job
