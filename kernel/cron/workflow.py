"""Workflows: a chain of nodes a job runs instead of one prompt (seed 000's Cron Node
extension point).

A workflow is ``{"version": "v1", "nodes": [...], "edges": [...]}``: exactly one
``start`` node, each node at most one edge in and one out, every node reachable from
start, no cycles; the run follows the chain. Without ``edges`` the nodes run in the
order given (a start node is added when missing). Node types are handlers registered
in :data:`NODE_HANDLERS` (``register_node``), the built-ins the same way (by the
``cron`` plugin, kernel/plugins.py):

- ``start``: where the chain begins; does nothing;
- ``text_event``: ``text`` run through the agent in the job's session, the reply
  delivered to the job's channel;
- ``delay``: wait ``delay_seconds``; the delays of a workflow must add up to less than
  its run timeout (``runtime.timeout_seconds``, else ``cron.run_timeout``), checked when
  the job is saved;
- ``if_event``: ``if_condition`` = ``<field> <op> <value>`` with op ``==``, ``!=``,
  ``contains``, ``!contains``; false stops the run (the rest is recorded as skipped).
  Fields: ``job_id``, ``job_name``, ``channel``, ``user_id``, ``session_id``,
  ``task_type`` (seed 000), ``last_reply`` (the previous text_event's reply),
  ``weekday`` (1 = Monday … 7), ``hour`` (00–23), ``date`` (YYYY-MM-DD, local).

A node with ``continue_on_error`` lets the run go on after it fails.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Protocol

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic.types import AllowInfNan, Strict

from kernel.core.errors import CronError
from kernel.core.i18n import t

INVALID = "invalid_cron_workflow"
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_CONDITION = re.compile(
    r"^\s*+([A-Za-z_]+)\s*(==|!=|!contains|contains)\s*+(?:\"(.*)\"|'(.*)'|(.*))\Z"
)
CONDITION_FIELDS = (
    "job_id",
    "job_name",
    "channel",
    "user_id",
    "session_id",
    "task_type",
    "last_reply",
    "weekday",
    "hour",
    "date",
)
MAX_DELAY = 7 * 86400
MAX_NODES = 50


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    type: str
    title: str = ""
    text: str = ""
    delay_seconds: int = 0
    if_condition: str = ""
    continue_on_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.title:
            out["title"] = self.title
        if self.type == "text_event":
            out["text"] = self.text
        elif self.type == "delay":
            out["delay_seconds"] = self.delay_seconds
        elif self.type == "if_event":
            out["if_condition"] = self.if_condition
        if self.continue_on_error:
            out["continue_on_error"] = True
        return out


@dataclass(frozen=True, slots=True)
class Workflow:
    nodes: tuple[Node, ...]
    edges: tuple[tuple[str, str, str], ...]  # (id, source, target)
    order: tuple[Node, ...]  # the executable chain after start

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": "v1",
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [{"id": i, "source": s, "target": d} for i, s, d in self.edges],
        }


@dataclass
class NodeContext:
    """What a node may use while a job runs."""

    job_id: str
    job_name: str
    channel: str
    user_id: str
    session_id: str
    task_type: str
    now: Callable[[], datetime]  # local time
    sleep: Callable[[float], Awaitable[None]]
    run_text: Callable[[str], Awaitable[str]]  # a turn + delivery; returns the reply
    last_reply: str = ""
    outputs: list[str] = field(default_factory=list)

    def value_of(self, name: str) -> str:
        now = self.now()
        values = {
            "job_id": self.job_id,
            "job_name": self.job_name,
            "channel": self.channel,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "task_type": self.task_type,
            "last_reply": self.last_reply,
            "weekday": str(now.isoweekday()),
            "hour": f"{now.hour:02d}",
            "date": now.strftime("%Y-%m-%d"),
        }
        return values[name]


@dataclass(frozen=True, slots=True)
class NodeResult:
    stop: bool = False


class NodeHandler(Protocol):
    type: str

    def validate(self, node: Node) -> None:
        """Raise ValueError naming what is wrong; runs when a job is saved."""
        ...

    async def execute(self, ctx: NodeContext, node: Node) -> NodeResult: ...


class StartNode:
    type = "start"

    def validate(self, node: Node) -> None:
        return None

    async def execute(self, ctx: NodeContext, node: Node) -> NodeResult:
        return NodeResult()


class TextEventNode:
    type = "text_event"

    def validate(self, node: Node) -> None:
        if not node.text.strip():
            raise ValueError(t("cron.node_text", id=node.id))

    async def execute(self, ctx: NodeContext, node: Node) -> NodeResult:
        ctx.last_reply = await ctx.run_text(node.text)
        ctx.outputs.append(ctx.last_reply)
        return NodeResult()


class DelayNode:
    type = "delay"

    def validate(self, node: Node) -> None:
        if not 0 <= node.delay_seconds <= MAX_DELAY:
            raise ValueError(t("cron.node_delay", id=node.id, max=MAX_DELAY))

    async def execute(self, ctx: NodeContext, node: Node) -> NodeResult:
        if node.delay_seconds:
            await ctx.sleep(node.delay_seconds)
        return NodeResult()


@dataclass(frozen=True, slots=True)
class Condition:
    field: str
    op: str
    value: str

    def holds(self, ctx: NodeContext) -> bool:
        left = ctx.value_of(self.field)
        if self.op == "==":
            return left == self.value
        if self.op == "!=":
            return left != self.value
        if self.op == "contains":
            return self.value in left
        return self.value not in left


def parse_condition(text: str) -> Condition:
    # Stripped first: a lazy value before trailing blanks would backtrack quadratically.
    match = _CONDITION.match((text or "").strip())
    if match is None:
        raise ValueError(t("cron.condition_form", fields=", ".join(CONDITION_FIELDS)))
    name = match.group(1).lower()
    if name not in CONDITION_FIELDS:
        raise ValueError(t("cron.condition_field", field=name, fields=", ".join(CONDITION_FIELDS)))
    value = next((g for g in match.group(3, 4, 5) if g is not None), "")
    return Condition(name, match.group(2), value)


class IfEventNode:
    type = "if_event"

    def validate(self, node: Node) -> None:
        try:
            parse_condition(node.if_condition)
        except ValueError as exc:
            raise ValueError(f"{node.id}: {exc}") from None

    async def execute(self, ctx: NodeContext, node: Node) -> NodeResult:
        return NodeResult(stop=not parse_condition(node.if_condition).holds(ctx))


NODE_HANDLERS: dict[str, NodeHandler] = {}


def register_node(handler: NodeHandler) -> None:
    """Add a node type; its ``type`` is a stable lowercase name."""
    if not re.match(r"^[a-z][a-z0-9_]{0,31}$", handler.type):
        raise ValueError(f"invalid node type {handler.type!r}")
    NODE_HANDLERS[handler.type] = handler


# ---------------------------------------------------------------- the declared shape


def loose(kind: str | None = "string", description: str = "", **more: Any) -> WithJsonSchema:
    """For ``Annotated[Any, loose(...)]``: a field taken as given and read leniently
    (``str(value or default)``); its JSON schema (``kind``, ``description``, ``more``)
    says what to send, nothing is refused for its type."""
    schema: dict[str, Any] = {"type": kind} if kind else {}
    if description:
        schema["description"] = description
    return WithJsonSchema({**schema, **more})


def _falsy_is_none(value: Any) -> Any:
    return value or None


class NodeModel(BaseModel):
    """One node: ``type`` is a registered node type; the other fields are per type."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[Any, loose(pattern=_ID.pattern)] = None
    type: Annotated[Any, loose(description="start, text_event, delay, if_event, …")] = None
    title: Annotated[Any, loose(maxLength=200)] = None
    text: Annotated[Any, loose(description="text_event: the prompt")] = None
    delay_seconds: Annotated[
        Annotated[int, Strict()] | Annotated[float, Strict(), AllowInfNan(False)],
        Field(description=f"delay: seconds to wait, 0 to {MAX_DELAY}"),
    ] = 0
    if_condition: Annotated[Any, loose(description="if_event: <field> <op> <value>")] = None
    continue_on_error: Annotated[Any, loose("boolean")] = None


class EdgeModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: Annotated[Any, loose()] = None
    source: Annotated[Any, loose()] = None
    target: Annotated[Any, loose()] = None


class WorkflowModel(BaseModel):
    """A workflow as sent: ``nodes`` in order, ``edges`` optional (none: the order)."""

    model_config = ConfigDict(extra="ignore")

    version: Annotated[Any, loose(enum=["v1"])] = None
    nodes: Annotated[list[NodeModel], Field(min_length=1, max_length=MAX_NODES)]
    edges: Annotated[list[EdgeModel] | None, BeforeValidator(_falsy_is_none)] = None


def _bad(message: str) -> CronError:
    return CronError(INVALID, t("cron.bad_workflow", detail=message))


_NODES: TypeAdapter[list[Any]] = TypeAdapter(
    Annotated[list[Any], Field(min_length=1, max_length=MAX_NODES)]
)
_NODE = TypeAdapter(NodeModel)
_EDGE = TypeAdapter(EdgeModel)


def _node_id(value: Any, index: int) -> str:
    return str(value or f"n{index + 1}").strip()


def _node(data: Any, index: int) -> Node:
    """Node ``index`` checked by :class:`NodeModel` (its id and type first), then by its
    type's handler."""
    if not isinstance(data, dict):
        raise _bad(t("cron.node_object", index=index))
    kind = str(data.get("type") or "").strip().lower()
    node_id = _node_id(data.get("id"), index)
    if not _ID.match(node_id):
        raise _bad(t("cron.node_id", id=node_id[:64]))
    if kind not in NODE_HANDLERS:
        known = ", ".join(NODE_HANDLERS)
        raise _bad(t("cron.node_type", id=node_id, type=kind[:32], known=known))
    try:
        raw = _NODE.validate_python(data)
    except ValidationError:
        raise _bad(t("cron.node_delay", id=node_id, max=MAX_DELAY)) from None
    node = Node(
        id=node_id,
        type=kind,
        title=str(raw.title or "")[:200],
        text=str(raw.text or "").strip(),
        delay_seconds=int(raw.delay_seconds),
        if_condition=str(raw.if_condition or "").strip(),
        continue_on_error=raw.continue_on_error is True,
    )
    try:
        NODE_HANDLERS[kind].validate(node)
    except ValueError as exc:
        raise _bad(str(exc)) from None
    return node


