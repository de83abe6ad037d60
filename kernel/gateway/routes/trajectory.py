"""``/agent/trajectory/*``: the audit trail (issue 23, seed 001's trajectory) read and
proven over the API.

- ``GET /agent/trajectory/events?session_id=…`` (or seed 001's ``sessionId``): a
  session's events, ascending, each with its words (``text``); ``limit`` (≤ 1000,
  default 100) newest, ``before`` (a global ``id``) to page back: the answer's
  ``next_before`` is the value for the page before it. ``scope=global`` instead of a
  session: every chain's events (the global chain). Neither → 400 naming the parameter.
- ``GET /agent/trajectory/verify/{session_id}``: that session's chain verified;
  ``GET /agent/trajectory/verify``: the global chain. 200 either way: a broken chain is
  an answer (``{ok: false, firstBrokenSeq, reason, detail}``), not an error.

A session is named as elsewhere in the API: ``chat-<n>``, ``chat-default``, the ``n`` of
``chat-<n>`` (as ``/usage?session_id=``), or a chat's ``session_id`` (narrowed by
``channel`` and ``user_id`` when several chats share it). A deleted session's chain
stays verifiable by its number: its rows are emptied, not removed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

from kernel.audit.verify import Verdict
from kernel.audit.words import describe, verdict_words
from kernel.core.i18n import t
from kernel.gateway.api import (
    Router,
    bounded,
    deps_of,
    invalid,
    json_response,
    path_param,
    query_int,
    query_param,
    refusal,
)
from kernel.gateway.routes.chats import chat_id_of, find_chat
from kernel.gateway.schema import OpenShape, Shape
from kernel.store.audit import MAX_LIMIT

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("trajectory", "The audit trail: each session's events and their proof")

DEFAULT_LIMIT = 100
MAX_ID = 2**62
MAX_IDENT = 256
_CHAT_NUMBER = re.compile(r"^chat-(\d{1,18})$")
# kernel/audit/verify.py REASONS (a test checks they are the same)
Reason = Literal[
    "missing",
    "edited",
    "link",
    "pruned_unrecorded",
    "message_edited",
    "message_missing",
    "head",
    "anchor",
    "elsewhere",
    "anchor_missing",
    "anchor_unsealed",
    "short",
    "reset",
    "key_missing",
    "key_replaced",
]


class AuditEventInfo(Shape):
    """One event. ``seq``: its number in its session (null for an event of no session);
    ``id``: the global sequence; ``data``: its facts (null once its history was deleted,
    ``pruned`` true); ``hash``: its link in its session's chain (the global chain's for
    an event of no session); ``text``: the event in words, in the owner's time zone."""

    seq: int | None = None
    id: int
    session_id: int | None = None
    at: str
    kind: str
    actor: str
    data: OpenShape | None = None
    pruned: bool
    hash: str | None = None
    text: str


class TrajectoryAnswer(Shape):
    scope: Literal["session", "global"]
    session_id: int | None = None
    chat_id: str | None = None
    items: list[AuditEventInfo]
    next_before: int | None = None


class VerdictAnswer(Shape):
    """``ok``; ``checked``: rows verified; ``pruned``: rows emptied with their deleted
    history. When broken: ``firstBrokenSeq`` (also ``first_broken_seq``; the session
    sequence, or the global ``id`` for the global chain), ``reason`` and ``detail``."""

    ok: bool
    checked: int
    pruned: int
    firstBrokenSeq: int | None = None  # noqa: N815 (seed 001's name)
    first_broken_seq: int | None = None
    reason: Reason | None = None
    detail: str | None = None
    scope: Literal["session", "global"]
    session_id: int | None = None
    text: str


SESSION_QUERY = (
    query_param("channel", str, "narrows a session_id several chats share"),
    query_param("user_id", str, "narrows a session_id several chats share"),
)


