"""``/agent/process`` (seed 000's protocol, JSON or SSE) and turn cancel.

A request names its chat by ``channel`` (default ``console``), ``user_id`` and
``session_id`` (default: the protected default chat). Requests for the same chat run
one at a time: a request arriving while the chat's turn runs waits for it (up to
``gateway.queue_timeout``, then 409 ``session_busy``); different chats run in parallel.
A client that disconnects cancels its turn; the history stays valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aiohttp import web
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    model_validator,
)

from kernel.agent.agent import OpenedSession, SessionKey, UserInput
from kernel.agent.slimming import summarize_tool_result
from kernel.config.channels import QQTargetType
from kernel.core.asks import AnswerResult
from kernel.core.delivery import Target
from kernel.core.errors import UNANSWERED_CODES, ChannelError, http_status
from kernel.core.event_wire import Ask, Event, TurnPlan, event_to_dict
from kernel.core.events import (
    Completed,
    ErrorEvent,
    PlanUpdated,
    ToolCall,
    ToolResult,
    TurnEvent,
)
from kernel.core.i18n import t
from kernel.core.messages import ImageBlock
from kernel.core.turns import Turn
from kernel.gateway.api import (
    IMAGE_MEDIA_TYPES,
    ApiError,
    Router,
    deps_of,
    invalid,
    is_base64,
    json_response,
    not_found,
    path_param,
    refusal,
    sse_frame,
)
from kernel.gateway.explicit import ExplicitTools, mode_refusal, run_explicit
from kernel.gateway.routes.chats import DEFAULT_KEY, ChatKeyBody, chat_id_of
from kernel.gateway.routes.modes import ModeParams, check_mode, meta_changes, requested_mode
from kernel.gateway.schema import (
    BodyModel,
    Shape,
    Text,
    documented,
    documented_required,
    refuse,
)

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

log = logging.getLogger(__name__)

router = Router("agent", "Turns: /agent/process, cancel")

NEW_COMMAND = "/new"


class ImageSource(BaseModel):
    """A nested image source (the Messages API's shape); read as the part's own fields."""

    type: str | None = Field(default=None, description="base64 (not checked)")
    media_type: Literal[IMAGE_MEDIA_TYPES]  # type: ignore[valid-type]
    data: str = Field(description="base64", min_length=1)


class InputPart(BaseModel):
    """A text part, or an image part with ``media_type`` and ``data`` given directly or in
    a nested ``source``. Read as given (not strictly typed field by field): a part that
    is neither is refused as a whole (``gw.bad_part``), an image by its own words."""

    type: Literal["text", "image"]
    text: str | None = None
    media_type: Literal[IMAGE_MEDIA_TYPES] | None = None  # type: ignore[valid-type]
    data: str | None = Field(default=None, description="base64")
    source: ImageSource | None = None

    @model_validator(mode="before")
    @classmethod
    def _read(cls, part: Any) -> Any:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            return {"type": "text", "text": part["text"]}
        if kind != "image" or not isinstance(part, dict):
            raise refuse("gw.bad_part")
        source = part["source"] if isinstance(part.get("source"), dict) else part
        media_type, data = source.get("media_type"), source.get("data")
        if media_type not in IMAGE_MEDIA_TYPES:
            raise refuse("gw.bad_image_type", types=", ".join(IMAGE_MEDIA_TYPES))
        if not is_base64(data):
            raise refuse("gw.bad_image_data")
        return {"type": "image", "media_type": media_type, "data": data}


def _content_of(content: Any) -> Any:
    """A string is one text part; anything else but an array is refused as "array"."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise refuse("gw.bad_field", expected="array")
    return content


def _user(role: Any) -> Any:
    if role != "user":
        raise refuse("gw.input_role")
    return role


class InputMessage(BaseModel):
    """seed 000's input message (``role`` user when absent; ``type`` is not read)."""

    model_config = documented_required("content")  # absent: "must be array"

    role: Annotated[
        Literal["user"], BeforeValidator(_user, json_schema_input_type=Literal["user"])
    ] = "user"
    type: Any = Field(default=None, description="message (not checked)")
    content: Annotated[
        list[InputPart],
        BeforeValidator(_content_of, json_schema_input_type=str | list[InputPart]),
    ] = Field(default=None, validate_default=True)


def _not_empty(items: list[InputMessage]) -> list[InputMessage]:
    if not items:
        raise refuse("gw.input_missing")
    return items


Input = Annotated[
    list[InputMessage], AfterValidator(_not_empty), Field(json_schema_extra={"minItems": 1})
]
"""``input``: seed 000's messages, at least one (``[]`` is "input is missing")."""


class QQTarget(BodyModel):
    """qq: where the reply goes (default channels.qq.target_*)."""

    target_type: Annotated[str, Field(max_length=16), documented(QQTargetType)] | None = None
    target_id: Annotated[str, Field(max_length=128)] | None = None
    msg_id: Annotated[str, Field(max_length=128)] | None = None


class DirectTool(BodyModel):
    name: Annotated[Text, Field(max_length=64)]
    input: dict[str, Any] | None = None


class BizParams(ModeParams):
    channel: QQTarget | None = None
    tool: DirectTool | None = None


class ProcessBody(ChatKeyBody, ExplicitTools):
    # input last: a body wrong in several fields is refused for the others first.
    stream: bool | None = None
    biz_params: BizParams | None = None
    input: Input | None = Field(
        default=None, description="required unless biz_params.tool or a top-level tool array"
    )


class ProcessResult(Shape):
    reply: str
    events: list[Event]
    plan: TurnPlan | None = Field(
        default=None, description="the plan as the turn left it (null: the turn wrote none)"
    )
    turn_id: str | None = None
    chat_id: str | None = None
    session_id: str | None = None


def read_input(items: list[InputMessage] | None) -> tuple[str, list[ImageBlock]]:
    """Text and images of the validated ``input`` messages, in order."""
    if not items:
        raise invalid(t("gw.input_missing"), field="input")
    texts: list[str] = []
    images: list[ImageBlock] = []
    for item in items:
        for part in item.content:
            if part.type == "text" and part.text is not None:
                texts.append(part.text)
            elif part.media_type is not None and part.data is not None:
                images.append(ImageBlock(part.media_type, part.data))
    return "\n\n".join(texts), images


@router.post(
    "/agent/process",
    summary="Run one turn: JSON {reply, events} or, with stream=true, SSE ending data: [DONE]",
    body=ProcessBody,
    response=ProcessResult,
    sse=True,
    errors=(403, 404, 409, 422, 500, 502),
)
async def process(request: web.Request, body: ProcessBody) -> web.StreamResponse:
    deps = deps_of(request)
    key = body.key(DEFAULT_KEY)
    stream = bool(body.stream)
    biz = body.biz_params
    requested_mode(biz)  # a wrong value is refused before anything else
    deliver = _delivery(deps, key, biz)
    tool = biz.tool if biz else None
    explicit = body.explicit()  # seed 000's top-level view/edit/find/search/browser/shell
    if explicit is not None:
        if tool is not None:
            raise invalid(t("gw.tool_one_kind", names=f"biz_params.tool, {explicit[0]}"))
        if deps.tools.is_disabled(explicit[0]):
            name = explicit[0]
            raise refusal("tool_disabled", t("gw.tool_disabled", name=name), {"tool": name})
        text, images = "", list[ImageBlock]()
    elif tool is not None:
        name = tool.name
        arguments = tool.input
        if deps.tools.is_disabled(name):
            raise refusal("tool_disabled", t("gw.tool_disabled", name=name), {"tool": name})
        if name not in deps.tools:
            available = deps.tools.names()
            raise refusal(
                "tool_not_supported",
                t("gw.tool_unknown", name=name, available=", ".join(available) or "-"),
                {"tool": name, "available": available},
            )
        text, images = "", list[ImageBlock]()
    else:
        text, images = read_input(body.input)
        if not text.strip() and not images:
            raise invalid(t("gw.input_empty"), field="input")
    opened = await deps.agent.sessions.open_session(key)
    assert opened is not None
    direct = explicit[0] if explicit is not None else tool.name if tool is not None else None
    if direct is not None:  # the chat's plan or read_only mode: 403 tool_forbidden_in_mode
        await mode_refusal(deps, opened.row.id, direct, arguments if tool else None)
    # The prompt and collaboration modes: checked now (a mode whose files are missing is
    # refused before anything is kept), written once the chat's running turn is done.
    changes = meta_changes(biz, opened.row.meta)
    await check_mode(deps, changes)
    turn: Turn | None = None
    events: AsyncIterator[TurnEvent]
    # Queued behind the chat's turn like any request for this chat.
    await deps.agent.sessions.wait_idle(opened.conversation, deps.config.gateway.queue_timeout)
    if changes:
        await deps.sessions.merge_meta(opened.row.id, changes)
    if explicit is not None:
        events = run_explicit(deps, opened, *explicit)
    elif tool is not None:
        events = _direct_tool(deps, opened, name, arguments or {})
    elif text.strip() == NEW_COMMAND and not images:
        await deps.agent.sessions.clear_history(opened.conversation)
        events = _single(Completed(0, t("session.cleared")))
    else:
        user_input = UserInput(
            text, images, channel=key.channel, user_id=key.user_id, budget_ask=False, actor="api"
        )
        turn = deps.agent.start_turn(opened.conversation, user_input)
        events = aiter(turn)
    ids = {"chat_id": chat_id_of(opened.row), "session_id": key.external_id}
    if turn is None:
        deliver = None  # /new and direct tool calls answer here only
    try:
        if stream:
            return await stream_events(request, events, turn, deliver=deliver)
        return await _collect(events, turn, ids, deliver)
    except asyncio.CancelledError:
        # The client went away (or shutdown gave up on it): stop the turn; it still
        # writes a valid history.
        if turn is not None:
            turn.cancel()
        raise


Deliver = Callable[[str], Awaitable[None]]


def _delivery(deps: GatewayDeps, key: SessionKey, biz: BizParams | None) -> Deliver | None:
    """For a channel other than console, the final reply is also delivered through it
    (seed 000: the channel plugin's SendText); the channel must be usable before the
    turn starts. ``biz_params.channel`` names a QQ target."""
    if key.channel == "console":
        return None
    registry = deps.channel_registry
    registry.require(key.channel)
    target = Target(user_id=key.user_id, session_id=key.external_id, origin=key.channel)
    where = biz.channel if biz else None
    if where is not None and key.channel == "qq":
        target = Target(
            user_id=where.target_id or "",
            session_id=key.external_id,
            kind=where.target_type or "",
            reply_to=where.msg_id or "",
            origin="qq",
        )

    async def deliver(reply: str) -> None:
        timeout = deps.config.cron.delivery_timeout
        await registry.send(key.channel, target, reply, timeout=timeout)

    return deliver


async def _single(event: TurnEvent) -> AsyncIterator[TurnEvent]:
    yield event


async def _direct_tool(
    deps: GatewayDeps, opened: OpenedSession, name: str, arguments: dict[str, Any]
) -> AsyncIterator[TurnEvent]:
    """``biz_params.tool``: run one registered tool as the model would, no model call."""
    call_id = f"direct_{uuid.uuid4().hex[:12]}"
    yield ToolCall(1, call_id, name, arguments)
    context = await deps.agent.scopes.tool_context(opened.row.id, opened.conversation)
    plans: list[list[dict[str, str]]] = []  # todo_write's plan, shown as a turn's is
    context.plan = plans.append
    outcome = await deps.tools.call(name, arguments, context)
    for items in plans:
        yield PlanUpdated(1, items)
    yield ToolResult(1, call_id, outcome.name, outcome.ok, summarize_tool_result(outcome.content))
    yield Completed(1, outcome.content)


def error_status(code: str) -> int:
    """A turn's error code as an HTTP status: a provider's own codes are 502."""
    return http_status(code, 502)


def on_wire(event: TurnEvent) -> TurnEvent:
    """An event as the sidecar answers it: a model request that got no answer of the
    provider's own is seed 000's ``provider_request_failed`` (the adapter's code kept
    as ``cause``)."""
    if isinstance(event, ErrorEvent) and event.code in UNANSWERED_CODES:
        meta = {**event.meta, "cause": event.code}
        return ErrorEvent(event.step, "provider_request_failed", event.message, meta)
    return event


async def _collect(
    events: AsyncIterator[TurnEvent],
    turn: Turn | None,
    ids: dict[str, str],
    deliver: Deliver | None = None,
) -> web.Response:
    collected: list[dict[str, Any]] = []
    final: TurnEvent | None = None
    plan: dict[str, Any] | None = None
    async for event in events:
        event = on_wire(event)
        shaped = event_to_dict(event)
        collected.append(shaped)
        if isinstance(event, PlanUpdated):
            plan = shaped["plan"]
        final = event
    extra = {"turn_id": turn.id} if turn else {}
    if isinstance(final, ErrorEvent):
        # A budget refusal's own details (scope, spent, limit, worst_case, currency) too.
        details = {**final.meta, "events": collected, "plan": plan, **extra, **ids}
        # A program gets a model failure's raw detail (the owner's words are in events).
        detail = final.meta.get("detail")
        message = t("provider.error", detail=detail) if detail else final.message
        raise ApiError(error_status(final.code), final.code, message, details)
    reply = final.reply if isinstance(final, Completed) else ""
    if deliver is not None and isinstance(final, Completed) and not final.cancelled and reply:
        try:
            await deliver(reply)
        except ChannelError as exc:
            failed: dict[str, Any] = {**exc.details, "reply": reply, **extra, **ids}
            raise ApiError(502, exc.code, str(exc), failed) from None
    return json_response({"reply": reply, "events": collected, "plan": plan, **extra, **ids})


async def stream_events(
    request: web.Request,
    events: AsyncIterator[TurnEvent],
    turn: Turn | None,
    extra: dict[str, str] | None = None,
    deliver: Deliver | None = None,
) -> web.StreamResponse:
    """Each event is written (and so sent) as it happens; the end is ``data: [DONE]``."""
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(extra or {})}
    if turn is not None:
        headers["X-Turn-Id"] = turn.id
    response = web.StreamResponse(headers=headers)
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)
    final: TurnEvent | None = None
    try:
        async for event in events:
            await response.write(sse_frame(event_to_dict(on_wire(event))))
            final = event
        if deliver is not None and isinstance(final, Completed) and not final.cancelled:
            try:
                if final.reply:
                    await deliver(final.reply)
            except ChannelError as exc:
                error = ErrorEvent(final.step, exc.code, str(exc))
                await response.write(sse_frame(event_to_dict(error)))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except ConnectionError:  # gone between two events
        if turn is not None:
            turn.cancel()
    except Exception as exc:  # the stream has begun: end it with an error event, not a cut
        log.exception("stream failed after it began")
        if turn is not None:
            turn.cancel()
        step = final.step if final is not None else 0
        error = ErrorEvent(step, "internal_error", t("gw.internal", kind=type(exc).__name__))
        with contextlib.suppress(ConnectionError):
            await response.write(sse_frame(event_to_dict(error)))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
    return response


