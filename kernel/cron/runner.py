"""One run of a job: its prompt (or each ``text_event`` of its workflow) goes through
the agent in the job's own session (channel ``cron``, ``external_id`` = the job id), and
the reply is delivered to the job's channel.

Nobody watches a cron turn, so a question it asks (ask_user, a tool approval) goes to
the owner through the registry's asker (Telegram's inline buttons); with no asker, the
turn is not interactive and such tools refuse at once, saying nobody can be asked.
A turn that fails is reported to the job's channel as well, so a reminder never
vanishes silently. A run the budget refuses before its first model call (the job's own
``runtime.budget_daily``, or the day or month limit: cron never asks to raise one) is
*skipped*, with the budget's words as the reason and a short notice on the job's
channel; one stopped by the budget after it made calls has *failed*.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Any

from kernel.agent.agent import Agent, SessionKey, UserInput
from kernel.config import Config
from kernel.core.clock import Clock
from kernel.core.delivery import ChannelRegistry, follow_turn
from kernel.core.errors import BudgetExceededError, BusyError, ChannelError, KernelError
from kernel.core.events import Completed
from kernel.core.i18n import t
from kernel.cron.jobs import CronJob
from kernel.cron.schedule import Rules
from kernel.cron.workflow import NODE_HANDLERS, NodeContext
from kernel.spend.meter import OWNER_CHANNELS

RESULT_LIMIT = 4000


class RunFailed(KernelError):
    """A run ended without its result; the text says why (shown as ``last_error``),
    ``code`` in a word (the audit's reason)."""

    def __init__(self, message: str, code: str = "failed") -> None:
        super().__init__(message)
        self.code = code


class RunSkipped(KernelError):
    """The budget refused the run's first model call: nothing was sent, nothing spent."""


@dataclass(slots=True)
class RunOutcome:
    status: str  # succeeded, failed or skipped
    result: str = ""
    error: str = ""
    execution: dict[str, Any] | None = None
    code: str = ""  # why it failed or was skipped, in a word (the audit's reason)


class JobRunner:
    def __init__(
        self, config: Config, agent: Agent, registry: ChannelRegistry, clock: Clock
    ) -> None:
        self.config = config
        self.agent = agent
        self.registry = registry
        self.clock = clock
        # The session each job's latest run talks in (its audit row's session).
        self.sessions: dict[str, int] = {}

    async def run(self, job: CronJob, rules: Rules) -> RunOutcome:
        if job.spec.task_type == "workflow":
            return await self._workflow(job, rules)
        try:
            reply = await self.run_text(job, job.spec.text)
        except RunSkipped as exc:
            return RunOutcome("skipped", error=str(exc), code="budget")
        except KernelError as exc:  # failed turn, failed delivery, session kept busy
            return RunOutcome("failed", error=str(exc), code=_code(exc))
        return RunOutcome("succeeded", result=reply[:RESULT_LIMIT])

    async def run_text(self, job: CronJob, text: str) -> str:
        """One turn in the job's session; its reply delivered. Returns the reply."""
        agent = self.agent
        key = SessionKey("cron", "", job.id)
        meta: dict[str, object] = {"source": "cron", "cron_job_id": job.id}
        opened = await agent.sessions.open_session(key, title=job.spec.name, meta=meta)
        assert opened is not None
        self.sessions[job.id] = opened.row.id
        seconds = self.config.cron.run_timeout
        try:
            await agent.sessions.wait_idle(opened.conversation, seconds)
        except BusyError:
            busy = t("cron.session_busy", seconds=f"{seconds:g}")
            raise RunFailed(busy, "session_busy") from None
        asker = self.registry.asker
        user_input = UserInput(text, channel="cron", interactive=asker is not None)
        turn = agent.start_turn(opened.conversation, user_input)
        switches: list[str] = []
        label = t("cron.ask_label", name=job.spec.name)
        where = job.spec.dispatch.target(job.id).session_id  # a job made in a topic: there
        final = await follow_turn(turn, asker, label, switches, where)
        # The owner is told which model answered instead, as in a chat; a webhook or a QQ
        # group is not (the owner's providers are not theirs to read).
        told = "".join(f"{line}\n" for line in switches)
        if job.spec.dispatch.channel not in OWNER_CHANNELS:
            told = ""
        if not isinstance(final, Completed):
            shown = final.message
            if (
                final.code == BudgetExceededError.CODE
                and job.spec.dispatch.channel not in OWNER_CHANNELS
            ):
                # A webhook, a QQ group: what the owner spends is not theirs to read.
                shown = t("budget.withheld")
            elif job.spec.dispatch.channel not in OWNER_CHANNELS:
                # Nor why it failed (a provider's name, a key's setting): the job's
                # state keeps the reason for the owner.
                shown = t("cron.failed_withheld")
            if final.code == BudgetExceededError.CODE and not turn.calls:
                notice = t("budget.cron_skipped", name=job.spec.name, reason=shown)
                with contextlib.suppress(ChannelError):  # the skip itself gets recorded
                    await self.deliver(job, notice)
                raise RunSkipped(final.message)
            notice = t("cron.failed_notice", name=job.spec.name, message=shown)
            with contextlib.suppress(ChannelError):  # the failure itself gets recorded
                await self.deliver(job, told + notice)
            # The job's state keeps the raw reason (a model failure's detail), for /cron.
            reason = final.meta.get("detail") or final.message
            raise RunFailed(str(reason), final.code or "failed")
        if final.cancelled:
            raise RunFailed(t("cron.cancelled"), "cancelled")
        if final.reply.strip():
            await self.deliver(job, told + final.reply)
        return final.reply

    async def deliver(self, job: CronJob, text: str) -> None:
        dispatch = job.spec.dispatch
        await self.registry.send(
            dispatch.channel,
            dispatch.target(job.id),
            text,
            timeout=self.config.cron.delivery_timeout,
        )

    async def _workflow(self, job: CronJob, rules: Rules) -> RunOutcome:
        workflow = job.spec.workflow
        assert workflow is not None
        dispatch = job.spec.dispatch

        async def run_text(text: str) -> str:
            return await self.run_text(job, text)

        ctx = NodeContext(
            job_id=job.id,
            job_name=job.spec.name,
            channel=dispatch.channel,
            user_id=dispatch.user_id,
            session_id=dispatch.session_id,
            task_type=job.spec.task_type,
            now=lambda: self.clock.now().astimezone(rules.tz),
            sleep=self.clock.sleep,
            run_text=run_text,
        )
        started = self._stamp()
        steps: list[dict[str, Any]] = []
        first_error = ""
        skipped = ""  # the budget refused the first turn: the whole run is skipped
        stopped_at: int | None = None
        for index, node in enumerate(workflow.order):
            step: dict[str, Any] = {
                "node_id": node.id,
                "node_type": node.type,
                "continue_on_error": node.continue_on_error,
                "started_at": self._stamp(),
            }
            stop = False
            try:
                done = await NODE_HANDLERS[node.type].execute(ctx, node)
                step["status"] = "succeeded"
                stop = done.stop
            except RunSkipped as exc:
                step["status"] = "failed"
                step["error"] = str(exc)
                if not ctx.outputs and not first_error:  # nothing spent yet: skipped
                    skipped = str(exc)
                first_error = first_error or t("cron.node_failed", id=node.id, error=str(exc))
                stop = True  # every later turn would be refused the same way
            except (KernelError, ValueError) as exc:
                step["status"] = "failed"
                step["error"] = str(exc)
                first_error = first_error or t("cron.node_failed", id=node.id, error=str(exc))
                stop = not node.continue_on_error
            step["finished_at"] = self._stamp()
            steps.append(step)
            if stop:
                stopped_at = index
                break
        if stopped_at is not None:
            for node in workflow.order[stopped_at + 1 :]:
                now = self._stamp()
                steps.append(
                    {
                        "node_id": node.id,
                        "node_type": node.type,
                        "status": "skipped",
                        "continue_on_error": node.continue_on_error,
                        "started_at": now,
                        "finished_at": now,
                    }
                )
        execution = {
            "run_id": f"run-{uuid.uuid4().hex[:12]}",
            "started_at": started,
            "finished_at": self._stamp(),
            "had_failures": bool(first_error),
            "nodes": steps,
        }
        result = "\n\n".join(ctx.outputs)[:RESULT_LIMIT]
        if skipped:
            return RunOutcome("skipped", error=skipped, execution=execution, code="budget")
        status, code = ("failed", "node_failed") if first_error else ("succeeded", "")
        return RunOutcome(status, result, first_error, execution, code)

    def _stamp(self) -> str:
        return self.clock.now().isoformat(timespec="seconds")


def _code(exc: KernelError) -> str:
    """An error's stable code (a failed delivery's ``channel_dispatch_failed`` …)."""
    code = getattr(exc, "code", "")
    return code if isinstance(code, str) and code else "failed"
