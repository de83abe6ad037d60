"""``/chats``: the agent's sessions, whichever channel made them (seed 000 "Chat
Default Session Rule").

A chat is a session row: ``channel``, ``user_id``, ``session_id`` (the row's external
id) and ``meta``. Its id is ``chat-<row id>``, except the protected default chat
``chat-default`` (``console`` / ``demo-user`` / ``session-default``,
``meta.system_default = true``), which exists from the gateway's start and is never
deleted.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from aiohttp import web
from pydantic import Field, ModelWrapValidatorHandler, ValidationError, model_validator

from kernel.agent.agent import SessionKey
from kernel.core.i18n import t
from kernel.core.messages import content_to_json
from kernel.gateway.api import (
    ApiError,
    Router,
    bounded,
    deps_of,
    invalid,
    json_response,
    not_found,
    path_param,
    query_int,
    query_param,
    refusal,
)
from kernel.gateway.schema import BodyModel, Shape, field_of, refuse
from kernel.store.sessions import SessionRow

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("chats", "Conversations (sessions) of every channel")

DEFAULT_CHAT_ID = "chat-default"
DEFAULT_KEY = SessionKey("console", "demo-user", "session-default")
_CHAT_ID = re.compile(r"^chat-(\d{1,18})$")
NAME_LIMIT = 128  # channel, user_id, session_id
TITLE_LIMIT = 200  # a chat's name


async def ensure_default_chat(deps: GatewayDeps) -> None:
    opened = await deps.agent.sessions.open_session(DEFAULT_KEY, meta={"system_default": True})
    assert opened is not None
    if not opened.row.meta.get("system_default"):
        await deps.sessions.update_meta(opened.row.id, {**opened.row.meta, "system_default": True})


router.startup.append(ensure_default_chat)


def chat_id_of(row: SessionRow) -> str:
    key = SessionKey(row.channel, row.user_id, row.external_id)
    return DEFAULT_CHAT_ID if key == DEFAULT_KEY else f"chat-{row.id}"


def chat_json(row: SessionRow) -> dict[str, Any]:
    return {
        "id": chat_id_of(row),
        "name": row.title or "",
        "session_id": row.external_id,
        "user_id": row.user_id,
        "channel": row.channel,
        "mode": row.mode,  # act, plan or read_only (issue 38)
        "meta": row.meta,
        "message_count": row.message_count,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
    }


async def find_chat(deps: GatewayDeps, chat_id: str) -> SessionRow | None:
    if chat_id == DEFAULT_CHAT_ID:
        opened = await deps.agent.sessions.open_session(DEFAULT_KEY, create=False)
        return opened.row if opened else None
    match = _CHAT_ID.match(chat_id)
    if match is None:
        return None
    return await deps.sessions.get_session(int(match.group(1)))


async def require_chat(deps: GatewayDeps, chat_id: str) -> SessionRow:
    row = await find_chat(deps, chat_id)
    if row is None:
        raise not_found("chat_id", chat_id)
    return row


def key_part(value: str | None, name: str, default: str) -> str:
    if value is None:
        return default
    if not value.strip() or any(ord(c) < 32 for c in value):
        raise invalid(t("gw.bad_key_part", field=name), field=name)
    return value


KeyPart = Annotated[str, Field(max_length=NAME_LIMIT)]


class ChatKeyBody(BodyModel):
    """The three parts of a chat's key (a missing one takes its default)."""

    session_id: KeyPart | None = None
    user_id: KeyPart | None = None
    channel: KeyPart | None = None

    def key(self, default: SessionKey) -> SessionKey:
        return SessionKey(
            key_part(self.channel, "channel", default.channel),
            key_part(self.user_id, "user_id", default.user_id),
            key_part(self.session_id, "session_id", default.external_id),
        )


class Chat(Shape):
    id: str
    name: str | None = None
    session_id: str
    user_id: str
    channel: str
    mode: str | None = None  # act, plan or read_only
    meta: dict[str, Any]
    message_count: int | None = None
    created_at: str | None = None
    updated_at: str | None = None


class ChatList(Shape):
    chats: list[Chat] | None = None
    total: int | None = None


class NewChatBody(ChatKeyBody):
    name: Annotated[str, Field(max_length=TITLE_LIMIT)] | None = None
    meta: dict[str, Any] | None = None


class StoredMessage(Shape):
    role: str
    content: Any
    failed: bool | None = None  # true: the provider refused it; never shown to a model
    sequence: int | None = None  # its place in the chat (POST /chats/{id}/rewind)
    cut: int | None = None  # the branch /undo, /rewind or /retry cut it with; never shown


