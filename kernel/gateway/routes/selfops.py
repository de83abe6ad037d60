"""``/agent/self/*``: SelfOps (seed 000 "SelfOps 契约").

- ``POST /agent/self/sessions/bootstrap``: a new chat, its first input and one turn, in
  one call (``channel`` default ``console``, ``stream`` default false), optionally with
  its own model; answers ``chat``, ``reply``, ``events`` and ``applied_model``.
- ``PUT|DELETE /agent/self/sessions/{session_id}/model``: that session's own provider and
  model (``meta.active_llm_override``), checked against enabled providers and their models
  and aliases; the global active model is untouched. ``session_id`` is a chat id
  (``chat-<n>``, ``chat-default``) or a session's ``session_id`` (narrowed by ``channel``
  and ``user_id`` when several chats share it).
- ``POST /agent/self/config-mutations/preview`` and ``…/apply``: see
  :mod:`kernel.selfops.mutations`.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aiohttp import web
from pydantic import Field

from kernel.agent.agent import MODEL_OVERRIDE, SelectionError, SessionKey, UserInput
from kernel.core.errors import SelfOpsError
from kernel.core.event_wire import event_to_dict
from kernel.core.events import Completed, ErrorEvent
from kernel.core.i18n import t
from kernel.gateway.api import (
    ApiError,
    Router,
    deps_of,
    invalid,
    json_response,
    path_param,
    query_param,
)
from kernel.gateway.apikey import caller_of
from kernel.gateway.routes.agent import (
    Event,
    Input,
    error_status,
    on_wire,
    read_input,
    stream_events,
)
from kernel.gateway.routes.chats import (
    DEFAULT_KEY,
    Chat,
    ChatKeyBody,
    chat_id_of,
    chat_json,
    find_chat,
)
from kernel.gateway.schema import (
    BodyModel,
    OpenShape,
    Shape,
    Text,
    documented,
    documented_required,
)
from kernel.selfops.mutations import TARGETS
from kernel.store.sessions import SessionRow

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router(
    "selfops", "SelfOps: session bootstrap, per-session model, two-phase config changes"
)


class ModelChoice(Shape):
    provider_id: str
    model: str


class ModelFields(BodyModel):
    provider_id: Annotated[str, Field(max_length=64)] | None = None
    model: Annotated[str, Field(max_length=256)] | None = None

    def named(self) -> tuple[str | None, str | None]:
        return (self.provider_id or None), (self.model or None)


class BootstrapBody(ChatKeyBody, ModelFields):
    model_config = documented_required("input")

    input: Input | None = None
    name: Annotated[str, Field(max_length=200)] | None = None
    stream: bool | None = None


class Bootstrapped(Shape):
    chat: Chat
    reply: str
    events: list[Event]
    applied_model: ModelChoice
    turn_id: str | None = None


def _choose(deps: GatewayDeps, provider_id: str | None, model: str | None) -> tuple[str, str]:
    """A provider and model named by a request, or 400 ``session_model_invalid``. A model
    (or alias) alone is looked for among the enabled providers, the active one first."""
    agent = deps.agent
    try:
        if provider_id:
            return agent.selection.check_model(provider_id, model)
        assert model
        for name in [agent.selection.provider_name, *agent.selection.available_providers]:
            pcfg = deps.config.enabled_providers.get(name)
            if pcfg is not None and pcfg.resolve(model):
                return agent.selection.check_model(name, model)
        return agent.selection.check_model(
            agent.selection.provider_name, model
        )  # refused, naming the models
    except SelectionError as exc:
        raise SelfOpsError(
            "session_model_invalid",
            str(exc),
            {"providers": agent.selection.available_providers},
        ) from None


@router.post(
    "/agent/self/sessions/bootstrap",
    summary="Create a chat, write its first input and run one turn, in one call",
    body=BootstrapBody,
    response=Bootstrapped,
    status=201,
    sse=True,
    errors=(409, 500, 502),
)
async def bootstrap(request: web.Request, body: BootstrapBody) -> web.StreamResponse:
    """409 ``session_exists`` when the chat is there already (use /agent/process)."""
    deps = deps_of(request)
    agent = deps.agent
    key = body.key(SessionKey("console", DEFAULT_KEY.user_id, f"s-{uuid.uuid4().hex[:12]}"))
    stream = bool(body.stream)
    name = body.name
    text, images = read_input(body.input)
    if not text.strip() and not images:
        raise invalid(t("gw.input_empty"), field="input")
    provider_id, model = body.named()
    meta: dict[str, object] = {}
    if provider_id or model:
        chosen = _choose(deps, provider_id, model)
        meta[MODEL_OVERRIDE] = {"provider_id": chosen[0], "model": chosen[1]}
    opened = await agent.sessions.open_session(key, title=name or None, meta=meta)
    assert opened is not None
    if not opened.created:
        raise SelfOpsError(
            "session_exists",
            t("selfops.session_exists", session_id=key.external_id),
            {"chat_id": chat_id_of(opened.row)},
        )
    applied = agent.selection.model_for(opened.row.meta)
    applied_json = {"provider_id": applied[0], "model": applied[1]}
    user_input = UserInput(
        text, images, channel=key.channel, user_id=key.user_id, budget_ask=False, actor="api"
    )
    turn = agent.start_turn(opened.conversation, user_input)
    chat_id = chat_id_of(opened.row)
    try:
        if stream:
            headers = {
                "X-Chat-Id": chat_id,
                "X-Applied-Model": f"{applied[0]}/{applied[1]}",
            }
            return await stream_events(request, aiter(turn), turn, headers)
        events: list[dict[str, Any]] = []
        async for event in turn:
            events.append(event_to_dict(on_wire(event)))
    except asyncio.CancelledError:
        turn.cancel()  # the client went away: the turn stops, its history stays valid
        raise
    row = await deps.sessions.get_session(opened.row.id)
    chat = chat_json(row or opened.row)
    final = on_wire(turn.final) if turn.final is not None else None
    if isinstance(final, ErrorEvent):
        if row is not None and row.message_count == 0:
            # Refused before anything was stored (an unknown skill, say): no chat is left
            # behind, so the same call can simply be made again.
            await deps.sessions.delete_sessions([row.id])
            details: dict[str, Any] = {"events": events, "turn_id": turn.id}
        else:  # the input is kept: the chat goes on through /agent/process
            details = {"events": events, "chat": chat, "turn_id": turn.id}
        raise ApiError(error_status(final.code), final.code, final.message, details)
    reply = final.reply if isinstance(final, Completed) else ""
    out = {
        "chat": chat,
        "reply": reply,
        "events": events,
        "applied_model": applied_json,
        "turn_id": turn.id,
    }
    return json_response(out, 201)


SESSION = path_param("session_id", "chat-<n>, chat-default, or a chat's session_id")
SESSION_QUERY = (
    query_param("channel", str, "narrows a session_id several chats share"),
    query_param("user_id", str, "narrows a session_id several chats share"),
)


async def _session(request: web.Request) -> SessionRow:
    deps = deps_of(request)
    ident = request.match_info["session_id"]
    row = await find_chat(deps, ident)
    if row is not None:
        return row
    rows = await deps.sessions.sessions_by_external_id(
        ident, channel=request.query.get("channel"), user_id=request.query.get("user_id")
    )
    if not rows:
        raise SelfOpsError(
            "session_not_found",
            t("selfops.session_not_found", id=ident[:128]),
            {"session_id": ident},
        )
    if len(rows) > 1:
        raise invalid(
            t("selfops.session_ambiguous", id=ident[:128], count=len(rows)),
            chats=[chat_id_of(r) for r in rows],
        )
    return rows[0]


def _override_json(row: SessionRow, deps: GatewayDeps) -> dict[str, Any]:
    agent = deps.agent
    return {
        "chat_id": chat_id_of(row),
        "session_id": row.external_id,
        "active_llm_override": row.meta.get(MODEL_OVERRIDE),
        "applied_model": dict(
            zip(("provider_id", "model"), agent.selection.model_for(row.meta), strict=True)
        ),
        "active_llm": {
            "provider_id": agent.selection.provider_name,
            "model": agent.selection.model,
        },
    }


class SessionModel(Shape):
    chat_id: str | None = None
    session_id: str | None = None
    active_llm_override: OpenShape | None = None
    applied_model: ModelChoice | None = None
    active_llm: ModelChoice | None = None


@router.put(
    "/agent/self/sessions/{session_id}/model",
    summary="Give one session its own provider/model (the global active model is untouched)",
    params=(SESSION, *SESSION_QUERY),
    body=ModelFields,
    response=SessionModel,
    errors=(404,),
)
async def set_session_model(request: web.Request, body: ModelFields) -> web.Response:
    """``provider_id`` and/or ``model`` (a model name or alias): 400
    ``session_model_invalid`` when they do not name an enabled provider's model."""
    deps = deps_of(request)
    provider_id, model = body.named()
    if not provider_id and not model:
        raise invalid(t("gw.field_required", field="provider_id"), field="provider_id")
    row = await _session(request)  # session_not_found first: the chat is what is named
    chosen = _choose(deps, provider_id, model)
    await deps.agent.selection.set_session_model(row.id, *chosen)
    fresh = await deps.sessions.get_session(row.id)
    return json_response(_override_json(fresh or row, deps))


