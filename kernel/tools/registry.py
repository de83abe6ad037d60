"""Tools the model may call: schemas from signatures, validated and isolated calls.

A tool call never raises into the agent loop (except cancellation): every failure
becomes a ToolOutcome whose ``content`` tells the model what went wrong.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterable
from dataclasses import dataclass, field
from types import NoneType
from typing import Any, TypeVar, overload

from kernel.core import i18n
from kernel.core.asks import Answer, AskOutcome
from kernel.core.errors import ToolError
from kernel.core.messages import ImageBlock, ToolSpec
from kernel.core.session_modes import ACT, ACTS, CONTROL, PLAN, Effect, restricted
from kernel.core.turns import Turn
from kernel.tools import schema
from kernel.tools.arguments import check as check_arguments
from kernel.tools.describe import Describe, details, generic
from kernel.tools.repair import repair_arguments, resolve_tool_name

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
# Whether a call (its arguments) of a tool that otherwise reads would act.
ActsWhen = Callable[[dict[str, Any]], bool]
# ask(question, options, kind=..., seconds=...) -> the owner's Answer
Ask = Callable[..., Awaitable[Answer]]

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# The keyword a handler registered ``with_context`` gets its ToolContext under: not a
# valid JSON-schema-friendly tool argument, so it cannot clash with a real one.
CONTEXT_ARG = "__kernel_context__"


@dataclass
class ToolContext:
    """Injected into tools that ask for it; never part of the schema."""

    session_id: int | None = None
    conversation: str = ""  # e.g. "console:default", "telegram:123"
    # A running tool reports a progress line ("3/10 indexing"): the turn shows it as a
    # tool_progress event (Telegram: the edited "⏳ tool: …" message). None: nobody shows it.
    progress: Callable[[str], None] | None = None
    tool_call_id: str = ""
    ask: Ask | None = None  # put a question to the owner; None where nobody can answer
    # The chat's persona and project (issue 18; "" none) and the project's working
    # folder (absolute; "" none): where delegate_to_cli runs by default.
    persona: str = ""
    project: str = ""
    folder: str = ""
    # The memory scopes this chat sees, and where a new memory goes by default.
    memory_scopes: tuple[str, ...] = ("global",)
    memory_scope: str = "global"
    depth: int = 0  # 1 inside a sub-agent's run
    turn: Turn | None = None  # the running turn (its id, and where usage is counted)
    # A guest's turn: the tools the guest may use (None: the owner's turn); a sub-agent
    # started from it runs as that guest.
    guest_tools: tuple[str, ...] | None = None
    # todo_write's plan as it now stands: the turn shows it as a plan event (Telegram:
    # the edited plan message). None: nobody shows it.
    plan: Callable[[list[dict[str, str]]], None] | None = None
    # The session's mode when the call is made (issue 38): in plan or read_only a tool
    # that writes or acts is refused (kernel/core/session_modes.py).
    session_mode: str = ACT


@dataclass
class ToolReply:
    """What a tool returns when it has images for the model besides its text."""

    text: str
    images: list[ImageBlock] = field(default_factory=list)


@dataclass
class ToolOutcome:
    name: str  # the resolved tool name actually called
    ok: bool
    content: str  # what the model reads
    arguments: dict[str, Any]  # the repaired arguments that were used ({} if unrepairable)
    error: BaseException | None = None  # kept for the log, never shown raw to the model
    images: list[ImageBlock] = field(default_factory=list)  # shown to the model after it
    # The handler's structured result (a dict, a list, a number), before it became the
    # text above; None for text. The sidecar hands it over as JSON (or refuses it).
    data: Any = None
    rejected: bool = False  # the arguments were refused before the tool ran


@dataclass
class _Tool:
    name: str
    description: str
    declaration: schema.Declaration  # its arguments: the JSON schema offered, the check
    handler: Callable[..., Any]
    source: str
    context_param: str | None = None
    # Whether the model is offered it now (e.g. web_search only with a provider set);
    # a call to a tool not offered still runs, so its handler can say what is missing.
    offered: Callable[[], bool] | None = None
    describe: Describe | None = None  # how an approval names a call (else: generic)
    # Kernel's wording of when and how to use it, after the description; left out where
    # SOUL.md has a section about the tool (kernel/agent/soul.py).
    rules: str = ""
    # What it does (kernel/core/session_modes.py): plan and read_only offer only what
    # reads. ``acts_when``: a tool that reads but acts on some calls (a browser's click),
    # offered in every mode, each call checked against its arguments.
    effect: Effect = ACTS
    acts_when: ActsWhen | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        return self.declaration.schema


# Built-in tools are defined inside their factories: a new function per Kernel, with the
# same code, annotations and defaults. Their declarations (a pydantic model and its
# schema, ~6 ms each; the schema is copied wherever it is handed out) are built once per
# process, keyed by everything they are built from.
_DECLARED: dict[Hashable, tuple[schema.Declaration, str | None]] = {}


def _declared(
    fn: Callable[..., Any], name: str, arg_docs: dict[str, str]
) -> tuple[schema.Declaration, str | None]:
    key = _declaration_key(fn, name, arg_docs)
    try:
        known = _DECLARED.get(key) if key is not None else None
    except TypeError:  # a default or an annotation that cannot be a key: built each time
        key = None
        known = None
    if known is None:
        known = schema.from_signature(fn, name, arg_docs, _is_context)
        if key is not None:
            _DECLARED[key] = known
    return known


def _declaration_key(fn: Callable[..., Any], name: str, arg_docs: dict[str, str]) -> Hashable:
    """What ``fn``'s declaration is built from, or None (not a plain function)."""
    inner = inspect.unwrap(fn)  # the signature read is the wrapped function's
    code = getattr(inner, "__code__", None)
    if code is None or hasattr(fn, "__signature__") or not isinstance(inner, types.FunctionType):
        return None
    return (
        code,
        inner.__defaults__,
        tuple(sorted((inner.__kwdefaults__ or {}).items())),
        tuple(inner.__annotations__.items()),
        name,
        tuple(arg_docs.items()),
    )


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, _Tool] = {}
        self._disabled: set[str] = set()
        self._approval: dict[str, float] = {}  # tool name -> seconds to wait for the owner

    # ------------------------------------------------------------ registration

    @overload
    def tool(
        self,
        fn: F,
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect = ACTS,
    ) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect = ACTS,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect = ACTS,
    ) -> F | Callable[[F], F]:
        """Register a function as a tool: ``@reg.tool`` or ``@reg.tool(name=...)``.
        ``effect``: what it does (kernel/core/session_modes.py; ``acts`` unless said)."""

        def decorate(func: F) -> F:
            self._register_function(func, name, description, effect)
            return func

        return decorate if fn is None else decorate(fn)

    def _register_function(
        self, fn: Callable[..., Any], name: str | None, description: str | None, effect: Effect
    ) -> None:
        tool_name = name or str(getattr(fn, "__name__", ""))
        summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
        declaration, context_param = _declared(fn, tool_name, arg_docs)
        self._add(
            _Tool(
                name=tool_name,
                description=description if description is not None else summary,
                declaration=declaration,
                handler=fn,
                source="builtin",
                context_param=context_param,
                effect=effect,
            )
        )

    def register(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        handler: Callable[..., Any],
        *,
        source: str = "builtin",
        with_context: bool = False,
        offered: Callable[[], bool] | None = None,
        describe: Describe | None = None,
        effect: Effect = ACTS,
        acts_when: ActsWhen | None = None,
    ) -> None:
        """Register a tool with a ready JSON schema; ``handler(**arguments)`` runs it
        (``with_context``: also given the call's ToolContext as ``CONTEXT_ARG``).
        ``offered``: asked each time the tools are listed; False keeps it out of the
        model's offer (calls still reach the handler, which names what is missing).
        ``describe``: how an approval names a call (``tools/describe.py``).
        ``effect``, ``acts_when``: what it does (:meth:`declare`)."""
        context_param = CONTEXT_ARG if with_context else None
        declaration = schema.from_json_schema(name, copy.deepcopy(parameters))
        tool = _Tool(name, description, declaration, handler, source, context_param, offered)
        tool.describe = describe
        tool.effect, tool.acts_when = effect, acts_when
        self._add(tool)

    def _add(self, tool: _Tool) -> None:
        if not NAME_PATTERN.match(tool.name):
            raise ValueError(f"invalid tool name {tool.name!r}: use 1-64 of [a-zA-Z0-9_-]")
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> None:
        """Remove a tool; unknown names are ignored."""
        self._tools.pop(name, None)

    def unregister_source(self, source: str) -> None:
        for name in [n for n, t in self._tools.items() if t.source == source]:
            del self._tools[name]

    def disable(self, names: Iterable[str]) -> None:
        """Disabled tools are not offered and refuse calls (also if registered later)."""
        self._disabled.update(names)

    def offer_when(self, name: str, offered: Callable[[], bool]) -> None:
        """``name`` is offered to the model only while ``offered()`` is true (see
        :meth:`register`); for tools registered with the decorator."""
        self._tools[name].offered = offered

    def add_rules(self, name: str, rules: str) -> None:
        """Kernel's own rules for ``name``: sent after its description unless SOUL.md
        says something about the tool (:meth:`specs` ``without_rules``)."""
        self._tools[name].rules = rules

    def declare(self, name: str, effect: Effect, acts_when: ActsWhen | None = None) -> None:
        """What ``name`` does (kernel/core/session_modes.py): ``reads`` tools stay in plan
        and read_only, ``acts`` ones (the default) are held back there, ``control`` ones
        are always offered. ``acts_when(arguments)``: a ``reads`` tool whose call acts
        (a browser's click or fill) is refused there, the tool still offered."""
        tool = self._tools[name]
        tool.effect, tool.acts_when = effect, acts_when

    def effect(self, name: str) -> Effect | None:
        """What a registered tool does; None for an unknown name."""
        tool = self._tools.get(name)
        return tool.effect if tool is not None else None

    def read_only(self, name: str) -> bool:
        """Whether no call of ``name`` writes or acts (a control tool only switches the
        session's mode)."""
        tool = self._tools.get(name)
        return tool is not None and tool.effect != ACTS and tool.acts_when is None

    def visible_in(self, name: str, mode: str) -> bool:
        """Whether a session in ``mode`` offers ``name`` to the model (if offered at all)."""
        tool = self._tools.get(name)
        return tool is not None and (not restricted(mode) or tool.effect != ACTS)

    def allowed_in(self, name: str, mode: str, arguments: dict[str, Any] | None = None) -> bool:
        """Whether a call of ``name`` with ``arguments`` may run in a session in ``mode``:
        the one rule the turn, the sidecar's direct calls and ``POST /agent/tools/{name}``
        share (an unknown name is refused elsewhere, as unknown)."""
        tool = self._tools.get(name)
        if tool is None or not restricted(mode) or tool.effect == CONTROL:
            return True
        if tool.effect == ACTS:
            return False
        try:
            return tool.acts_when is None or not tool.acts_when(dict(arguments or {}))
        except Exception as exc:  # a plugin's check that fails: held back, as acting
            log.warning("tool %s: its acts_when failed: %s", name, type(exc).__name__)
            return False

    def require_approval(self, name: str, timeout: float) -> None:
        """Calls to ``name`` run only after the owner approves each one (SPEC §7)."""
        self._approval[name] = timeout

    def needs_approval(self, name: str) -> bool:
        return name in self._approval

    def is_disabled(self, name: str) -> bool:
        return name in self._disabled

    # ------------------------------------------------------------ listing

    def names(self) -> list[str]:
        """The tools offered to the model now."""
        return [t.name for t in self._tools.values() if self._offered(t)]

    def known(self) -> list[str]:
        """Every registered tool, offered now or not."""
        return list(self._tools)

    def specs(self, without_rules: Collection[str] = ()) -> list[ToolSpec]:
        """The offered tools' definitions; ``without_rules``: tools whose rules the
        owner wrote in SOUL.md, sent with their description alone."""
        return [
            ToolSpec(
                t.name,
                f"{t.description} {t.rules}"
                if t.rules and t.name not in without_rules
                else t.description,
                t.declaration.offered(),
            )
            for t in self._tools.values()
            if self._offered(t)
        ]

    def _offered(self, tool: _Tool) -> bool:
        return tool.name not in self._disabled and (tool.offered is None or tool.offered())

    def _callable(self) -> list[str]:
        return [n for n in self._tools if n not in self._disabled]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools and name not in self._disabled

    # ------------------------------------------------------------ calling

    async def call(
        self,
        name: str,
        arguments: str | dict[str, Any] | None,
        context: ToolContext | None = None,
        *,
        repaired: bool = False,
    ) -> ToolOutcome:
        """``repaired``: ``arguments`` is the dict repair_arguments made for the tool
        ``name`` resolves to (the agent repairs once per call): validated, not repaired."""
        resolved = resolve_tool_name(name, self._callable())
        if resolved is None:
            listing = ", ".join(self.names()) or "-"
            content = i18n.t("tool.unknown", name=name, listing=listing)
            return ToolOutcome(name, False, content, {})
        tool = self._tools[resolved]
        try:
            if repaired and isinstance(arguments, dict):
                args = arguments
            else:
                args = repair_arguments(arguments, tool.parameters)
        except ToolError as exc:
            log.warning("tool %s: unrepairable arguments", resolved)
            content = (
                f"invalid arguments for {resolved}: {exc}. "
                "Resend the call with the arguments as one valid JSON object."
            )
            return ToolOutcome(resolved, False, content, {}, exc, rejected=True)
        args, problem = check_arguments(tool.declaration, args)
        if problem is not None:
            log.info("tool %s: rejected arguments", resolved)
            content = f"invalid arguments for {resolved}: {problem}"
            return ToolOutcome(resolved, False, content, args, rejected=True)
        mode = context.session_mode if context is not None else ACT
        if not self.allowed_in(tool.name, mode, args):
            log.info("tool %s: refused in the session's %s mode", tool.name, mode)
            return ToolOutcome(tool.name, False, refused_in_mode(tool.name, mode), args)
        if tool.name in self._approval:
            refusal = await self._approve(tool, args, context)
            if refusal is not None:
                return refusal
        return await self._run(tool, args, context)

    async def _approve(
        self, tool: _Tool, args: dict[str, Any], context: ToolContext | None
    ) -> ToolOutcome | None:
        """Ask the owner; None means approved, otherwise the refusal the model reads."""
        timeout = self._approval[tool.name]
        if context is None or context.ask is None:
            content = i18n.t("tool.no_approver", name=tool.name)
            return ToolOutcome(tool.name, False, content, args)
        display, summary = _described(tool, args)
        question = i18n.t("ask.approval", tool=display, summary=summary).rstrip()  # none: no line
        options = [i18n.t("ask.approve"), i18n.t("ask.deny")]
        answer = await context.ask(
            question, options, kind="approval", seconds=timeout, details=details(args)
        )
        if answer.option == 0:
            log.info("tool %s approved by the owner", tool.name)
            return None
        if answer.outcome is AskOutcome.UNDELIVERED:
            log.info("tool %s: the approval request could not be shown", tool.name)
            content = i18n.t("tool.approval_unshown", name=tool.name)
        elif answer.outcome is AskOutcome.TIMEOUT:
            log.info("tool %s: approval timed out", tool.name)
            content = i18n.t("tool.approval_timeout", name=tool.name, seconds=timeout)
        else:
            log.info("tool %s denied by the owner", tool.name)
            content = i18n.t("tool.denied", name=tool.name)
        return ToolOutcome(tool.name, False, content, args)

    async def _run(
        self, tool: _Tool, args: dict[str, Any], context: ToolContext | None
    ) -> ToolOutcome:
        kwargs = dict(args)
        if tool.context_param is not None:
            kwargs[tool.context_param] = context if context is not None else ToolContext()
        try:
            result = await _invoke(tool.handler, kwargs)
            images = list(result.images) if isinstance(result, ToolReply) else []
            content = render_result(result.text if isinstance(result, ToolReply) else result)
        except Exception as exc:  # CancelledError is a BaseException and propagates
            log.warning("tool %s failed: %s", tool.name, type(exc).__name__)
            return ToolOutcome(tool.name, False, _error_text(exc), args, exc)
        data = None if isinstance(result, str | ToolReply) else result
        return ToolOutcome(tool.name, True, content, args, images=images, data=data)


