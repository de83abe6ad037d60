"""``/chats/{chat_id}/rewind`` and ``/chats/{chat_id}/retry`` (issue 20): cut a chat's
history after one answer, or answer its last message again. Cut messages stay in the
history (``GET /chats/{id}`` shows them with ``cut``, and its ``branches``), out of what
the model sees. ``/chats/{chat_id}/branches/{branch}`` (issue 38) makes a branch the
live history again, the history left kept as a branch. Each refuses while the chat's
turn runs (409 ``session_busy``: cancel it first)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aiohttp import web
from pydantic import Field

from kernel.agent.agent import SessionKey, UserInput
from kernel.core.errors import ConversationError, http_status
from kernel.core.i18n import t
from kernel.gateway.api import ApiError, Router, coded, deps_of, invalid, json_response, path_param
from kernel.gateway.routes.agent import ProcessResult, _collect
from kernel.gateway.routes.chats import CHAT_ID, chat_id_of, require_chat
from kernel.gateway.schema import BodyModel, Shape
from kernel.store.sessions import SessionRow

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("conversation", "Conversation control: rewind, retry and branches of a chat")


class RewindBody(BodyModel):
    after_sequence: Annotated[int, Field(ge=1, description="a final answer's sequence")]


class Rewound(Shape):
    chat_id: str
    cut: int = Field(description="messages cut (kept in the history)")
    branch: int


async def _conversation(deps: GatewayDeps, row: SessionRow) -> str:
    key = SessionKey(row.channel, row.user_id, row.external_id)
    opened = await deps.agent.sessions.open_session(key, create=False)
    assert opened is not None  # the row was just read
    return opened.conversation


@router.post(
    "/chats/{chat_id}/rewind",
    summary="Cut everything after the answer at after_sequence (kept as history)",
    params=(CHAT_ID,),
    body=RewindBody,
    response=Rewound,
    errors=(400, 404, 409),
)
async def rewind(request: web.Request, body: RewindBody) -> web.Response:
    deps = deps_of(request)
    row = await require_chat(deps, request.match_info["chat_id"])
    conversation = await _conversation(deps, row)
    try:
        cut = await deps.agent.control.rewind_session(
            conversation, row.id, body.after_sequence, "api"
        )
    except ConversationError as exc:
        raise ApiError(
            http_status(exc.code, 409), exc.code, str(exc), {"after_sequence": body.after_sequence}
        ) from None
    return json_response({"chat_id": chat_id_of(row), "cut": cut.count, "branch": cut.branch})


@router.post(
    "/chats/{chat_id}/retry",
    summary="Answer the chat's last message again (the old answer kept as a cut branch)",
    params=(CHAT_ID,),
    response=ProcessResult,
    errors=(404, 409, 502),
)
async def retry(request: web.Request) -> web.Response:
    deps = deps_of(request)
    row = await require_chat(deps, request.match_info["chat_id"])
    conversation = await _conversation(deps, row)
    template = UserInput(
        "", channel=row.channel, user_id=row.user_id, budget_ask=False, actor="api"
    )
    try:
        turn = await deps.agent.retry(conversation, template)
    except ConversationError as exc:
        raise coded(exc) from None
    ids = {"chat_id": chat_id_of(row), "session_id": row.external_id}
    try:
        return await _collect(aiter(turn), turn, ids)
    except BaseException:
        turn.cancel()  # the client went away: the history stays valid
        raise


class LeftBranch(Shape):
    id: int
    messages: int


class SwitchedBranch(Shape):
    chat_id: str
    active_branch: int = Field(description="the branch now live")
    restored: int = Field(description="messages the model sees again")
    left: list[LeftBranch] = Field(description="where the history left went (kept)")


BRANCH = path_param("branch", "a branch's id, as GET /chats/{chat_id} lists it")


@router.post(
    "/chats/{chat_id}/branches/{branch}",
    summary="Make a branch the live history (the history left is kept as a branch)",
    params=(CHAT_ID, BRANCH),
    response=SwitchedBranch,
    errors=(400, 404, 409),
)
async def switch_branch(request: web.Request) -> web.Response:
    deps = deps_of(request)
    row = await require_chat(deps, request.match_info["chat_id"])
    word = request.match_info["branch"]
    if not (word.isascii() and word.isdigit() and len(word) <= 18):
        raise invalid(t("conv.branch_usage"), field="branch")
    conversation = await _conversation(deps, row)
    try:
        switched = await deps.agent.control.switch(conversation, int(word), "api", row.id)
    except ConversationError as exc:
        raise coded(exc) from None
    left = [{"id": number, "messages": count} for number, count in switched.left]
    return json_response(
        {
            "chat_id": chat_id_of(row),
            "active_branch": switched.branch,
            "restored": switched.restored,
            "left": left,
        }
    )