@router.delete(
    "/agent/self/sessions/{session_id}/model",
    summary="Remove a session's own model: it follows the active model again",
    params=(SESSION, *SESSION_QUERY),
    response=SessionModel,
    errors=(404,),
)
async def clear_session_model(request: web.Request) -> web.Response:
    deps = deps_of(request)
    row = await _session(request)
    await deps.agent.selection.clear_session_model(row.id)
    fresh = await deps.sessions.get_session(row.id)
    return json_response(_override_json(fresh or row, deps))


class MutationOperation(BodyModel):
    """One change. workspace_file: ``replace`` (path, value: the new text) or
    ``text_rewrite`` (path, search, replace); provider_config: ``merge`` (value: an
    object) or ``replace`` (path: dotted, value); active_llm: ``replace`` (value:
    ``{provider_id, model?}``)."""

    kind: Literal["replace", "text_rewrite", "merge"]
    path: Annotated[str, Field(min_length=1)] | None = None
    value: Any = None
    search: Annotated[str, Field(min_length=1)] | None = None
    replace: str | None = None


class PreviewBody(BodyModel):
    model_config = documented_required("operations")

    target: Annotated[Text, Field(max_length=64), documented(Literal[(*TARGETS, "file")])]
    # Checked one by one by SelfOps (its own words), documented here.
    operations: (
        Annotated[
            list[Any],
            documented(Annotated[list[MutationOperation], Field(min_length=1, max_length=50)]),
        ]
        | None
    ) = None
    allow_sensitive: bool | None = None


