"""``/agent/approvals`` (issue 19): the owner's answers to coding CLIs' permission
prompts, newest first — which delegation, the tool and its input, allow or deny, who
decided (the owner, a rule they added for the task, a timeout, a cancel) and when."""

from __future__ import annotations

from typing import Literal

from aiohttp import web

from kernel.gateway.api import Router, bounded, deps_of, json_response, query_int, query_param
from kernel.gateway.schema import Shape
from kernel.store.approvals import MAX_LIMIT

router = Router("approvals", "Delegations: the owner's answers to CLIs' permission prompts")

DEFAULT_LIMIT = 50


class ApprovalInfo(Shape):
    """``input``: the tool's input as JSON (cut at 4,000 characters); ``rule``: the
    "allow for this task" rule used or added ("" none); ``decided_by``: owner,
    task_rule, timeout, cancelled, undelivered or nobody. ``delegation_id`` "" for a
    prompt from an owner's own MCP client."""

    id: int
    delegation_id: str
    conversation: str
    session_id: int | None = None
    cli: str
    tool: str
    input: str
    rule: str
    decision: Literal["allow", "deny"]
    decided_by: str
    asked_at: str
    answered_at: str


class ApprovalList(Shape):
    items: list[ApprovalInfo]


@router.get(
    "/agent/approvals",
    summary="Answers to coding CLIs' permission prompts, newest first",
    params=(
        query_param("delegation_id", str, "only this delegation (its output file's stamp)"),
        query_param("limit", bounded(1, MAX_LIMIT), f"how many, newest first ({DEFAULT_LIMIT})"),
    ),
    response=ApprovalList,
)
async def approvals(request: web.Request) -> web.Response:
    deps = deps_of(request)
    delegation = request.query.get("delegation_id")
    limit = query_int(request, "limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
    found = await deps.approvals.recent(delegation, limit)
    return json_response({"items": [r.as_json() for r in found]})