def parse_workflow(data: Any) -> Workflow:
    """A checked workflow (:class:`WorkflowModel`, read in order: each node checked
    whole before the next), or CronError(invalid_cron_workflow) naming the problem."""
    if not isinstance(data, dict):
        raise _bad(t("cron.workflow_object"))
    version = str(data.get("version") or "v1").lower()
    if version != "v1":
        raise _bad(t("cron.workflow_version", version=version[:16]))
    try:
        raw_nodes = _NODES.validate_python(data.get("nodes"))
    except ValidationError:
        raise _bad(t("cron.workflow_nodes", max=MAX_NODES)) from None
    nodes = [_node(raw, i) for i, raw in enumerate(raw_nodes)]
    ids = [n.id for n in nodes]
    if len(set(ids)) != len(ids):
        raise _bad(t("cron.workflow_duplicate"))
    if not data.get("edges"):
        return _linear(nodes)
    if not isinstance(data["edges"], list):
        raise _bad(t("cron.workflow_edges"))
    return _graph(nodes, data["edges"])


def _linear(nodes: list[Node]) -> Workflow:
    starts = [n for n in nodes if n.type == "start"]
    if len(starts) > 1 or (starts and nodes[0] is not starts[0]):
        raise _bad(t("cron.workflow_start"))
    if not starts:
        taken = {n.id for n in nodes}
        start_id = "start" if "start" not in taken else "start_0"
        nodes = [Node(start_id, "start"), *nodes]
    edges = tuple((f"e{i + 1}", nodes[i].id, nodes[i + 1].id) for i in range(len(nodes) - 1))
    order = tuple(nodes[1:])
    if not order:
        raise _bad(t("cron.workflow_empty"))
    return Workflow(tuple(nodes), edges, order)


def _graph(nodes: list[Node], raw_edges: list[Any]) -> Workflow:
    by_id = {n.id: n for n in nodes}
    starts = [n for n in nodes if n.type == "start"]
    if len(starts) != 1:
        raise _bad(t("cron.workflow_start"))
    nexts: dict[str, str] = {}
    incoming: set[str] = set()
    edges: list[tuple[str, str, str]] = []
    for i, data in enumerate(raw_edges):
        try:
            raw = _EDGE.validate_python(data)
        except ValidationError:
            raise _bad(t("cron.workflow_edges")) from None
        edge_id = str(raw.id or f"e{i + 1}")
        source, target = str(raw.source or ""), str(raw.target or "")
        if source not in by_id or target not in by_id or source == target:
            raise _bad(t("cron.edge_bad", id=edge_id[:64]))
        if source in nexts or target in incoming:
            raise _bad(t("cron.edge_branch", id=edge_id[:64]))
        nexts[source] = target
        incoming.add(target)
        edges.append((edge_id, source, target))
    order: list[Node] = []
    cursor = starts[0].id
    seen = {cursor}
    while cursor in nexts:
        cursor = nexts[cursor]
        if cursor in seen or by_id[cursor].type == "start":
            raise _bad(t("cron.workflow_cycle"))
        seen.add(cursor)
        order.append(by_id[cursor])
    if not order:
        raise _bad(t("cron.workflow_empty"))
    unreachable = [n.id for n in nodes if n.id not in seen]
    if unreachable:
        raise _bad(t("cron.workflow_unreachable", ids=", ".join(unreachable[:5])))
    return Workflow(tuple(nodes), tuple(edges), tuple(order))
