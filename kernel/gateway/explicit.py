"""seed 000's explicit tool calls on ``/agent/process``: the top-level ``view`` / ``edit``
/ ``find`` / ``search`` / ``browser`` / ``shell`` arrays (a single object is one item),
run without a model call and answered as a turn's events are.

Each name maps onto Kernel's own tools: ``view``, ``edit`` and ``find`` onto the owner's
workspace (:class:`kernel.workspace.Workspace`: its path checks and its lock, as the
``/workspace`` routes use them; :mod:`kernel.gateway.workspace_tools`); ``search`` onto
``web_search``; ``browser`` onto the browser's tools (:func:`kernel.browser.tool_call`, when
``[browser]`` is on); ``shell`` onto a command run only after the owner approved it
(:mod:`kernel.gateway.shell`). One tool name per request; the items run in order, and
the first that cannot run ends the answer with seed 000's error (``tool_invoke_failed``,
a workspace path's own refusal, ``tool_not_supported`` for a browser that is off).

Public API: :class:`ExplicitTools` (the body's fields), :data:`NAMES`,
:func:`run_explicit`, :func:`mode_refusal` (the plan/permission modes' seam).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
)

from kernel.agent.slimming import summarize_tool_result
from kernel.core.errors import CodedError, ToolError, WorkspaceError
from kernel.core.events import Completed, ErrorEvent, ToolCall, ToolResult, TurnEvent
from kernel.core.i18n import t
from kernel.core.session_modes import REFUSED_CODE, restricted
from kernel.gateway.schema import BodyModel, Text, refuse
from kernel.gateway.shell import run_approved
from kernel.gateway.tool_failure import ToolFailed
from kernel.gateway.workspace_tools import edit, find, view
from kernel.tools.registry import refused_in_mode

if TYPE_CHECKING:
    from kernel.agent.agent import OpenedSession
    from kernel.gateway.deps import GatewayDeps
    from kernel.tools.registry import ToolContext, ToolOutcome

MAX_ITEMS = 20
MAX_LINES = 2000  # lines one view or edit item may span
SEARCH_TOOL = "web_search"


def _items(value: Any) -> Any:
    """A single object is one item (seed 000: the value is an array of objects)."""
    return [value] if isinstance(value, dict) else value


def _bounded(items: list[Any]) -> list[Any]:
    if not items:
        raise refuse("gw.tool_items_empty")
    if len(items) > MAX_ITEMS:
        raise refuse("gw.tool_items_many", limit=MAX_ITEMS)
    return items


def items_of(model: type[BaseModel]) -> Any:
    """``list[model]``, a single object taken as one item, 1 to :data:`MAX_ITEMS`."""
    return Annotated[
        list[model],  # type: ignore[valid-type]
        BeforeValidator(_items, json_schema_input_type=model | list[model]),  # type: ignore[valid-type]
        AfterValidator(_bounded),
        Field(json_schema_extra={"minItems": 1, "maxItems": MAX_ITEMS}),
    ]


Line = Annotated[int, Field(ge=1)]


def _check_end(end: int | None, info: ValidationInfo) -> int | None:
    start = info.data.get("start")
    if start is not None and end is not None:
        if end < start:
            raise refuse("gw.tool_range", start=start, end=end)
        if end - start + 1 > MAX_LINES:
            raise refuse("gw.tool_range_long", limit=MAX_LINES)
    return end


class ViewItem(BodyModel):
    """Lines ``start``-``end`` of a workspace file (default: its first 200 lines)."""

    path: Annotated[Text, Field(max_length=1024)]
    start: Line | None = None
    end: Annotated[Line, AfterValidator(_check_end)] | None = None


class EditItem(BodyModel):
    """Lines ``start``-``end`` of a workspace file replaced by ``content`` (a new or
    empty file: ``content`` is the whole file)."""

    path: Annotated[Text, Field(max_length=1024)]
    start: Line
    end: Annotated[Line, AfterValidator(_check_end)]
    content: Annotated[str, Field(max_length=1_000_000)]


class FindItem(BodyModel):
    """Lines holding ``pattern`` (literal, not a regex) in a workspace file, or in every
    file under a folder ("" or absent: the whole workspace)."""

    path: Annotated[str, Field(max_length=1024)] = ""
    pattern: Annotated[Text, Field(max_length=1000)]
    ignore_case: bool = False


class SearchItem(BodyModel):
    query: Annotated[Text, Field(max_length=1000)]
    count: Annotated[int, Field(ge=1, le=20)] | None = None


class ShellItem(BodyModel):
    """A shell command, run in the workspace (or ``cwd``, a folder in it) once the owner
    approved it in Telegram."""

    command: Annotated[Text, Field(max_length=3000)]
    cwd: Annotated[str, Field(max_length=1024)] = ""
    timeout_seconds: Annotated[int, Field(ge=1, le=3600)] = 120


class BrowserItem(BaseModel):
    """The browser tool's own arguments (its ``action`` and what that takes)."""

    model_config = ConfigDict(extra="allow", defer_build=True)


class ExplicitTools(BodyModel):
    """The top-level tool arrays of ``/agent/process`` (one per request)."""

    view: items_of(ViewItem) | None = None  # type: ignore[valid-type]
    edit: items_of(EditItem) | None = None  # type: ignore[valid-type]
    find: items_of(FindItem) | None = None  # type: ignore[valid-type]
    search: items_of(SearchItem) | None = None  # type: ignore[valid-type]
    browser: items_of(BrowserItem) | None = None  # type: ignore[valid-type]
    shell: items_of(ShellItem) | None = None  # type: ignore[valid-type]

    def explicit(self) -> tuple[str, list[BaseModel]] | None:
        """The one tool named and its items; None: none; two or more are refused."""
        given = [(n, getattr(self, n)) for n in NAMES if getattr(self, n) is not None]
        if len(given) > 1:
            from kernel.gateway.api import invalid

            names = ", ".join(n for n, _ in given)
            raise invalid(t("gw.tool_one_kind", names=names), field=given[1][0])
        return given[0] if given else None


