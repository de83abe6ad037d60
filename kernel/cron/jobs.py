"""A job's definition, checked at the boundary (HTTP bodies, tool arguments, the CLI),
and its JSON view.

The API shape follows seed 000's ``CronJobSpec``: ``id``, ``name``, ``enabled``,
``schedule``, ``task_type`` (``text`` or ``workflow``), ``text`` / ``workflow``,
``dispatch`` (``{"channel", "target": {"user_id", "session_id", "target_type"}}``,
Telegram's owner by default), ``runtime`` (``timeout_seconds``,
``misfire_grace_seconds``, ``budget_daily``), ``meta``; plus ``state`` in views.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from kernel.core.delivery import Target
from kernel.core.errors import CronError
from kernel.core.i18n import t
from kernel.cron import schedule as schedules
from kernel.cron.schedule import Rules, Schedule
from kernel.cron.spec import (
    JOB_ID_PATTERN,
    META_LIMIT,
    NAME_LIMIT,
    TARGET_TYPES,
    TASK_TYPES,
    TEXT_LIMIT,
    BodyReader,
    DispatchModel,
    JobSpecModel,
)
from kernel.cron.workflow import Workflow, parse_workflow
from kernel.store.cron import CronRow

__all__ = ["JobSpecModel", "META_LIMIT", "NAME_LIMIT", "TASK_TYPES", "TEXT_LIMIT"]

DEFAULT_ID = "cron-default"
DEFAULT_SCHEDULE = "0 9 * * *"
DEFAULT_CHANNEL = "telegram"
JOB_ID = re.compile(JOB_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class Dispatch:
    channel: str = DEFAULT_CHANNEL
    user_id: str = ""
    session_id: str = ""
    target_type: str = ""  # qq: c2c, group, guild or dm

    def target(self, job_id: str) -> Target:
        return Target(
            user_id=self.user_id,
            session_id=self.session_id or job_id,
            kind=self.target_type,
            origin="cron",
        )

    def to_dict(self) -> dict[str, Any]:
        target: dict[str, str] = {"user_id": self.user_id, "session_id": self.session_id}
        if self.target_type:
            target["target_type"] = self.target_type
        return {"channel": self.channel, "target": target}


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    schedule: Schedule
    task_type: str = "text"
    text: str = ""
    workflow: Workflow | None = None
    dispatch: Dispatch = field(default_factory=Dispatch)
    enabled: bool = True
    timeout_seconds: float | None = None
    misfire_grace_seconds: float | None = None
    budget_daily: float | None = None  # None: budget.cron_job_daily; 0: no limit
    meta: dict[str, Any] = field(default_factory=dict)

    def to_store(self) -> dict[str, Any]:
        """What goes into ``cron_jobs.spec`` (name and enabled have columns)."""
        return {
            "schedule": self.schedule.text,
            "task_type": self.task_type,
            "text": self.text,
            "workflow": self.workflow.to_dict() if self.workflow else None,
            "dispatch": self.dispatch.to_dict(),
            "runtime": self.runtime(),
            "meta": self.meta,
        }

    def runtime(self) -> dict[str, Any]:
        return {
            "timeout_seconds": self.timeout_seconds,
            "misfire_grace_seconds": self.misfire_grace_seconds,
            "budget_daily": self.budget_daily,
        }


@dataclass(slots=True)
class CronJob:
    spec: JobSpec
    row: CronRow  # state, written through to the store

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def schedulable(self) -> bool:
        return self.spec.enabled and not self.row.paused


def _channel(channel: Any, channels: Collection[str]) -> str:
    if not isinstance(channel, str) or channel not in channels:
        shown = str(channel)[:64]
        raise CronError(
            "channel_not_supported",
            t("channel.not_supported", name=shown, known=", ".join(channels)),
            channel=shown,
            supported=list(channels),
        )
    return channel


def _dispatch(body: DispatchModel, base: Dispatch, channels: Collection[str]) -> Dispatch:
    channel = _channel(
        body.channel if "channel" in body.model_fields_set else base.channel, channels
    )
    target = body.target
    values = {
        key: str(value).strip()[:128]
        for key in ("user_id", "session_id", "target_type", "target_id")
        if (value := getattr(target, key)) is not None
    }
    kind = values.get("target_type", base.target_type if channel == base.channel else "")
    if kind and kind not in TARGET_TYPES:
        raise CronError("invalid_request", t("qq.bad_target_type", kind=kind[:16]))
    same = channel == base.channel
    return Dispatch(
        channel=channel,
        user_id=values.get("target_id") or values.get("user_id", base.user_id if same else ""),
        session_id=values.get("session_id", base.session_id if same else ""),
        target_type=kind,
    )


def parse_spec(
    data: dict[str, Any],
    rules: Rules,
    channels: Collection[str],
    *,
    base: JobSpec | None = None,
    now: datetime | None = None,
) -> JobSpec:
    """A checked spec from an API body (its shape: :class:`JobSpecModel`, each field
    checked as it is read); ``base``: the job being updated (fields not in ``data`` keep
    their values). ``now`` (a create or an update): the job is about to be planned from
    then, so a once time must come after it and a run must be plannable; without it (a
    stored job being loaded) those are left to the scheduler."""
    read = BodyReader(data)
    name = read("name")
    name = name.strip() if name is not None else None
    if base is None and not name:
        raise CronError("invalid_request", t("gw.field_required", field="name"))
    spec = base or JobSpec(name="", schedule=Schedule("interval", seconds=3600))
    if name:
        spec = replace(spec, name=name)
    elif name is not None:
        raise CronError("invalid_request", t("gw.field_required", field="name"))
    if "enabled" in data:
        spec = replace(spec, enabled=read("enabled"))
    if read("schedule") is not None:
        spec = replace(spec, schedule=schedules.from_dict(data["schedule"], rules, now))
    elif base is None:
        raise CronError("invalid_cron_schedule", t("gw.field_required", field="schedule"))
    text = read("text")
    text = text.strip() if text is not None else None
    if text is not None:
        spec = replace(spec, text=text)
    if read("workflow") is not None:
        spec = replace(spec, workflow=parse_workflow(data["workflow"]))
    kind = read("task_type")
    if kind is None:
        kind = "workflow" if read.given("workflow") else None
        kind = kind or ("text" if text else spec.task_type)
    spec = replace(spec, task_type=kind)
    if spec.task_type == "text" and not spec.text:
        raise CronError("invalid_request", t("gw.field_required", field="text"))
    if spec.task_type == "workflow" and spec.workflow is None:
        raise CronError("invalid_cron_workflow", t("gw.field_required", field="workflow"))
    raw_dispatch = data.get("dispatch")
    if isinstance(raw_dispatch, dict):  # the channel first, as documented
        _channel(raw_dispatch.get("channel", spec.dispatch.channel), channels)
    dispatch = read("dispatch")
    if dispatch is not None:
        spec = replace(spec, dispatch=_dispatch(dispatch, spec.dispatch, channels))
    elif spec.dispatch.channel not in channels:
        spec = replace(spec, dispatch=_dispatch(DispatchModel(), spec.dispatch, channels))
    runtime = read("runtime")
    if runtime is not None:
        if "timeout_seconds" in runtime.model_fields_set:
            spec = replace(spec, timeout_seconds=runtime.timeout_seconds)
        if "misfire_grace_seconds" in runtime.model_fields_set:
            spec = replace(spec, misfire_grace_seconds=runtime.misfire_grace_seconds)
        if "budget_daily" in runtime.model_fields_set:
            spec = replace(spec, budget_daily=runtime.budget_daily)
    meta = read("meta")
    if meta is not None:
        keep = {"system_default": True} if spec.meta.get("system_default") else {}
        spec = replace(spec, meta={**json.loads(json.dumps(meta, default=str)), **keep})
    if now is not None:
        schedules.check_plannable(spec.schedule, rules, now)
        _check_delays(spec, rules)
    return spec


def _check_delays(spec: JobSpec, rules: Rules) -> None:
    """A workflow's delays run inside its run's timeout: refused when they alone reach it.
    (Not excluded from the timeout: a run lives in memory only, so a days-long wait
    would keep the job "running", skip its next runs, and vanish at a restart.)"""
    if spec.task_type != "workflow" or spec.workflow is None:
        return
    total = sum(node.delay_seconds for node in spec.workflow.order if node.type == "delay")
    limit = spec.timeout_seconds or rules.run_timeout
    if total and total >= limit:
        raise CronError(
            "invalid_cron_workflow",
            t("cron.delays_too_long", total=total, limit=f"{limit:g}"),
            field="workflow",
        )


def spec_from_row(row: CronRow, rules: Rules, channels: Collection[str]) -> JobSpec:
    """The spec as stored (checked again: a schedule is parsed from its text form)."""
    stored = dict(row.spec)
    stored["name"] = row.name
    stored["enabled"] = row.enabled
    return parse_spec(stored, rules, channels)


def job_view(job: CronJob, rules: Rules, *, running: bool = False) -> dict[str, Any]:
    spec = job.spec
    return {
        "id": job.id,
        "name": spec.name,
        "enabled": spec.enabled,
        "schedule": spec.schedule.to_dict(rules.tz_name),
        "task_type": spec.task_type,
        "text": spec.text if spec.task_type == "text" else "",
        "workflow": spec.workflow.to_dict() if spec.workflow else None,
        "dispatch": spec.dispatch.to_dict(),
        "runtime": spec.runtime(),
        "meta": {**spec.meta, "created_by": job.row.created_by},
        "state": state_view(job, rules, running=running),
    }


def _local(value: datetime | None, rules: Rules) -> str | None:
    return value.astimezone(rules.tz).isoformat(timespec="seconds") if value else None


def state_view(job: CronJob, rules: Rules, *, running: bool = False) -> dict[str, Any]:
    row = job.row
    return {
        "paused": row.paused,
        "running": running,
        "next_run_at": _local(row.next_run_at, rules) if job.schedulable else None,
        "last_run_at": _local(row.last_run_at, rules),
        "last_status": row.last_status,
        "last_result": row.last_result,
        "last_error": row.last_error,
        "last_execution": row.last_execution,
        "run_count": row.run_count,
    }
