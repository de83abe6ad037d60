"""Prompt modes over HTTP (seed 000): ``biz_params.prompt_mode`` and the collaboration
parameters of ``/agent/process`` (read here, persisted in the chat's meta), and
``GET /agent/system-layers``.

A prompt mode is ``default``, ``codex`` or ``claude``; a request's value is written
to the chat's ``meta.prompt_mode`` and a request without one takes the chat's. The
collaboration mode (``biz_params.collaboration_mode``, ``collaboration_event`` or
``collaboration.{mode|event}``; an event wins) exists only under ``codex``: anywhere
else it is ``400 invalid_request``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aiohttp import web

from kernel.agent.agent import SessionKey
from kernel.agent.prompt_modes import (
    COLLABORATION_EVENTS,
    COLLABORATION_MODES,
    MODE_KEY,
    PROMPT_MODES,
    TASK_COMMANDS,
    ModeChoice,
    collaboration_change,
)
from kernel.core.errors import PromptError
from kernel.core.i18n import t
from kernel.gateway.api import (
    ApiError,
    Router,
    coded,
    deps_of,
    invalid,
    json_response,
    not_found,
    query_param,
)
from kernel.gateway.routes.chats import DEFAULT_KEY, key_part
from kernel.gateway.schema import BodyModel, Shape, documented

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

router = Router("prompt modes", "System layers and prompt modes")

PREVIEW_CHARS = 240
Mode = Literal["default", "codex", "claude"]
Collaboration = Literal["default", "plan", "execute", "pair_programming"]
Event = Literal["set_default", "set_plan", "set_execute", "set_pair_programming"]
Task = Literal["review", "compact", "memory"]


class CollaborationParams(BodyModel):
    mode: Annotated[Any, documented(Collaboration)] = None
    event: Annotated[Any, documented(Event)] = None


class ModeParams(BodyModel):
    """The prompt-mode fields of ``biz_params`` (typed by hand: a wrong value gets the
    seed's own words, ``invalid prompt_mode`` and the like)."""

    prompt_mode: Annotated[Any, documented(Mode)] = None
    collaboration_mode: Annotated[Any, documented(Collaboration)] = None
    collaboration_event: Annotated[Any, documented(Event)] = None
    collaboration: CollaborationParams | None = None


def _pick(value: Any, allowed: tuple[str, ...], message: str, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in allowed:
        raise invalid(t(message), field=field, allowed=list(allowed))
    return value


def requested_mode(params: ModeParams | None) -> str | None:
    """``biz_params.prompt_mode`` checked (400 ``invalid prompt_mode``), or None."""
    if params is None:
        return None
    return _pick(params.prompt_mode, PROMPT_MODES, "gw.prompt_mode", "biz_params.prompt_mode")


def meta_changes(params: ModeParams | None, meta: dict[str, Any]) -> dict[str, Any]:
    """What the request changes in the chat's meta: its prompt mode, and under codex
    its collaboration mode (an event wins over a mode; 400 outside codex)."""
    if params is None:
        return {}
    mode = requested_mode(params)
    changes: dict[str, Any] = {MODE_KEY: mode} if mode is not None else {}
    nested = params.collaboration or CollaborationParams()
    given = [
        ("biz_params.collaboration_event", params.collaboration_event, True),
        ("biz_params.collaboration.event", nested.event, True),
        ("biz_params.collaboration_mode", params.collaboration_mode, False),
        ("biz_params.collaboration.mode", nested.mode, False),
    ]
    given = [g for g in given if g[1] is not None]
    if not given:
        return changes
    if (mode or ModeChoice.of_meta(meta).mode) != "codex":
        raise invalid(t("gw.collaboration_codex_only"), field=given[0][0])
    targets: list[tuple[str, str]] = []
    for field, value, is_event in given:
        if is_event:
            event = _pick(value, tuple(COLLABORATION_EVENTS), "gw.collaboration_event", field)
            targets.append((field, COLLABORATION_EVENTS[str(event)]))
        else:
            targets.append(
                (field, str(_pick(value, COLLABORATION_MODES, "gw.collaboration_mode", field)))
            )
    source, target = targets[0]  # the first event, else the first mode
    return {**changes, **collaboration_change(target, source)}


async def check_mode(deps: GatewayDeps, changes: dict[str, Any]) -> None:
    """A request switching to codex or claude: their required files are there, or the
    request is refused (500 ``*_prompt_unavailable``) before the mode is kept."""
    mode = changes.get(MODE_KEY)
    if mode in (None, "default"):
        return
    choice = ModeChoice(str(mode))
    try:
        await asyncio.to_thread(
            deps.agent.prompt.modes.layers, choice, "", deps.agent.selection.model
        )
    except PromptError as exc:
        raise coded(exc) from None


async def _session_meta(deps: GatewayDeps, request: web.Request) -> dict[str, Any]:
    """The meta of the chat named by ``session_id`` (with ``channel`` and ``user_id``,
    as /agent/process names it); {} when no session_id is given."""
    query = request.query
    if "session_id" not in query:
        return {}
    key = SessionKey(
        key_part(query.get("channel"), "channel", DEFAULT_KEY.channel),
        key_part(query.get("user_id"), "user_id", DEFAULT_KEY.user_id),
        key_part(query.get("session_id"), "session_id", DEFAULT_KEY.external_id),
    )
    opened = await deps.agent.sessions.open_session(key, create=False)
    if opened is None:
        raise not_found("session_id", key.external_id)
    return dict(opened.row.meta)


class LayerInfo(Shape):
    name: str | None = None
    role: str | None = None
    source: str | None = None
    content_preview: str | None = None
    layer_hash: str | None = None
    estimated_tokens: int | None = None


class SystemLayers(Shape):
    version: str | None = None
    prompt_mode: str | None = None
    mode_variant: str | None = None
    collaboration_mode: str | None = None
    layers: list[LayerInfo]
    estimated_tokens_total: int


@router.get(
    "/agent/system-layers",
    summary="The system prompt layers a turn would get now, with hashes and token estimates",
    params=(
        query_param("prompt_mode", Mode, "default: the chat's (session_id), else default"),
        query_param("task_command", Task, "used under codex: a task's template in the estimate"),
        query_param("collaboration_mode", Collaboration, "used under codex only"),
        query_param(
            "collaboration_event", Event, "used under codex only; wins over collaboration_mode"
        ),
        query_param("session_id", str, "a chat (with channel and user_id, as /agent/process)"),
        query_param("channel", str),
        query_param("user_id", str),
        query_param("query", str, "text whose memories are recalled"),
    ),
    response=SystemLayers,
    errors=(400, 404, 500),
)
async def system_layers(request: web.Request) -> web.Response:
    """404 ``not_found`` while ``[features] prompt_context_introspect`` is off; 500
    ``codex_prompt_unavailable`` / ``claude_prompt_unavailable`` when the mode's
    required files are missing or empty."""
    deps = deps_of(request)
    if not deps.config.features.prompt_context_introspect:
        raise ApiError(404, "not_found", t("gw.introspect_off"))
    query = request.query
    mode = _pick(query.get("prompt_mode"), PROMPT_MODES, "gw.prompt_mode", "prompt_mode")
    meta = await _session_meta(deps, request)
    choice = ModeChoice.of_meta(meta)
    choice = ModeChoice(mode or choice.mode, choice.collaboration)
    # Checked whatever the mode (as the published schema types them); used under codex.
    task = _pick(query.get("task_command"), TASK_COMMANDS, "gw.task_command", "task_command")
    collaboration = _pick(
        query.get("collaboration_mode"),
        COLLABORATION_MODES,
        "gw.collaboration_mode",
        "collaboration_mode",
    )
    event = _pick(
        query.get("collaboration_event"),
        tuple(COLLABORATION_EVENTS),
        "gw.collaboration_event",
        "collaboration_event",
    )
    if event is not None:
        collaboration = COLLABORATION_EVENTS[event]
    if choice.mode == "codex":
        choice = ModeChoice("codex", collaboration or choice.collaboration, task)
    try:
        agent = deps.agent
        layers = await agent.prompt.layers(
            query.get("query", ""), mode=choice, model=agent.selection.model
        )
    except PromptError as exc:
        raise coded(exc) from None
    out = [
        {
            "name": layer.name,
            # volatile layers (memories, time) ride in the turn's own user message
            "role": "user" if layer.volatile else "system",
            "source": layer.source,
            "content_preview": layer.text[:PREVIEW_CHARS],
            "layer_hash": layer.normalized_hash,
            "estimated_tokens": layer.token_estimate,
        }
        for layer in layers
    ]
    body = {
        "version": "v1",
        "prompt_mode": choice.mode,
        "mode_variant": choice.variant(deps.config.features),
        "collaboration_mode": choice.collaboration if choice.mode == "codex" else None,
        "layers": out,
        "estimated_tokens_total": sum(layer.token_estimate for layer in layers),
    }
    return json_response(body)