async def resolve_session(
    deps: GatewayDeps, ident: str, channel: str | None, user_id: str | None
) -> tuple[int, str | None]:
    """(session number, chat id or None once deleted) of ``ident``; 404 when no chat
    and no audit chain has that name, 400 when several chats share it."""
    ident = ident.strip()
    if len(ident) > MAX_IDENT:
        raise invalid(
            t("gw.field_too_long", field="session_id", limit=MAX_IDENT), field="session_id"
        )
    row = await find_chat(deps, ident)
    if row is not None:
        return row.id, chat_id_of(row)
    match = _CHAT_NUMBER.match(ident)
    number = int(match.group(1)) if match else None
    if number is None and ident.isascii() and ident.isdigit() and len(ident) <= 18:
        number = int(ident)
        row = await deps.sessions.get_session(number)
        if row is not None:
            return row.id, chat_id_of(row)
    if number is not None and await deps.audit.rows.has_chain(number):
        return number, None  # deleted: its chain is still there to verify
    if match is None:
        rows = await deps.sessions.sessions_by_external_id(ident, channel=channel, user_id=user_id)
        if len(rows) == 1:
            return rows[0].id, chat_id_of(rows[0])
        if len(rows) > 1:
            raise invalid(
                t("selfops.session_ambiguous", id=ident[:128], count=len(rows)),
                chats=[chat_id_of(r) for r in rows],
            )
    raise refusal(
        "not_found", t("selfops.session_not_found", id=ident[:128]), {"session_id": ident[:128]}
    )


@router.get(
    "/agent/trajectory/events",
    summary="A session's audit events (or the global chain's), oldest first, in words",
    params=(
        query_param("session_id", str, "chat-<n>, chat-default, n, or a chat's session_id"),
        query_param("sessionId", str, "the same as session_id (seed 001)"),
        query_param("scope", Literal["session", "global"], "global: every chain's events"),
        *SESSION_QUERY,
        query_param("limit", bounded(1, MAX_LIMIT), f"the newest this many ({DEFAULT_LIMIT})"),
        query_param("before", bounded(1, MAX_ID), "only events with a smaller id (paging)"),
    ),
    response=TrajectoryAnswer,
    errors=(400, 404),
)
async def events(request: web.Request) -> web.Response:
    deps = deps_of(request)
    query = request.query
    scope = query.get("scope", "session")
    if scope not in ("session", "global"):
        raise invalid(
            t("gw.bad_query_choice", name="scope", allowed="session, global"),
            field="scope",
            allowed=["session", "global"],
        )
    ident = query.get("session_id", query.get("sessionId"))
    limit = query_int(request, "limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
    before = None
    if "before" in query:
        before = query_int(request, "before", MAX_ID, minimum=1, maximum=MAX_ID)
    session: int | None = None
    chat: str | None = None
    if scope == "global":
        if ident is not None:
            raise invalid(t("gw.trajectory_scope_or_session"), field="scope")
    elif ident is None:
        raise invalid(t("gw.trajectory_need_session"), field="session_id")
    else:
        session, chat = await resolve_session(
            deps, ident, query.get("channel"), query.get("user_id")
        )
    rows = await deps.audit.events(session, limit=limit, before=before)
    tz = deps.agent.tz
    items = [row.as_json() | {"text": describe(row, tz)} for row in rows]
    answer: dict[str, Any] = {
        "scope": scope,
        "session_id": session,
        "chat_id": chat,
        "items": items,
        "next_before": rows[0].id if len(rows) == limit and rows[0].id > 1 else None,
    }
    return json_response(answer)


def _verdict(verdict: Verdict, session: int | None) -> dict[str, Any]:
    return verdict.as_json() | {
        "scope": "global" if session is None else "session",
        "session_id": session,
        "text": verdict_words(verdict),
    }


@router.get(
    "/agent/trajectory/verify/{session_id}",
    summary="Verify a session's audit chain: whole, or the first broken row and why",
    params=(
        path_param("session_id", "chat-<n>, chat-default, n, or a chat's session_id"),
        *SESSION_QUERY,
    ),
    response=VerdictAnswer,
    errors=(400, 404),
)
async def verify_session(request: web.Request) -> web.Response:
    deps = deps_of(request)
    session, _ = await resolve_session(
        deps,
        request.match_info["session_id"],
        request.query.get("channel"),
        request.query.get("user_id"),
    )
    return json_response(_verdict(await deps.audit.verify(session), session))


@router.get(
    "/agent/trajectory/verify",
    summary="Verify the global audit chain (every event of every session and none)",
    response=VerdictAnswer,
)
async def verify_global(request: web.Request) -> web.Response:
    deps = deps_of(request)
    return json_response(_verdict(await deps.audit.verify(None), None))