NAMES = ("view", "edit", "find", "search", "browser", "shell")
ACTING_ARRAYS = ("edit", "shell")  # they write or run: held back in plan and read_only


Runner = Callable[["GatewayDeps", "ToolContext", Any], Any]


async def run_explicit(
    deps: GatewayDeps, opened: OpenedSession, name: str, items: Sequence[BaseModel]
) -> AsyncIterator[TurnEvent]:
    """Each item as a tool call and its result; then the results' text as the reply,
    or the first failure as the error event that ends the answer."""
    context = await deps.agent.scopes.tool_context(opened.row.id, opened.conversation)
    texts: list[str] = []
    for step, item in enumerate(items, start=1):
        call_id = f"direct_{uuid.uuid4().hex[:12]}"
        arguments = item.model_dump(exclude_none=True)
        yield ToolCall(step, call_id, name, arguments)
        try:
            result = await _RUNNERS[name](deps, context, item)
        except WorkspaceError as exc:  # the workspace's own refusal, as /workspace answers
            yield ToolResult(step, call_id, name, False, str(exc))
            yield ErrorEvent(step, exc.code, str(exc), {"tool": name, "item": step - 1})
            return
        except ToolFailed as exc:
            yield ToolResult(step, call_id, name, False, exc.message)
            meta = {"tool": name, "item": step - 1, **exc.details}
            yield ErrorEvent(step, exc.code, exc.message, meta)
            return
        content = json.dumps(result, ensure_ascii=False)
        yield ToolResult(step, call_id, name, bool(result.get("ok", True)), _summary(content))
        texts.append(str(result.get("text") or content))
    yield Completed(len(items), "\n\n".join(texts))


def _summary(content: str) -> str:
    return summarize_tool_result(content)


def outcome_output(outcome: ToolOutcome) -> Any:
    """What a registered tool gave, as JSON can carry it: its structured result, or its
    text. A failed call is ``tool_invoke_failed``; a structured result that is no JSON
    (a NaN, a set, an object) is ``tool_invalid_result``."""
    if not outcome.ok:
        words = t("gw.tool_failed", tool=outcome.name, detail=outcome.content[:2000])
        raise ToolFailed("tool_invoke_failed", words, output=outcome.content[:2000])
    if outcome.data is None:
        return outcome.content
    try:
        json.dumps(outcome.data, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        why = type(exc).__name__
        raise ToolFailed(
            "tool_invalid_result", t("gw.tool_invalid_result", tool=outcome.name, why=why)
        ) from None
    return outcome.data


async def _registered(
    deps: GatewayDeps, context: ToolContext, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    outcome = await deps.tools.call(tool, arguments, context)
    output = outcome_output(outcome)
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    return {"ok": True, "tool": tool, "output": output, "text": text}


async def _search(deps: GatewayDeps, context: ToolContext, item: SearchItem) -> dict[str, Any]:
    return await _registered(deps, context, SEARCH_TOOL, item.model_dump(exclude_none=True))


async def _browser(deps: GatewayDeps, context: ToolContext, item: BrowserItem) -> dict[str, Any]:
    from kernel.browser import TOOLS, tool_call  # light: Playwright loads on first use

    if not any(name in deps.tools for name in TOOLS.values()):
        raise ToolFailed("tool_not_supported", t("gw.tool_browser_off"))
    try:
        name, arguments = tool_call(item.model_dump())
    except ToolError as exc:
        raise ToolFailed("invalid_request", str(exc)) from None
    if context.session_id is not None:  # a click or a fill acts: plan mode refuses it
        await mode_refusal(deps, context.session_id, name, arguments)
    return await _registered(deps, context, name, arguments)


async def _shell(deps: GatewayDeps, context: ToolContext, item: ShellItem) -> dict[str, Any]:
    return await run_approved(deps, context, item.command, item.cwd, item.timeout_seconds)


async def _view(deps: GatewayDeps, context: ToolContext, item: ViewItem) -> dict[str, Any]:
    return await view(deps.workspace, item.path, item.start, item.end)


async def _edit(deps: GatewayDeps, context: ToolContext, item: EditItem) -> dict[str, Any]:
    return await edit(deps.workspace, item.path, item.start, item.end, item.content)


async def _find(deps: GatewayDeps, context: ToolContext, item: FindItem) -> dict[str, Any]:
    return await find(deps.workspace, item.path, item.pattern, item.ignore_case)


_RUNNERS: dict[str, Runner] = {
    "view": _view,
    "edit": _edit,
    "find": _find,
    "search": _search,
    "browser": _browser,
    "shell": _shell,
}


async def mode_refusal(
    deps: GatewayDeps, session_id: int, name: str, arguments: dict[str, Any] | None = None
) -> None:
    """Raise 403 ``tool_forbidden_in_mode`` when the session's plan or read_only mode
    holds tool ``name`` back (the one rule: :meth:`ToolRegistry.allowed_in`). The
    top-level arrays read (``view``, ``find``, ``search``) or act (``edit``, ``shell``);
    a ``browser`` item is checked as the browser tool it becomes, when it runs."""
    if name in ACTING_ARRAYS:
        mode = await deps.agent.modes.of_session(session_id)
        if restricted(mode):
            details: dict[str, object] = {"tool": name, "mode": mode}
            raise CodedError(REFUSED_CODE, refused_in_mode(name, mode), details)
    elif name not in NAMES:
        await deps.agent.modes.check(session_id, name, deps.tools, arguments)