def refused_in_mode(name: str, mode: str) -> str:
    """What the model (or a caller) reads when ``mode`` holds ``name`` back: why, and how
    to switch (plan: exit_plan_mode, which the owner confirms; read_only: the owner)."""
    key = "tool.refused_in_plan" if mode == PLAN else "tool.refused_read_only"
    return i18n.t(key, name=name)


def _described(tool: _Tool, args: dict[str, Any]) -> tuple[str, str]:
    """The call's display name and one-line summary; a failing describer (a plugin's)
    falls back to the generic one: the question must still be asked."""
    if tool.describe is not None:
        try:
            return tool.describe(args)
        except Exception as exc:
            log.warning("tool %s: describing a call failed: %s", tool.name, type(exc).__name__)
    return generic(tool.name, args)


async def _invoke(handler: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(handler):
        return await handler(**kwargs)
    # Blocking tools must not stall the event loop (and with it every conversation).
    result = await asyncio.to_thread(handler, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def render_result(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def _error_text(exc: BaseException) -> str:
    message = str(exc)
    if isinstance(exc, ToolError):
        return f"error: {message}" if message else "error: the tool failed"
    kind = type(exc).__name__
    return f"error: {kind}: {message}" if message else f"error: {kind}"


# ---------------------------------------------------------------- docstrings

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$"
)
_ARG_LINE = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and ``Args:`` descriptions."""
    lines = doc.expandtabs().splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    i = 0
    while i < len(lines) and not _SECTION.match(lines[i].strip()):
        summary.append(lines[i])
        i += 1
    while i < len(lines):
        header = lines[i]
        i += 1
        body_end = _section_end(lines, i, _indent(header))
        if header.strip() in ("Args:", "Arguments:", "Parameters:"):
            args.update(_parse_args(lines[i:body_end]))
        i = body_end
    return _unwrap_lines("\n".join(summary).strip()), args


_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")


def _unwrap_lines(text: str) -> str:
    """Lines wrapped to the source's width joined (sent with every request, and a model
    reads no line width); paragraphs and list items stay apart."""
    out: list[str] = []
    for line in text.splitlines():
        if out and out[-1] and line.strip() and not _LIST_ITEM.match(line):
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    return "\n".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _section_end(lines: list[str], start: int, header_indent: int) -> int:
    i = start
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > header_indent):
        i += 1
    return i


def _parse_args(body: list[str]) -> dict[str, str]:
    entries = [line for line in body if line.strip()]
    if not entries:
        return {}
    entry_indent = _indent(entries[0])
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in entries:
        match = _ARG_LINE.match(line.strip())
        if _indent(line) <= entry_indent and match:
            current = match.group("name")
            out[current] = [match.group("text").strip()]
        elif current is not None:
            out[current].append(line.strip())
    return {name: " ".join(p for p in parts if p) for name, parts in out.items()}


def _is_context(annotation: Any) -> bool:
    """``ToolContext`` (or ``ToolContext | None``, maybe Annotated) is injected."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if annotation is ToolContext:
        return True
    args = typing.get_args(annotation)
    is_union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return is_union and ToolContext in args and set(args) <= {ToolContext, NoneType}