class ChatBranch(Shape):
    """A branch (issue 38): messages /undo, /rewind, /retry or a switch took out of what
    the model sees, kept (their ``cut`` is its id); POST /chats/{id}/branches/{branch}
    makes it the live history."""

    id: int
    fork_sequence: int = Field(description="the message it continues after; 0: the start")
    first_sequence: int
    messages: int
    first_words: str
    how: str = Field(description="undo, rewind, retry, switch or cut")
    created_at: str = Field(description="when its first message was written")
    cut_at: str


class ChatWithMessages(Chat):
    messages: list[StoredMessage] | None = None
    branches: list[ChatBranch] | None = None
    branch_count: int | None = None  # all of them (the newest 50 are listed)
    active_branch: int | None = None  # the id the live history had as a branch; 0: none


class Deleted(Shape):
    deleted: bool | None = None
    id: str | None = None


class BatchDeleteBody(BodyModel):
    chat_ids: Annotated[list[str], Field(max_length=500)]

    @model_validator(mode="wrap")
    @classmethod
    def _one_refusal(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Whatever is wrong with ``chat_ids`` (absent, not a list, too long), one
        refusal that shows its shape."""
        try:
            return handler(data)
        except ValidationError as exc:
            if field_of(exc.errors()[0]["loc"]).startswith("chat_ids"):
                raise refuse("gw.chat_ids", field="chat_ids") from None
            raise


class BatchDeleted(Shape):
    deleted: int | None = None
    missing: list[str] | None = None


CHAT_ID = path_param("chat_id", "chat-default or chat-<n>")


@router.get(
    "/chats",
    summary="List chats, most recently active first",
    params=(
        query_param("channel", str),
        query_param("user_id", str),
        query_param("limit", bounded(0, 500)),
        query_param("offset", bounded(0)),
    ),
    response=ChatList,
)
async def list_chats(request: web.Request) -> web.Response:
    deps = deps_of(request)
    limit = query_int(request, "limit", 50, maximum=500)
    offset = query_int(request, "offset", 0, maximum=2**31)
    channel = request.query.get("channel")
    user_id = request.query.get("user_id")
    rows = await deps.sessions.list_sessions(
        limit=limit, offset=offset, channel=channel, user_id=user_id
    )
    total = await deps.sessions.count_sessions(channel=channel, user_id=user_id)
    return json_response({"chats": [chat_json(r) for r in rows], "total": total})


@router.post(
    "/chats",
    summary="Create a chat (or return the one with the same channel/user_id/session_id)",
    body=NewChatBody,
    response=Chat,
    status=201,
    also=(200,),
)
async def create_chat(request: web.Request, body: NewChatBody) -> web.Response:
    """201 with a new chat; 200 with the existing one when the key is taken. Without a
    ``session_id`` a fresh one is made."""
    deps = deps_of(request)
    key = body.key(SessionKey("console", DEFAULT_KEY.user_id, f"s-{uuid.uuid4().hex[:12]}"))
    name = body.name
    meta = dict(body.meta or {})
    if "system_default" in meta:
        raise invalid(t("gw.meta_reserved", key="system_default"), field="meta.system_default")
    opened = await deps.agent.sessions.open_session(key, title=name or None, meta=meta)
    assert opened is not None
    return json_response(chat_json(opened.row), 201 if opened.created else 200)


# Not "batch-delete": that path is its own route (POST only), whose Allow must say so.
CHAT_PATH = "/chats/{chat_id:(?!batch-delete$)[^/]+}"


@router.get(
    CHAT_PATH,
    summary="A chat with its recent messages",
    params=(
        CHAT_ID,
        query_param("rounds", bounded(0, 1000)),
    ),
    response=ChatWithMessages,
    errors=(404,),
)
async def get_chat(request: web.Request) -> web.Response:
    deps = deps_of(request)
    rounds = query_int(request, "rounds", 20, maximum=1000)
    row = await require_chat(deps, request.match_info["chat_id"])
    out = chat_json(row)
    out["messages"] = [
        {"role": s.message.role, "content": content_to_json(s.message.content), "sequence": s.id}
        | ({"failed": True} if s.failed else {})
        | ({"cut": s.cut} if s.cut else {})
        for s in await deps.sessions.load_transcript(row.id, rounds=rounds)
    ]
    return json_response(out | await branches_json(deps, row.id))


async def branches_json(deps: GatewayDeps, session_id: int) -> dict[str, Any]:
    listed = await deps.agent.control.list_branches(session_id)
    rows = [
        {
            "id": b.branch,
            "fork_sequence": b.fork,
            "first_sequence": b.first_id,
            "messages": b.messages,
            "first_words": b.first_words,
            "how": b.how,
            "created_at": b.started_at.isoformat(),
            "cut_at": b.cut_at.isoformat(),
        }
        for b in listed.rows
    ]
    return {"branches": rows, "branch_count": listed.total, "active_branch": listed.active}


@router.delete(
    CHAT_PATH,
    summary="Delete a chat and its messages (never chat-default)",
    params=(CHAT_ID,),
    response=Deleted,
    errors=(400, 404, 409),
)
async def delete_chat(request: web.Request) -> web.Response:
    deps = deps_of(request)
    chat_id = request.match_info["chat_id"]
    if chat_id == DEFAULT_CHAT_ID:
        raise _protected()
    row = await require_chat(deps, chat_id)
    await deps.agent.sessions.delete_sessions([row.id])
    return json_response({"deleted": True, "id": chat_id})


@router.post(
    "/chats/batch-delete",
    summary="Delete several chats; refused as a whole if chat-default is among them",
    body=BatchDeleteBody,
    response=BatchDeleted,
    errors=(409,),
)
async def batch_delete(request: web.Request, body: BatchDeleteBody) -> web.Response:
    deps = deps_of(request)
    ids = body.chat_ids
    if DEFAULT_CHAT_ID in ids:
        raise _protected()
    rows: list[SessionRow] = []
    missing: list[str] = []
    for chat_id in dict.fromkeys(ids):
        row = await find_chat(deps, chat_id)
        if row is None:
            missing.append(chat_id)
        else:
            rows.append(row)
    deleted = await deps.agent.sessions.delete_sessions([r.id for r in rows]) if rows else 0
    return json_response({"deleted": deleted, "missing": missing})


class RenameBody(BodyModel):
    name: Annotated[str, Field(max_length=TITLE_LIMIT, description="not empty")]


@router.route(
    "PATCH",
    CHAT_PATH,
    summary="Rename a chat",
    params=(CHAT_ID,),
    body=RenameBody,
    response=Chat,
    errors=(404,),
)
async def rename_chat(request: web.Request, body: RenameBody) -> web.Response:
    """400 for an empty name (or one with control characters)."""
    deps = deps_of(request)
    name = body.name.strip()
    # Control, format (RTL override, zero width) and line/paragraph separators: a title
    # shown in the console and Telegram must read as what it is.
    if not name or any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        raise invalid(t("gw.chat_name", limit=TITLE_LIMIT), field="name")
    row = await require_chat(deps, request.match_info["chat_id"])
    await deps.agent.sessions.retitle(row.id, name)
    renamed = await deps.sessions.get_session(row.id)
    if renamed is None:  # deleted meanwhile
        raise not_found("chat_id", request.match_info["chat_id"])
    return json_response(chat_json(renamed))


class ResumeBody(BodyModel):
    channel: Literal["telegram"]


class Resumed(Shape):
    resumed: bool
    chat_id: str
    channel: str


TELEGRAM_CONVERSATION = "telegram:{user}"  # the Telegram channel's name for the owner's chat


@router.post(
    "/chats/{chat_id}/resume",
    summary="Continue a chat in the owner's Telegram chat (as /resume there)",
    params=(CHAT_ID,),
    body=ResumeBody,
    response=Resumed,
    errors=(404, 409),
)
async def resume_chat(request: web.Request, body: ResumeBody) -> web.Response:
    """The owner's next Telegram message goes on in this chat. 409
    ``telegram_not_configured`` when no Telegram channel runs in this Kernel;
    ``session_busy`` while a Telegram turn runs."""
    deps = deps_of(request)
    channel = body.channel
    chat_id = request.match_info["chat_id"]
    row = await require_chat(deps, chat_id)
    owner = deps.config.telegram.allowed_user
    if channel not in deps.status_board or owner <= 0:
        raise refusal("telegram_not_configured", t("gw.telegram_not_configured"))
    await deps.agent.sessions.resume(TELEGRAM_CONVERSATION.format(user=owner), row.id)
    return json_response({"resumed": True, "chat_id": chat_id, "channel": channel})


def _protected() -> ApiError:
    return refusal("default_chat_protected", t("session.protected"), {"chat_id": DEFAULT_CHAT_ID})
