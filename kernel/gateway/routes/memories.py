"""``/memories``: the owner's long-term memory (kernel/memory), listed or searched (the
same search the memory tools use), added, edited in place, moved and deleted; a memory's
earlier versions (issue 39). Every change is an audit row (``memory.changed``), its
actor ``owner`` from the console, ``api`` from a sidecar client.

A memory view is ``id``, ``text``, ``category`` (null: none), ``scope`` (``global``,
``project:<name>`` or ``persona:<name>``) and ``created_at``. A new memory is checked
as the ``memory_add`` tool's is (kernel/memory's ``Memories.remember``): the same fact
already in that scope or in global is not stored twice (200 with that memory,
``created`` false); a fact that restates or replaces a memory updates it (200,
``updated`` true, its earlier text kept as a version). An edit or a move that would make
a memory another's fact is refused with ``409 memory_exists``.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from aiohttp import web
from pydantic import AfterValidator, Field

from kernel.core.i18n import t
from kernel.gateway.api import (
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
from kernel.gateway.apikey import caller_of
from kernel.gateway.schema import BodyModel, Shape, Text, documented, refuse
from kernel.memory.scopes import GLOBAL, check_scope
from kernel.store.memories import MEMORY_CATEGORIES, DuplicateMemory, How, MemoryRow
from kernel.tools.memory import Category

router = Router("memories", "Long-term memory: search, add, edit, delete")

MAX_TEXT = 4000  # one fact, not a document
MAX_LIMIT = 500
MAX_OFFSET = 1_000_000
MAX_QUERY = 500
SEARCH_WINDOW = 1000  # the best matches a search filters by category and pages through
SCOPE_WORDS = "global, project:<name> or persona:<name>"

MEMORY_ID = path_param("memory_id", "the memory's id (a number)")
MemoryText = Annotated[Text, Field(max_length=MAX_TEXT)]
# The memory_add tool's categories, documented as a pattern: OpenAPI 3.0 cannot say
# "one of these or null" with an enum (null is absent in a body).
CATEGORIES = get_args(Category)


def _category(value: str) -> str:
    if value not in CATEGORIES:
        raise refuse("gw.bad_field", expected=", ".join(CATEGORIES))
    return value


CategoryName = Annotated[
    str,
    AfterValidator(_category),
    documented(Annotated[str, Field(pattern=f"^({'|'.join(CATEGORIES)})$")]),
]


class MemoryInfo(Shape):
    id: int
    text: str
    category: CategoryName | None = None
    scope: str = Field(description=SCOPE_WORDS)
    created_at: str


class MemoryList(Shape):
    memories: list[MemoryInfo]
    more: bool = Field(description="more memories follow this page (offset + limit)")


class MemoryAdded(MemoryInfo):
    created: bool = Field(description="false: the same fact was already this memory")
    updated: bool = Field(
        False, description="true: the fact restated or replaced this memory (its text before kept)"
    )


class MemoryVersionInfo(Shape):
    text: str
    category: CategoryName | None = None
    scope: str = Field(description=SCOPE_WORDS)
    saved_at: str
    replaced_at: str
    how: How


class MemoryVersions(Shape):
    id: int
    versions: list[MemoryVersionInfo] = Field(description="the latest first")


class NewMemory(BodyModel):
    text: MemoryText
    category: CategoryName | None = None
    scope: Annotated[str, Field(max_length=200, description=f"{SCOPE_WORDS} (global)")] | None = (
        None
    )


class MemoryChange(BodyModel):
    text: MemoryText | None = None
    category: CategoryName | None = None
    scope: Annotated[str, Field(max_length=200, description=f"move it: {SCOPE_WORDS}")] | None = (
        None
    )


class MemoryDeleted(Shape):
    deleted: bool
    id: int


def memory_json(row: MemoryRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "text": row.text,
        "category": row.category,
        "scope": row.scope,
        "created_at": row.created_at.isoformat(timespec="seconds"),
    }


def _scope(raw: str, field: str) -> str:
    try:
        return check_scope(raw)
    except ValueError:
        raise invalid(t("gw.memory_bad_scope", field=field), field=field) from None


def _actor(request: web.Request) -> str:
    """Who changes a memory: the owner at the console, else a sidecar client."""
    return "owner" if caller_of(request) == "console" else "api"


def _memory_id(request: web.Request) -> int:
    raw = request.match_info["memory_id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise not_found("memory", raw)
    return int(raw)


@router.get(
    "/memories",
    summary="Memories, newest first, or the best matches of a search",
    params=(
        query_param("q", Annotated[str, Field(max_length=MAX_QUERY)], "search text"),
        query_param("category", Category),  # a query parameter is never null
        query_param("scope", str, SCOPE_WORDS),
        query_param("limit", bounded(1, MAX_LIMIT), "how many (50)"),
        query_param("offset", bounded(0, MAX_OFFSET), "skip that many (0)"),
    ),
    response=MemoryList,
    errors=(400,),
)
async def list_memories(request: web.Request) -> web.Response:
    """With ``q``: best match first (the memory tools' search: full-text, else
    substrings); without: newest first."""
    memories = deps_of(request).memories
    query = request.query.get("q", "")
    if len(query) > MAX_QUERY:
        raise invalid(t("gw.field_too_long", field="q", limit=MAX_QUERY), field="q")
    category = request.query.get("category") or None
    if category is not None and category not in MEMORY_CATEGORIES:
        allowed = ", ".join(MEMORY_CATEGORIES)
        message = t("gw.bad_query_choice", name="category", allowed=allowed)
        raise invalid(message, field="category", allowed=list(MEMORY_CATEGORIES))
    scope = request.query.get("scope") or None
    scopes = None if scope is None else [_scope(scope, "scope")]
    limit = query_int(request, "limit", 50, minimum=1, maximum=MAX_LIMIT)
    offset = query_int(request, "offset", 0, maximum=MAX_OFFSET)
    if query.strip():
        found = await memories.search(query, SEARCH_WINDOW, scopes)
        matching = [m for m in found if category is None or m.category == category]
        rows = matching[offset : offset + limit + 1]
    else:
        rows = await memories.listed(limit + 1, offset, scopes, category)
    page = [memory_json(m) for m in rows[:limit]]
    return json_response({"memories": page, "more": len(rows) > limit})


@router.post(
    "/memories",
    summary="Remember a fact (as the memory_add tool does)",
    body=NewMemory,
    response=MemoryAdded,
    status=201,
    also=(200,),
    errors=(400,),
)
async def add_memory(request: web.Request, body: NewMemory) -> web.Response:
    """201 when stored; 200 with the existing memory when the same fact is already in
    that scope or in global."""
    scope = _scope(body.scope or GLOBAL, "scope")
    memories = deps_of(request).memories
    try:
        saved = await memories.remember(body.text, body.category, scope, actor=_actor(request))
    except ValueError as exc:
        raise invalid(str(exc)) from None
    created = saved.outcome == "created"
    shown = {"created": created, "updated": saved.outcome in ("superseded", "restated")}
    return json_response(memory_json(saved.row) | shown, 201 if created else 200)


@router.get(
    "/memories/{memory_id}",
    summary="One memory",
    params=(MEMORY_ID,),
    response=MemoryInfo,
    errors=(404,),
)
async def get_memory(request: web.Request) -> web.Response:
    memory_id = _memory_id(request)
    row = await deps_of(request).memories.get(memory_id)
    if row is None:
        raise not_found("memory", str(memory_id))
    return json_response(memory_json(row))


@router.route(
    "PATCH",
    "/memories/{memory_id}",
    summary="Change a memory's text and/or category, or move it to another scope (same id)",
    params=(MEMORY_ID,),
    body=MemoryChange,
    response=MemoryInfo,
    errors=(400, 404, 409),
)
async def change_memory(request: web.Request, body: MemoryChange) -> web.Response:
    """The text before an edit is kept as a version; a move keeps the text."""
    memory_id = _memory_id(request)
    if body.text is None and body.category is None and body.scope is None:
        raise invalid(t("gw.memory_nothing_to_change"), field="text")
    scope = None if body.scope is None else _scope(body.scope, "scope")
    memories = deps_of(request).memories
    actor = _actor(request)
    row: MemoryRow | None = None
    try:
        if scope is not None:
            moved = await memories.move(memory_id, scope, actor=actor)
            row = None if moved is None else moved.row
        if (body.text is not None or body.category is not None) and (scope is None or row):
            row = await memories.edit(memory_id, body.text, body.category, actor=actor)
    except DuplicateMemory as exc:
        message = t("gw.memory_exists", id=exc.existing)
        raise refusal("memory_exists", message, {"id": exc.existing}) from None
    except ValueError as exc:
        raise invalid(str(exc)) from None
    if row is None:
        raise not_found("memory", str(memory_id))
    return json_response(memory_json(row))


@router.get(
    "/memories/{memory_id}/versions",
    summary="A memory's earlier versions (edited, superseded, restated), the latest first",
    params=(MEMORY_ID,),
    response=MemoryVersions,
    errors=(404,),
)
async def memory_versions(request: web.Request) -> web.Response:
    memory_id = _memory_id(request)
    memories = deps_of(request).memories
    if await memories.get(memory_id) is None:
        raise not_found("memory", str(memory_id))
    versions = [
        {
            "text": v.text,
            "category": v.category,
            "scope": v.scope,
            "saved_at": v.saved_at.isoformat(timespec="seconds"),
            "replaced_at": v.replaced_at.isoformat(timespec="seconds"),
            "how": v.how,
        }
        for v in await memories.versions(memory_id)
    ]
    return json_response({"id": memory_id, "versions": versions})


@router.delete(
    "/memories/{memory_id}",
    summary="Forget a memory",
    params=(MEMORY_ID,),
    response=MemoryDeleted,
    errors=(404,),
)
async def delete_memory(request: web.Request) -> web.Response:
    memory_id = _memory_id(request)
    if not await deps_of(request).memories.forget([memory_id], actor=_actor(request)):
        raise not_found("memory", str(memory_id))
    return json_response({"deleted": True, "id": memory_id})
