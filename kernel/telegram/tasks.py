"""Background tasks in the owner's chat (issue 38): :class:`TaskTeller` tells a task's
result and offers the tasks a restart cut, each through the durable outbox with the
task's row marked in the same transaction (told once, across restarts). The ⏹ under
/tasks and the 🔁 under the offer send the shared ``/tasks`` verbs (:func:`task_arg`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kernel.commands.tasks import RUN, STOP, run_data
from kernel.core.i18n import t
from kernel.store.tasks import Claimed, TaskRow, claim
from kernel.telegram.outbox import plain_items, reply_items
from kernel.telegram.topics import lane_of_conversation

if TYPE_CHECKING:
    from kernel.telegram.deps import Deps

log = logging.getLogger(__name__)

PATTERN = rf"^({STOP}\d{{1,18}}|{RUN}[\d,]{{1,60}})$"
RESULT_SHOWN = 3500  # characters of a result in the chat (all of it in /tasks and the API)


class TaskTeller:
    """What the agent's background tasks tell the owner, as the chat's messages."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def report(self, row: TaskRow) -> None:
        key = "task.report_done" if row.status == "done" else "task.report_failed"
        result = row.result.strip() or "-"
        if len(result) > RESULT_SHOWN:
            result = result[:RESULT_SHOWN] + " …"
        text = t(key, id=row.id, title=row.title, result=result)
        lane = lane_of_conversation(row.conversation, self.deps.owner)  # a topic's: there
        try:
            await self.deps.outbox.put(lane, reply_items(text), also=claim([row.id], "reported_at"))
        except Claimed:
            log.info("background task %d: already told", row.id)

    async def offer(self, rows: list[TaskRow]) -> None:
        ids = [row.id for row in rows]
        data = run_data(ids)
        offered = [int(i) for i in data.removeprefix(RUN).split(",") if i]
        listed = "\n".join(f"#{row.id} {row.title}" for row in rows if row.id in offered)
        markup = {"inline_keyboard": [[{"text": t("task.offer_button"), "callback_data": data}]]}
        text = t("task.offer", tasks=listed)
        try:
            await self.deps.outbox.put(
                self.deps.owner,
                plain_items(text, markup=markup),
                also=claim(offered, "offered_at"),
            )
        except Claimed:
            log.info("background tasks: the restart's offer was made already")


def task_arg(data: str) -> str:
    """A ⏹ or 🔁 press's data as the ``/tasks`` argument that does the same."""
    if data.startswith(STOP):
        return f"stop {data.removeprefix(STOP)}"
    return f"run {data.removeprefix(RUN)}"
