"""The built-in ``todo_write`` tool: the model's visible plan for multi-step work (seed
001's TodoWrite, in Claude Code's shape: the whole list each call, each item with its
``content``, ``status`` and an optional ``active_form``).

The plan is kept per session in memory only (:class:`Plans`, bounded): a new session
starts without one, a restart forgets every plan, and a plan whose items are all
completed is forgotten once shown. Each accepted call hands the list to
``ToolContext.plan``, which the turn turns into a ``plan`` event (channels show it and
replace it in place). A refusal names the item and the fix, so the model can resend.
"""

from __future__ import annotations

import unicodedata
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from kernel.core.errors import ToolError
from kernel.core.session_modes import READS
from kernel.tools.registry import CONTEXT_ARG, ToolContext, ToolRegistry

NAME = "todo_write"
MAX_ITEMS = 30
MAX_CONTENT = 300
MAX_SESSIONS = 256  # plans kept in memory; the least recently written goes first
STATUSES = ("pending", "in_progress", "completed")
Status = Literal["pending", "in_progress", "completed"]
# Characters that would break or disguise a line where the plan is shown.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

DESCRIPTION = (
    "Keep a short visible plan (a todo list) while you work on a task of several steps: "
    "the owner sees it, updated in place, while the turn runs. Use it when the work "
    "takes three or more distinct steps, or the owner gives a list of things to do; "
    "not for a single step, a quick question or plain conversation. Each call gives the "
    "WHOLE list as it now stands (it replaces the previous one): mark an item "
    "in_progress when you start it (one at a time), completed as soon as it is done, "
    "add or drop items as you learn more. The plan lasts for this session only, in "
    "memory: it is not kept across sessions or a restart of Kernel."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "description": f"the whole plan, in order (at most {MAX_ITEMS} items; [] clears it)",
            "maxItems": MAX_ITEMS,
            "items": {
                "type": "object",
                "properties": {
                    "content": {
                        "type": "string",
                        "description": "what to do, imperative (e.g. 'Run the tests')",
                        "maxLength": MAX_CONTENT,
                    },
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "active_form": {
                        "type": "string",
                        "description": "the same while it runs (e.g. 'Running the tests')",
                        "maxLength": MAX_CONTENT,
                    },
                },
                "required": ["content", "status"],
            },
        }
    },
    "required": ["items"],
}


@dataclass(frozen=True, slots=True)
class PlanItem:
    content: str
    status: Status
    active_form: str = ""

    def as_dict(self) -> dict[str, str]:
        """The ``plan`` event's item: content and status, active_form when given."""
        out = {"content": self.content, "status": str(self.status)}
        if self.active_form:
            out["active_form"] = self.active_form
        return out


class Plans:
    """The current plan of each session, in memory, at most ``limit`` sessions."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self._plans: OrderedDict[object, list[PlanItem]] = OrderedDict()

    def get(self, key: object) -> list[PlanItem]:
        return list(self._plans.get(key, ()))

    def put(self, key: object, items: list[PlanItem]) -> None:
        """Keep ``items`` as the plan of ``key``; an empty or finished plan is forgotten
        (the next call starts a new one)."""
        self._plans.pop(key, None)
        if not items or all(item.status == "completed" for item in items):
            return
        self._plans[key] = list(items)
        while len(self._plans) > self.limit:
            self._plans.popitem(last=False)

    def __len__(self) -> int:
        return len(self._plans)


def read_items(raw: object) -> list[PlanItem]:
    """The checked plan; ToolError naming the first bad item and the fix."""
    if not isinstance(raw, list):
        raise ToolError("items must be an array of {content, status} objects")
    if len(raw) > MAX_ITEMS:
        raise ToolError(
            f"the plan has {len(raw)} items; keep it within {MAX_ITEMS}: merge small "
            "steps or drop finished ones"
        )
    # Counted from 0, as the registry's own refusals count an array's items.
    return [_read_item(number, item) for number, item in enumerate(raw)]


def _read_item(number: int, raw: object) -> PlanItem:
    if not isinstance(raw, dict):
        raise ToolError(f'item {number} must be an object like {{"content": "…", "status": …}}')
    content = _text(number, "content", raw.get("content"))
    if not content:
        raise ToolError(f"item {number}: content is empty; say in a few words what the step is")
    where = f"item {number} ({_quote(content)})"
    status = raw.get("status")
    if status not in STATUSES:
        shown = _quote(status) if isinstance(status, str) else "missing"
        raise ToolError(f"{where}: status {shown} is not one of {', '.join(STATUSES)}")
    # Claude Code spells it activeForm; a model used to it is understood.
    active = raw.get("active_form", raw.get("activeForm"))
    active_form = _text(number, "active_form", active) if active is not None else ""
    return PlanItem(content, status, active_form)


def _text(number: int, field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ToolError(f"item {number}: {field} must be a string")
    text = value.strip()
    if len(text) > MAX_CONTENT:
        raise ToolError(
            f"item {number}: {field} has {len(text)} characters; keep it within "
            f"{MAX_CONTENT} (one short line: details belong in your work, not the plan)"
        )
    if any(unicodedata.category(ch) in ("Cc", "Cs") or ch in _BIDI for ch in text):
        raise ToolError(
            f"item {number}: {field} holds a control character (a line break, tab, a "
            "broken surrogate or similar); write it as one plain line"
        )
    return text


def _quote(text: str, width: int = 40) -> str:
    return '"' + (text if len(text) <= width else text[: width - 1] + "…") + '"'


def summary(items: list[PlanItem], *, new: bool) -> str:
    """What the model reads back: the counts and what to do next."""
    if not items:
        return "plan cleared"
    done = sum(item.status == "completed" for item in items)
    head = f"{'plan set' if new else 'plan updated'}: {done}/{len(items)} done"
    if done == len(items):
        return f"{head}; every item is completed (the plan is closed; a new call starts anew)"
    running = [item.content for item in items if item.status == "in_progress"]
    parts = [head]
    if running:
        parts.append("in progress: " + "; ".join(_quote(c, 80) for c in running))
    else:
        parts.append("nothing in progress: mark the item you start as in_progress")
    following = next((item.content for item in items if item.status == "pending"), None)
    if following is not None:
        parts.append("next: " + _quote(following, 80))
    if len(running) > 1:
        parts.append("keep one item in_progress at a time")
    return "; ".join(parts)


def register(registry: ToolRegistry, plans: Plans | None = None) -> None:
    """Register ``todo_write``, keeping the plans in ``plans`` (a new store when None)."""
    store = plans if plans is not None else Plans()

    async def todo_write(items: object = None, **extra: Any) -> str:
        context = extra.get(CONTEXT_ARG)
        ctx = context if isinstance(context, ToolContext) else ToolContext()
        plan = read_items(items)
        key: object = ctx.session_id if ctx.session_id is not None else ctx.conversation
        new = not store.get(key)
        store.put(key, plan)
        if ctx.plan is not None:
            ctx.plan([item.as_dict() for item in plan])
        return summary(plan, new=new)

    # The visible plan, nothing outside the chat: it stays in plan mode, made for it.
    registry.register(NAME, DESCRIPTION, PARAMETERS, todo_write, with_context=True, effect=READS)
