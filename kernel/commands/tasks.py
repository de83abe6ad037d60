"""/tasks (issue 38): the owner's background tasks, newest first, a ⏹ button under each
running one; ``/tasks stop <id>`` stops one, ``/tasks run <id>[,<id>…]`` runs
interrupted, failed or stopped ones again (the buttons send the same)."""

from __future__ import annotations

from kernel.agent.agent import Agent
from kernel.commands.reply import Button, Reply
from kernel.core.errors import TaskError
from kernel.core.i18n import t
from kernel.core.oneline import one_line
from kernel.store.tasks import TaskRow

LISTED = 15  # tasks shown
STOP_BUTTONS = 5  # ⏹ buttons at most (one row)
STOP = "taskstop:"  # a ⏹ press: "taskstop:<id>"
RUN = "taskrun:"  # a 🔁 press: "taskrun:<id>,<id>…"
CALLBACK_BYTES = 64


async def tasks_command(agent: Agent, arg: str) -> Reply:
    verb, _, rest = arg.partition(" ")
    try:
        if verb == "stop":
            row = await agent.tasks.stop_task(_id(rest))
            return Reply(t("task.stopped", id=row.id, title=row.title))
        if verb == "run":
            ids = [_id(part) for part in rest.replace(",", " ").split()]
            started = await agent.tasks.rerun(ids)
            if not started:
                return Reply(t("task.rerun_none"), error=True)
            listed = ", ".join(f"#{row.id}" for row in started)
            return Reply(t("task.rerun_started", ids=listed))
    except TaskError as exc:
        return Reply(str(exc), error=True)
    except ValueError:
        return Reply(t("task.usage"), error=True)
    if arg:
        return Reply(t("task.usage"), error=True)
    return await _listing(agent)


async def _listing(agent: Agent) -> Reply:
    rows = await agent.tasks.listed(limit=LISTED)
    if not rows:
        return Reply(t("task.none_owner"))
    lines = [t("task.header")] + [_line(row) for row in rows]
    running = [row for row in rows if agent.tasks.running(row.id)][:STOP_BUTTONS]
    buttons = tuple(
        Button(t("task.stop_button", id=row.id), f"{STOP}{row.id}", f"/tasks stop {row.id}")
        for row in running
    )
    return Reply("\n".join(lines), buttons=buttons)


def _line(row: TaskRow) -> str:
    status = t(f"task.status_{row.status}")
    line = t("task.line", id=row.id, status=status, title=row.title)
    detail = row.progress if row.status == "running" else one_line(row.result, 120)
    return f"{line}\n   {detail}" if detail else line


def run_data(ids: list[int]) -> str:
    """A 🔁 button's data for ``ids`` (as many as fit Telegram's 64 bytes)."""
    data = RUN
    for task_id in ids:
        more = f"{data}{',' if data != RUN else ''}{task_id}"
        if len(more.encode()) > CALLBACK_BYTES:
            break
        data = more
    return data


def _id(text: str) -> int:
    value = int(text.strip().removeprefix("#"))
    if value <= 0:
        raise ValueError(text)
    return value