class Preview(Shape):
    mutation_id: str
    target: str | None = None
    confirm_hash: str
    expires_at: str | None = None
    ttl_seconds: int | None = None
    checks: OpenShape
    diff_summary: list[OpenShape]
    unified_diff: str
    requires_sensitive_allow: bool
    allow_sensitive: bool | None = None


class ApplyBody(BodyModel):
    mutation_id: Annotated[Text, Field(max_length=64)]
    confirm_hash: Annotated[Text, Field(max_length=128)]
    allow_sensitive: bool | None = None


class Applied(Shape):
    applied: bool
    mutation_id: str | None = None
    target: str | None = None
    applied_targets: list[str] | None = None


@router.post(
    "/agent/self/config-mutations/preview",
    summary="Work out a change to SOUL.md, prompts/**, skills/**, providers or the active "
    "model without making it: diff, checks, a one-time id and confirm hash (5 minutes)",
    body=PreviewBody,
    response=Preview,
    errors=(403,),
)
async def preview(request: web.Request, body: PreviewBody) -> web.Response:
    """403 ``mutation_path_denied`` for a file outside the whitelist."""
    if body.operations is None or len(body.operations) > 50:
        raise invalid(t("selfops.no_operations"), field="operations")
    target, operations = body.target, body.operations
    allow = bool(body.allow_sensitive)
    result = await deps_of(request).selfops.preview(target, operations, allow)
    return json_response(result)


@router.post(
    "/agent/self/config-mutations/apply",
    summary="Make a previewed change: the same mutation_id, confirm_hash and allow_sensitive",
    body=ApplyBody,
    response=Applied,
    errors=(403, 404, 409, 410),
)
async def apply(request: web.Request, body: ApplyBody) -> web.Response:
    """404 ``mutation_not_found``, 410 ``mutation_expired``, 409 ``mutation_hash_mismatch``
    or ``mutation_apply_conflict`` (the target changed since the preview), 403
    ``mutation_sensitive_denied``; 403 ``privilege_required`` for a keyed provider's new
    ``api_base`` whose keys the change does not give (``checks.privileged_fields`` of the
    preview), unless the owner confirms it in Telegram."""
    mutation_id, confirm_hash = body.mutation_id, body.confirm_hash
    allow = bool(body.allow_sensitive)
    caller = caller_of(request)
    result = await deps_of(request).selfops.apply(mutation_id, confirm_hash, allow, caller=caller)
    return json_response(result)
