"""``GET /agent/tools`` (issue 38, seed 001): the tools a session's mode leaves.

A session in ``act`` is offered every tool; in ``plan`` or ``read_only`` only the tools
that read and the control tools (kernel/core/session_modes.py). The session is named
as ``/agent/process`` names it (``session_id`` with ``channel`` and ``user_id``), or by
its chat id (``chat-<n>``); without one, the tools a new chat starts with. An unknown
session is ``404 session_not_found``.

:func:`tool_session` is how a tool route finds the session it names; whether a tool may
run there is ``agent.modes.check`` (kernel/agent/session_modes.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from kernel.agent.sessions import SessionKey
from kernel.core.i18n import t
from kernel.core.session_modes import ACT
from kernel.gateway.api import Router, deps_of, json_response, query_param, refusal
from kernel.gateway.routes.chats import DEFAULT_KEY, chat_id_of, find_chat, key_part
from kernel.gateway.schema import Shape
from kernel.store.db import SessionRow

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("tools", "The tools the model may use, as a session's mode leaves them")


class ToolInfo(Shape):
    """``read_only``: no call of it writes or acts (it stays in plan and read_only);
    ``effect``: reads, acts or control (switches the mode: always listed)."""

    name: str
    description: str
    read_only: bool
    effect: str
    parameters: dict[str, Any]


class ToolList(Shape):
    session_id: str | None = None
    chat_id: str | None = None
    mode: str
    items: list[ToolInfo]


async def tool_session(deps: GatewayDeps, ident: str, query: Any) -> SessionRow:
    """The session ``ident`` names: a chat id (``chat-<n>``, ``chat-default``), else a
    ``session_id`` as ``/agent/process`` keys it (``query``'s ``channel`` and ``user_id``,
    their defaults when absent). Raises 404 ``session_not_found``."""
    row = await find_chat(deps, ident)
    if row is not None:
        return row
    key = SessionKey(
        key_part(query.get("channel"), "channel", DEFAULT_KEY.channel),
        key_part(query.get("user_id"), "user_id", DEFAULT_KEY.user_id),
        key_part(ident, "session_id", DEFAULT_KEY.external_id),
    )
    opened = await deps.agent.sessions.open_session(key, create=False)
    if opened is None:
        shown = ident[:128]
        message = t("gw.tools_session_not_found", id=shown)
        raise refusal("session_not_found", message, {"session_id": shown})
    return opened.row


@router.get(
    "/agent/tools",
    summary="The tools a session's mode leaves (act: all; plan, read_only: those that read)",
    params=(
        query_param("session_id", str, "a chat id (chat-<n>) or /agent/process's session_id"),
        query_param("channel", str, "with session_id, as /agent/process"),
        query_param("user_id", str, "with session_id, as /agent/process"),
    ),
    response=ToolList,
    errors=(400, 404),
)
async def list_tools(request: web.Request) -> web.Response:
    deps = deps_of(request)
    ident = request.query.get("session_id")
    row = await tool_session(deps, ident, request.query) if ident is not None else None
    mode = row.mode if row is not None else ACT
    tools = deps.tools
    items = [
        {
            "name": spec.name,
            "description": spec.description,
            "read_only": tools.read_only(spec.name),
            "effect": tools.effect(spec.name) or "acts",
            "parameters": spec.parameters,
        }
        for spec in tools.specs()
        if tools.visible_in(spec.name, mode)
    ]
    out = {
        "session_id": row.external_id if row is not None else None,
        "chat_id": chat_id_of(row) if row is not None else None,
        "mode": mode,
        "items": items,
    }
    return json_response(out)
