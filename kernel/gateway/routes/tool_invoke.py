"""``POST /agent/tools/{name}`` (seed 001): one registered tool called with JSON
arguments, in a chat's session, without a model call; its result comes back as JSON.

The chat is named as on ``/agent/process`` (``channel``, ``user_id``, ``session_id``;
default: the protected default chat) and the call waits behind that chat's running turn.
The session's plan or permission mode is asked first (:func:`mode_refusal`). Answers:
404 for a tool that is not registered, 403 ``tool_disabled``, 400 for arguments the
tool's schema refuses, 422 ``tool_invoke_failed`` when the tool ran and failed, 502
``tool_invalid_result`` when its structured result is no JSON.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field

from kernel.core.i18n import t
from kernel.gateway.api import (
    Router,
    deps_of,
    invalid,
    json_response,
    not_found,
    path_param,
    refusal,
)
from kernel.gateway.explicit import mode_refusal, outcome_output
from kernel.gateway.routes.chats import DEFAULT_KEY, ChatKeyBody, chat_id_of
from kernel.gateway.schema import Shape
from kernel.gateway.tool_failure import ToolFailed
from kernel.tools.registry import NAME_PATTERN

router = Router("tool_invoke", "Tools: call one tool with JSON arguments")


class InvokeBody(ChatKeyBody):
    input: dict[str, Any] | None = Field(default=None, description="the tool's arguments")


class Invoked(Shape):
    ok: bool
    name: str
    output: Any = Field(description="the tool's structured result, or its text")
    chat_id: str
    session_id: str


@router.post(
    "/agent/tools/{name}",
    summary="Call one tool with JSON arguments in a chat's session (no model call)",
    params=(path_param("name", "the tool's name, as GET /agent/tools lists it"),),
    body=InvokeBody,
    response=Invoked,
    errors=(400, 403, 404, 409, 422, 502),
)
async def invoke(request: web.Request, body: InvokeBody) -> web.Response:
    deps = deps_of(request)
    name = request.match_info["name"]
    if not NAME_PATTERN.match(name):
        raise not_found("tool", name[:64])
    if deps.tools.is_disabled(name):
        raise refusal("tool_disabled", t("gw.tool_disabled", name=name), {"tool": name})
    if name not in deps.tools:
        raise not_found("tool", name)
    key = body.key(DEFAULT_KEY)
    opened = await deps.agent.sessions.open_session(key)
    assert opened is not None
    await mode_refusal(deps, opened.row.id, name, body.input)
    await deps.agent.sessions.wait_idle(opened.conversation, deps.config.gateway.queue_timeout)
    context = await deps.agent.scopes.tool_context(opened.row.id, opened.conversation)
    outcome = await deps.tools.call(name, body.input or {}, context)
    if outcome.rejected:
        raise invalid(outcome.content, field="input")
    try:
        output = outcome_output(outcome)
    except ToolFailed as exc:
        raise refusal(exc.code, exc.message, {"tool": name, **exc.details}) from None
    ids = {"chat_id": chat_id_of(opened.row), "session_id": key.external_id}
    return json_response({"ok": True, "name": outcome.name, "output": output, **ids})