class Cancelled(Shape):
    cancelled: bool
    turn_id: str | None = None


@router.post(
    "/agent/turns/{turn_id}/cancel",
    summary="Cancel a running turn (its history stays valid)",
    params=(path_param("turn_id"),),
    response=Cancelled,
    errors=(404,),
)
async def cancel_turn(request: web.Request) -> web.Response:
    """``cancelled`` is false for a turn that already ended."""
    turn_id = request.match_info["turn_id"]
    turn = deps_of(request).agent.sessions.find_turn(turn_id)
    if turn is None:
        raise not_found("turn_id", turn_id)
    return json_response({"cancelled": turn.cancel(), "turn_id": turn_id})


class AskList(Shape):
    asks: list[Ask]


@router.get(
    "/agent/asks",
    summary="Questions running turns wait on (ask_user, tool approvals), oldest first",
    response=AskList,
)
async def list_asks(request: web.Request) -> web.Response:
    waiting = deps_of(request).agent.asks.shared()
    asks = [
        {
            "id": q.id,
            "tool_call_id": q.tool_call_id,
            "kind": q.kind,
            "question": q.text,
            "options": list(q.options),
            "format": "markdown" if q.markdown else "text",
            **({"details": q.details} if q.details else {}),
            "conversation": q.conversation,
        }
        for q in waiting
    ]
    return json_response({"asks": asks})


class AnswerBody(BodyModel):
    choice: Annotated[int, Field(ge=0)]


class Answered(Shape):
    resolved: bool
    option: str | None = None


@router.post(
    "/agent/asks/{ask_id}/answer",
    summary="Answer a waiting question with the index of one of its options",
    params=(path_param("ask_id"),),
    body=AnswerBody,
    response=Answered,
    errors=(400, 404),
)
async def answer_ask(request: web.Request, body: AnswerBody) -> web.Response:
    """404 when nothing waits on that id any more (answered, timed out, cancelled)."""
    ask_id = request.match_info["ask_id"]
    choice = body.choice
    asks = deps_of(request).agent.asks
    question = asks.get(ask_id)
    if question is None or question.owner_only:  # answered in Telegram only
        raise not_found("ask_id", ask_id)
    result = asks.answer(ask_id, choice)
    if result is AnswerResult.UNKNOWN:
        raise not_found("ask_id", ask_id)
    if result is AnswerResult.BAD_OPTION:
        count = len(question.options)
        raise invalid(t("gw.bad_choice", count=count, last=count - 1), field="choice")
    return json_response({"resolved": True, "option": question.options[choice]})
