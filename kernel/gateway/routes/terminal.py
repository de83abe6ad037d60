"""``/agent/terminal``: the terminal chat of ``kernel chat`` through the running Kernel.

One line at a time, as the owner typed it. A command runs through the terminal's
command set (:mod:`kernel.commands.terminal`, the one ``kernel chat --local`` uses; the
commands are Telegram's own implementation) in the terminal's conversation, which has a
current session as a Telegram chat has: /new starts another, /resume goes back to one.
It starts in the protected default chat (``chat-default``). Anything else is a message:
a turn in that conversation, answered as ``/agent/process`` answers (JSON, or SSE with
``stream``); a command's answer is ``command`` (in a stream, one ``command`` event).
No command's answer calls a model, except /retry (its turn) and /retitle without a
title (the titles model, its answer in ``follow_up``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import Field

from kernel.agent.agent import UserInput
from kernel.commands import Commands, Reply
from kernel.commands.terminal import CONVERSATION, is_command, reply_json, run_line
from kernel.core.errors import KernelError
from kernel.gateway.api import Router, deps_of, json_response, sse_frame
from kernel.gateway.routes.agent import Event, TurnPlan, _collect, stream_events
from kernel.gateway.routes.chats import DEFAULT_KEY
from kernel.gateway.schema import BodyModel, Shape, Text

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("terminal", "The terminal chat (kernel chat): its messages and commands")

COMMANDS = web.AppKey("terminal_commands", Commands)


async def _open_terminal(deps: GatewayDeps) -> None:
    """The terminal chat starts in the default chat (after it is made: routers' order)."""
    opened = await deps.agent.sessions.open_session(DEFAULT_KEY, create=False)
    if opened is not None and deps.agent.sessions.current_session(CONVERSATION) is None:
        await deps.agent.sessions.resume(CONVERSATION, opened.row.id)


def _caller(text: str) -> UserInput:
    """A line of a sidecar caller, as on every HTTP path: audited as ``api``, never asked
    to raise the owner's budget (a turn over it is refused)."""
    return UserInput(text, channel="console", budget_ask=False, actor="api")


@contextlib.asynccontextmanager
async def _command_set(deps: GatewayDeps, app: web.Application) -> AsyncIterator[None]:
    """One command set for the sidecar's life (it keeps the last /memory listing), acting
    for the caller (its /retry's turn, its audit rows)."""
    app[COMMANDS] = Commands(deps.command_parts, sender=_caller(""))
    yield


router.startup.append(_open_terminal)
router.services.append(_command_set)


class TerminalBody(BodyModel):
    text: Text = Field(description="one line as typed: a command (/status) or a message")
    stream: bool | None = None


class TerminalChoice(Shape):
    label: str
    command: str = Field(description="what to type to choose it")
    current: bool


class TerminalButton(Shape):
    label: str
    command: str = Field(description='what to type instead of pressing it ("": nothing)')


class CommandReply(Shape):
    """A command's answer in the owner's language; ``error``: a refusal naming the fix;
    ``choices``: what Telegram offers as buttons (a bare /model, /resume, /persona …)."""

    text: str
    error: bool
    choices: list[TerminalChoice]
    buttons: list[TerminalButton]


class TerminalResult(Shape):
    """A command's answer (``follow_up``: its slow second one), or the turn of a message
    (or of /retry) as ``/agent/process`` answers it."""

    command: CommandReply | None = None
    follow_up: CommandReply | None = None
    reply: str | None = None
    events: list[Event] | None = None
    plan: TurnPlan | None = None
    turn_id: str | None = None


@router.post(
    "/agent/terminal",
    summary="The terminal chat: run a command as Telegram does, or answer a message",
    body=TerminalBody,
    response=TerminalResult,
    sse=True,
    errors=(400, 409, 502),
)
async def terminal(request: web.Request, body: TerminalBody) -> web.StreamResponse:
    deps = deps_of(request)
    stream = bool(body.stream)
    if is_command(body.text):
        reply = await run_line(request.app[COMMANDS], body.text)
        if reply.turn is None:
            return await _answer(request, reply, stream)
        turn = reply.turn
    else:
        await deps.agent.sessions.wait_idle(CONVERSATION, deps.config.gateway.queue_timeout)
        turn = deps.agent.start_turn(CONVERSATION, _caller(body.text))
    try:
        if stream:
            return await stream_events(request, aiter(turn), turn)
        return await _collect(aiter(turn), turn, {})
    except BaseException:
        turn.cancel()  # the client went away: the history stays valid
        raise


async def _then(reply: Reply) -> Reply | None:
    """The reply's slow follow-up (a generated title), a failure told as a refusal."""
    if reply.follow_up is None:
        return None
    try:
        return await reply.follow_up()
    except KernelError as exc:
        return Reply(str(exc), error=True)


async def _answer(request: web.Request, reply: Reply, stream: bool) -> web.StreamResponse:
    """A command's answer, and its follow-up once it comes (the terminal waits for it)."""
    if not stream:
        then = await _then(reply)
        data: dict[str, Any] = {"command": reply_json(reply)}
        return json_response(data | ({"follow_up": reply_json(then)} if then else {}))
    response = web.StreamResponse(headers={"Cache-Control": "no-cache"})
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):  # gone: nothing more to tell
        await response.write(sse_frame({"type": "command", "command": reply_json(reply)}))
        if (then := await _then(reply)) is not None:
            await response.write(sse_frame({"type": "command", "command": reply_json(then)}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    return response
