"""``/agent/tasks`` (issue 38): background tasks, as the owner's /tasks and the model's
``task_*`` tools see them (kernel/agent/background.py). List (one session's with
``session_id``), create (a sub-agent's or a coding CLI's job, in a session's context
when one is named), stop one. Refusals: ``404 task_not_found``, ``409 task_not_running``,
``409 task_refused`` (nothing can run as a task, or too many run), ``403
tool_forbidden_in_mode`` (the session is in plan or read_only mode), ``404
session_not_found``, ``400 invalid_request``."""

from __future__ import annotations

from typing import Literal

from aiohttp import web

from kernel.agent.background import NewTask
from kernel.agent.sessions import SESSION_PREFIX
from kernel.core.errors import TaskError
from kernel.core.i18n import t
from kernel.gateway.api import (
    Router,
    bounded,
    deps_of,
    json_response,
    path_param,
    query_int,
    query_param,
)
from kernel.gateway.schema import BodyModel, Shape
from kernel.store.tasks import MAX_LISTED
from kernel.tools.registry import ToolContext

router = Router("tasks", "Background tasks: list, create, stop")

TASK_ID = path_param("task_id", "the task's id")
CONVERSATION = "api"  # a task created with no session


class TaskInfo(Shape):
    """``kind``: agent (a sub-agent) or cli (a coding CLI); ``status``: queued, running,
    done, failed, stopped or interrupted (a restart cut it); ``reported``: the owner's
    chat was told its result."""

    id: int
    kind: Literal["agent", "cli"]
    session_id: int | None = None
    conversation: str
    title: str
    status: str
    progress: str
    result: str
    created_at: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    reported: bool
    running: bool


class TaskList(Shape):
    items: list[TaskInfo]


class NewTaskBody(BodyModel):
    """``agent``: the sub-agent's name (kind agent); ``cli``, ``cwd``: which CLI and
    where (kind cli; defaults as ``delegate_to_cli``'s); ``session_id``: the chat whose
    persona, project and memories the task works with."""

    kind: Literal["agent", "cli"]
    task: str
    agent: str = ""
    cli: str = ""
    cwd: str = ""
    title: str = ""
    session_id: int | None = None


def _info(request: web.Request, row_json: dict[str, object], task_id: int) -> dict[str, object]:
    return {**row_json, "running": deps_of(request).agent.tasks.running(task_id)}


@router.get(
    "/agent/tasks",
    summary="Background tasks, newest first",
    params=(
        query_param("session_id", int, "only this session's"),
        query_param("limit", bounded(1, MAX_LISTED), f"how many ({MAX_LISTED})"),
    ),
    response=TaskList,
)
async def list_tasks(request: web.Request) -> web.Response:
    tasks = deps_of(request).agent.tasks
    session = query_int(request, "session_id", 0, minimum=0, maximum=2**62) or None
    limit = query_int(request, "limit", MAX_LISTED, minimum=1, maximum=MAX_LISTED)
    rows = await tasks.listed(session, limit)
    return json_response({"items": [_info(request, row.as_json(), row.id) for row in rows]})


@router.post(
    "/agent/tasks",
    summary="Start a background task; its result is told in the owner's chat when it ends",
    body=NewTaskBody,
    response=TaskInfo,
    status=201,
    errors=(400, 403, 404, 409),
)
async def create_task(request: web.Request, body: NewTaskBody) -> web.Response:
    deps = deps_of(request)
    context = ToolContext(conversation=CONVERSATION)
    if body.session_id is not None:
        row = await deps.sessions.get_session(body.session_id)
        if row is None:
            raise TaskError(
                "session_not_found",
                t("task.session_not_found", id=body.session_id),
                {"session_id": body.session_id},
            )
        # the one rule of the session's mode: plan and read_only hold task_create back
        await deps.agent.modes.check(row.id, "task_create", deps.tools, None)
        conversation = f"{SESSION_PREFIX}{row.id}"
        context = await deps.agent.scopes.tool_context(row.id, conversation)
    new = NewTask(body.kind, body.task, body.agent, body.cli, body.cwd, body.title)
    created = await deps.agent.tasks.create(new, context)
    return json_response(_info(request, created.as_json(), created.id), status=201)


@router.post(
    "/agent/tasks/{task_id}/stop",
    summary="Stop a running background task",
    params=(TASK_ID,),
    response=TaskInfo,
    errors=(404, 409),
)
async def stop_task(request: web.Request) -> web.Response:
    raw = request.match_info["task_id"]
    if not raw.isdigit():
        raise TaskError("task_not_found", t("task.not_found", id=raw[:20]))
    row = await deps_of(request).agent.tasks.stop_task(int(raw))
    return json_response(_info(request, row.as_json(), row.id))
