"""The agent's own scheduled jobs: ``cron_create``, ``cron_list``, ``cron_update``,
``cron_delete`` (seed 001's Cron tools), so the owner can say "明天早上 9 点提醒我交报告".

Times are the owner's local time (``general.timezone``, shown with the current time in
the turn's context). The agent may have at most ``cron.max_jobs`` jobs it created; a
refusal tells the model what to change (the expected form, the zone, the time now).
"""

from __future__ import annotations

from typing import Any

from kernel.core.delivery import TOPIC_CONVERSATION
from kernel.core.errors import CronError, ToolError
from kernel.core.session_modes import READS
from kernel.cron.jobs import CronJob
from kernel.cron.scheduler import CronScheduler
from kernel.cron.spec import BodyText, ChannelName, JobName, JobText, NameText, ScheduleText
from kernel.tools.registry import ToolContext, ToolRegistry


def _brief(job: CronJob, scheduler: CronScheduler) -> dict[str, Any]:
    rules = scheduler.rules
    spec = job.spec
    out: dict[str, Any] = {
        "id": job.id,
        "name": spec.name,
        "schedule": spec.schedule.text,
        "timezone": rules.tz_name,
        "enabled": spec.enabled,
        "paused": job.row.paused,
        "channel": spec.dispatch.channel,
        "next_run_at": (
            job.row.next_run_at.astimezone(rules.tz).isoformat(timespec="minutes")
            if job.schedulable and job.row.next_run_at
            else None
        ),
    }
    if spec.task_type == "text":
        out["text"] = spec.text if len(spec.text) <= 200 else spec.text[:199] + "…"
    else:
        out["task_type"] = "workflow"
    if job.row.last_status:
        out["last_status"] = job.row.last_status
    return out


def register(registry: ToolRegistry, scheduler: CronScheduler) -> None:
    async def call(coro: Any) -> Any:
        try:
            return await coro
        except CronError as exc:
            raise ToolError(str(exc)) from None

    @registry.tool
    async def cron_create(
        name: JobName,
        schedule: ScheduleText,
        text: JobText,
        channel: ChannelName | None = None,
        context: ToolContext | None = None,
    ) -> dict[str, Any]:
        """Schedule a job for the owner (a reminder, a recurring summary, a check): when
        it runs, your reply to `text` is delivered to them."""
        body: dict[str, Any] = {"name": name, "schedule": schedule, "text": text}
        if channel:
            body["dispatch"] = {"channel": channel}
        where = context.conversation if context is not None else ""
        if where.startswith(TOPIC_CONVERSATION) and channel in (None, "telegram"):
            # Made in a Telegram topic: its runs are delivered to that topic.
            body["dispatch"] = {"channel": "telegram", "target": {"session_id": where}}
        job = await call(scheduler.create(body, created_by="agent"))
        return _brief(job, scheduler)

    @registry.tool(effect=READS)
    async def cron_list() -> list[dict[str, Any]]:
        """List the scheduled jobs and their next runs."""
        return [_brief(job, scheduler) for job in scheduler.list()]

    @registry.tool
    async def cron_update(
        id: str,
        name: NameText | None = None,
        schedule: str | None = None,
        text: BodyText | None = None,
        enabled: bool | None = None,
        channel: str | None = None,
    ) -> dict[str, Any]:
        """Change a scheduled job: only the fields given change, in cron_create's forms;
        enabled=false pauses it, true resumes it."""
        body: dict[str, Any] = {}
        for key, value in (("name", name), ("schedule", schedule), ("text", text)):
            if value is not None:
                body[key] = value
        if enabled is not None:
            body["enabled"] = enabled
        if channel:
            body["dispatch"] = {"channel": channel}
        if not body:
            raise ToolError("nothing to change: give at least one of name, schedule, text, ...")
        job = await call(scheduler.update(id, body))
        return _brief(job, scheduler)

    @registry.tool
    async def cron_delete(id: str) -> dict[str, Any]:
        """Delete a scheduled job for good (to pause it: cron_update enabled=false)."""
        await call(scheduler.delete(id))
        return {"deleted": True, "id": id}
