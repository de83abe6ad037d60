# The tools below are defined under postponed evaluation on purpose: schema
# generation must resolve string annotations.
from __future__ import annotations

import asyncio
import copy
import json
import logging
import threading
from typing import Annotated, Any, Literal, Optional

import pytest

from kernel.core.errors import ToolError
from kernel.core.i18n import t
from kernel.tools.registry import ToolContext, ToolRegistry


@pytest.fixture
def reg() -> ToolRegistry:
    return ToolRegistry()


def props(reg: ToolRegistry, name: str) -> dict[str, Any]:
    spec = next(s for s in reg.specs() if s.name == name)
    return spec.parameters["properties"]


# ---------------------------------------------------------------- schemas


def test_a_listed_schema_is_shared_and_read_only(reg: ToolRegistry) -> None:
    """Issue 37: every listing shares one frozen copy of a schema (no copy per tool per
    turn). A caller that changes it in place (an adapter marking it) is refused, so no
    later listing can change; a copy of it is the caller's own to change."""

    @reg.tool
    def pick(colour: Literal["red", "blue"], count: int = 1) -> str:
        """Pick."""
        return colour * count

    first = props(reg, "pick")
    with pytest.raises(TypeError, match="read-only"):
        first["colour"]["enum"].append("green")
    with pytest.raises(TypeError, match="read-only"):
        first["count"]["default"] = 9
    mine = copy.deepcopy(first)
    mine["colour"]["enum"].append("green")
    mine["count"]["default"] = 9
    second = props(reg, "pick")
    assert second is first  # shared, not made again
    assert second["colour"]["enum"] == ["red", "blue"]
    assert second["count"]["default"] == 1


def test_schema_for_every_supported_annotation(reg: ToolRegistry) -> None:
    @reg.tool
    def everything(
        text: str,
        n: int,
        ratio: float,
        flag: bool,
        tags: list[str],
        ids: list[int],
        extra: dict[str, Any],
        maybe: str | None,
        old_style: Optional[int] = None,  # noqa: UP045 - the Optional spelling is under test
        mode: Literal["fast", "slow"] = "fast",
        level: Literal[1, 2, 3] = 1,
        limit: int = 10,
        note: Annotated[str, "a note"] = "",
    ) -> str:
        return ""

    (spec,) = reg.specs()
    assert spec.parameters["type"] == "object"
    assert "additionalProperties" not in spec.parameters  # others are dropped, not refused
    assert spec.parameters["required"] == [
        "text", "n", "ratio", "flag", "tags", "ids", "extra", "maybe"
    ]  # fmt: skip
    assert spec.parameters["properties"] == {
        "text": {"type": "string"},
        "n": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "extra": {"type": "object"},
        "maybe": {"type": ["string", "null"]},
        "old_style": {"type": "integer"},  # optional: leaving it out says "none"
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "level": {"type": "integer", "enum": [1, 2, 3], "default": 1},
        "limit": {"type": "integer", "default": 10},
        "note": {"type": "string", "description": "a note", "default": ""},
    }


async def test_nullable_literal_allows_null_in_enum(reg: ToolRegistry) -> None:
    @reg.tool
    def pick(choice: Literal["a", "b"] | None = None, must: Literal["x"] | None = "x") -> str:
        return f"{choice} {must}"

    # Optional with a null default: offered as the plain enum (leaving it out says
    # "none"); a null default that is not there keeps null in the enum.
    assert props(reg, "pick") == {
        "choice": {"type": "string", "enum": ["a", "b"]},
        "must": {"type": ["string", "null"], "enum": ["x", None], "default": "x"},
    }
    assert (await reg.call("pick", {"choice": None, "must": None})).content == "None None"
    assert (await reg.call("pick", {"choice": "b"})).content == "b x"
    refused = await reg.call("pick", {"choice": "c"})
    assert not refused.ok and "choice" in refused.content


async def test_optional_arguments_still_take_null_and_extras_are_dropped(
    reg: ToolRegistry,
) -> None:
    @reg.tool
    def greet(name: str, title: str | None = None, times: int | None = None) -> str:
        return f"{title or ''}{name}x{times}"

    spec = next(s for s in reg.specs() if s.name == "greet").parameters
    assert spec == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "title": {"type": "string"},
            "times": {"type": "integer"},
        },
        "required": ["name"],
    }
    outcome = await reg.call("greet", {"name": "Li", "title": None, "times": None, "bogus": 1})
    assert (outcome.ok, outcome.content, outcome.arguments) == (True, "LixNone", {"name": "Li"})
    bad = await reg.call("greet", {"name": "Li", "times": "many"})
    assert not bad.ok and "times" in bad.content


def test_docstring_summary_and_args(reg: ToolRegistry) -> None:
    @reg.tool
    def web_search(query: str, count: int = 5) -> str:
        """Search the web.

        Returns the top results as text.

        Args:
            query: What to look for,
                in plain words.
            count (int): How many results.

        Returns:
            Text lines.
        """
        return ""

    (spec,) = reg.specs()
    assert spec.description == "Search the web.\n\nReturns the top results as text."
    assert spec.parameters["properties"]["query"]["description"] == (
        "What to look for, in plain words."
    )
    assert spec.parameters["properties"]["count"]["description"] == "How many results."


def test_wrapped_docstring_lines_are_joined_paragraphs_and_lists_kept(reg: ToolRegistry) -> None:
    @reg.tool
    def tidy() -> str:
        """Tidy the notes folder, merging
        duplicates and sorting them.

        Steps:
        - find duplicates,
          then merge them
        - sort
        1. done
        """
        return ""

    assert reg.specs()[0].description == (
        "Tidy the notes folder, merging duplicates and sorting them.\n\n"
        "Steps:\n- find duplicates, then merge them\n- sort\n1. done"
    )


def test_decorator_name_and_description_override(reg: ToolRegistry) -> None:
    @reg.tool(name="renamed", description="Custom.")
    def original() -> str:
        """Ignored."""
        return ""

    assert [(s.name, s.description) for s in reg.specs()] == [("renamed", "Custom.")]
    assert original() == ""  # the decorator returns the function itself


async def test_context_is_injected_not_offered(reg: ToolRegistry) -> None:
    @reg.tool
    def whoami(ctx: ToolContext | None, loud: bool = False) -> str:
        assert ctx is not None
        return ctx.conversation.upper() if loud else ctx.conversation

    assert set(props(reg, "whoami")) == {"loud"}
    assert "required" not in reg.specs()[0].parameters  # nothing is
    ctx = ToolContext(session_id=7, conversation="telegram:123")
    outcome = await reg.call("whoami", {"loud": True}, ctx)
    assert (outcome.ok, outcome.content, outcome.arguments) == (
        True,
        "TELEGRAM:123",
        {"loud": True},
    )
    default = await reg.call("whoami", None)
    assert (default.ok, default.content) == (True, "")


@pytest.mark.parametrize("name", ["", "has space", "dots.not.ok", "x" * 65, "ümlaut"])
def test_bad_names_are_refused(reg: ToolRegistry, name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        reg.register(name, "d", {"type": "object"}, lambda: "")


def test_duplicate_names_are_refused(reg: ToolRegistry) -> None:
    reg.register("dup", "d", {"type": "object"}, lambda: "")
    with pytest.raises(ValueError, match="already registered"):

        @reg.tool(name="dup")
        def other() -> str:
            return ""


def test_unsupported_annotation_names_the_parameter(reg: ToolRegistry) -> None:
    with pytest.raises(TypeError, match="'when'"):

        @reg.tool
        def bad(when: set[str]) -> str:
            return ""

    assert reg.names() == []


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda x: "", "'x' has no type annotation"),
        (lambda: _union_tool, "'x': unsupported union"),
        (lambda: _varargs_tool, "'items' must be passable by keyword"),
        (lambda: _list_of_dicts_tool, "'rows': unsupported list item type"),
        (lambda: _unresolvable_tool, "cannot resolve the type hints"),
    ],
)
def test_other_unsupported_signatures_fail_early(reg: ToolRegistry, fn: Any, message: str) -> None:
    target = fn if message.startswith("'x' has") else fn()
    with pytest.raises(TypeError, match=message):
        reg.tool(target, name="t")
    assert reg.names() == []


def _union_tool(x: int | str) -> str:
    return ""


def _varargs_tool(*items: str) -> str:
    return ""


def _list_of_dicts_tool(rows: list[dict[str, Any]]) -> str:
    return ""


def _unresolvable_tool(x: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
    return ""


# ---------------------------------------------------------------- listing


def test_names_specs_disable_unregister(reg: ToolRegistry) -> None:
    for name in ("a", "b", "c"):
        reg.register(name, f"tool {name}", {"type": "object", "properties": {}}, lambda: "")
    reg.register("m1", "mcp", {"type": "object"}, lambda: "", source="mcp:x")
    reg.register("m2", "mcp", {"type": "object"}, lambda: "", source="mcp:x")
    reg.disable(["b", "later"])
    assert reg.names() == ["a", "c", "m1", "m2"]
    assert [s.name for s in reg.specs()] == ["a", "c", "m1", "m2"]
    assert "a" in reg and "b" not in reg and "zzz" not in reg

    reg.unregister_source("mcp:x")
    reg.unregister("a")
    reg.unregister("never-registered")
    reg.register("later", "d", {"type": "object"}, lambda: "")
    assert reg.names() == ["c"]


def test_specs_are_read_only(reg: ToolRegistry) -> None:
    given = {"type": "object", "properties": {}}
    reg.register("t", "d", given, lambda: "")
    with pytest.raises(TypeError, match="read-only"):
        reg.specs()[0].parameters["properties"]["x"] = {}
    given["properties"]["y"] = {}  # nor does the registrant's own dict reach a listing
    assert reg.specs()[0].parameters == {"type": "object", "properties": {}}


# ---------------------------------------------------------------- calling


async def test_sync_tool_runs_in_a_worker_thread(reg: ToolRegistry) -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    @reg.tool
    def blocking(x: int) -> dict[str, Any]:
        threads.append(threading.get_ident())
        return {"double": x * 2, "text": "中文"}

    outcome = await reg.call("blocking", '{"x": 21}')
    assert outcome.ok
    assert outcome.content == '{"double": 42, "text": "中文"}'
    assert threads and threads[0] != loop_thread


async def test_async_tool_runs_on_the_loop(reg: ToolRegistry) -> None:
    loop_thread = threading.get_ident()

    @reg.tool
    async def fetch(url: str) -> str:
        await asyncio.sleep(0)
        assert threading.get_ident() == loop_thread
        return f"got {url}"

    outcome = await reg.call("fetch", {"url": "https://example.org"})
    assert (outcome.name, outcome.ok, outcome.content) == ("fetch", True, "got https://example.org")
    assert outcome.arguments == {"url": "https://example.org"}
    assert outcome.error is None


async def test_registered_handler_gets_keyword_arguments(reg: ToolRegistry) -> None:
    async def handler(**kwargs: Any) -> Any:
        return sorted(kwargs.items())

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    reg.register("mcp_tool", "d", schema, handler, source="mcp:s")
    outcome = await reg.call("mcp_tool", {"a": 1, "b": 2})
    assert (outcome.ok, outcome.content) == (True, '[["a", 1], ["b", 2]]')


async def test_non_string_results_are_json(reg: ToolRegistry) -> None:
    reg.register("none", "d", {"type": "object"}, lambda: None)
    reg.register("obj", "d", {"type": "object"}, lambda: {"when": threading})
    assert (await reg.call("none", None)).content == "null"
    assert (await reg.call("obj", None)).content.startswith('{"when": "<module')


async def test_raising_tool_becomes_a_readable_error(
    reg: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    @reg.tool
    def broken(secret: str) -> str:
        raise ValueError("disk is full")

    @reg.tool
    async def refused() -> str:
        raise ToolError("the file does not exist")

    with caplog.at_level(logging.WARNING, logger="kernel.tools.registry"):
        outcome = await reg.call("broken", {"secret": "p4ssw0rd"})
    assert (outcome.ok, outcome.content) == (False, "error: ValueError: disk is full")
    assert isinstance(outcome.error, ValueError)
    assert outcome.arguments == {"secret": "p4ssw0rd"}
    assert "broken" in caplog.text and "ValueError" in caplog.text
    assert "p4ssw0rd" not in caplog.text and "disk is full" not in caplog.text

    refusal = await reg.call("refused", {})
    assert (refusal.ok, refusal.content) == (False, "error: the file does not exist")
    assert isinstance(refusal.error, ToolError)


async def test_unknown_and_disabled_tools(reg: ToolRegistry) -> None:
    reg.register("alpha", "d", {"type": "object"}, lambda: "a")
    reg.register("beta", "d", {"type": "object"}, lambda: "b")
    unknown = await reg.call("gamma", {})
    assert (unknown.name, unknown.ok) == ("gamma", False)
    assert unknown.content == t("tool.unknown", name="gamma", listing="alpha, beta")

    reg.disable(["beta"])
    disabled = await reg.call("beta", {})
    assert (disabled.ok, disabled.content) == (
        False,
        t("tool.unknown", name="beta", listing="alpha"),
    )


async def test_name_is_resolved(reg: ToolRegistry) -> None:
    calls: list[str] = []

    @reg.tool
    def delegate_to_cli(task: str) -> str:
        calls.append(task)
        return "done"

    outcome = await reg.call("functions.exec_command", '{"cmd": "ls -la"}')
    assert (outcome.name, outcome.ok, outcome.arguments) == (
        "delegate_to_cli",
        True,
        {"task": "ls -la"},
    )
    assert calls == ["ls -la"]


async def test_unrepairable_arguments_ask_for_valid_json(reg: ToolRegistry) -> None:
    @reg.tool
    def echo(text: str) -> str:
        return text

    outcome = await reg.call("echo", "this is ] not json")
    assert not outcome.ok
    assert outcome.arguments == {}
    assert isinstance(outcome.error, ToolError)
    assert outcome.content.startswith("invalid arguments for echo:")
    assert "valid JSON" in outcome.content


async def test_repaired_arguments_are_used(reg: ToolRegistry) -> None:
    @reg.tool
    def search(query: str, count: int = 3) -> str:
        return f"{query}/{count}"

    truncated = await reg.call("search", '{"query": "abc')
    assert (truncated.ok, truncated.content, truncated.arguments) == (
        True,
        "abc/3",
        {"query": "abc"},
    )
    wrapped = await reg.call("search", {"input": {"q": "x", "num_results": "7"}})
    assert (wrapped.ok, wrapped.content) == (True, "x/7")
    assert wrapped.arguments == {"query": "x", "count": 7}


async def test_missing_required_arguments(reg: ToolRegistry) -> None:
    @reg.tool
    def move(src: str, dst: str, force: bool = False) -> str:
        return "moved"

    outcome = await reg.call("move", {"force": True})
    assert not outcome.ok
    assert outcome.content == "invalid arguments for move: missing required parameter(s): src, dst"


async def test_wrong_types_and_trivial_coercions(reg: ToolRegistry) -> None:
    @reg.tool
    def calc(n: int, x: float, on: bool, ids: list[int] | None = None) -> str:
        return f"{n!r} {x!r} {on!r} {ids!r}"

    good = await reg.call("calc", {"n": "3", "x": 2, "on": "true", "ids": ["1", 2]})
    assert (good.ok, good.content) == (True, "3 2 True [1, 2]")
    floaty = await reg.call("calc", {"n": 4.0, "x": "1.5", "on": False})
    assert (floaty.ok, floaty.content) == (True, "4 1.5 False None")

    bad_int = await reg.call("calc", {"n": "3.5", "x": 1, "on": True})
    assert (bad_int.ok, bad_int.content) == (
        False,
        "invalid arguments for calc: parameter 'n' must be an integer, got a string",
    )
    bad_bool = await reg.call("calc", {"n": 1, "x": 1, "on": "yes"})
    assert "parameter 'on' must be a boolean" in bad_bool.content
    not_bool_from_int = await reg.call("calc", {"n": True, "x": 1, "on": True})
    assert "parameter 'n' must be an integer, got a boolean" in not_bool_from_int.content
    bad_item = await reg.call("calc", {"n": 1, "x": 1, "on": True, "ids": ["a"]})
    assert "parameter 'ids' item 0 must be an integer" in bad_item.content


async def test_null_for_an_optional_parameter_means_default(reg: ToolRegistry) -> None:
    @reg.tool
    def page(n: int = 1) -> str:
        return str(n)

    outcome = await reg.call("page", {"n": None})
    assert (outcome.ok, outcome.content, outcome.arguments) == (True, "1", {})


async def test_enum_violation_lists_allowed_values(reg: ToolRegistry) -> None:
    @reg.tool
    def speed(mode: Literal["fast", "slow"]) -> str:
        return mode

    outcome = await reg.call("speed", {"mode": "medium"})
    assert (outcome.ok, outcome.content) == (
        False,
        'invalid arguments for speed: parameter \'mode\' must be one of: "fast", "slow"',
    )
    assert (await reg.call("speed", {"mode": "slow"})).content == "slow"


async def test_unknown_keys_are_dropped(reg: ToolRegistry) -> None:
    @reg.tool
    def only(a: str) -> str:
        return a

    outcome = await reg.call("only", {"a": "x", "hallucinated": 1})
    assert (outcome.ok, outcome.content, outcome.arguments) == (True, "x", {"a": "x"})


async def test_cancelled_call_propagates(reg: ToolRegistry) -> None:
    started = asyncio.Event()

    @reg.tool
    async def slow() -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    task = asyncio.create_task(reg.call("slow", {}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_tool_raising_cancelled_error_is_not_swallowed(reg: ToolRegistry) -> None:
    @reg.tool
    async def self_cancel() -> str:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await reg.call("self_cancel", {})


# ---------------------------------------------------------------- approval


async def test_approval_gate_asks_first_and_refuses_where_nobody_can_answer(
    reg: ToolRegistry,
) -> None:
    from kernel.core.asks import Answer, AskOutcome

    ran: list[str] = []

    @reg.tool
    def launch(target: str) -> str:
        """Launch something."""
        ran.append(target)
        return "launched"

    reg.require_approval("launch", 5.0)
    asked: list[tuple[str, list[str], str, float, str]] = []

    def asker(choice: int | None) -> Any:
        async def ask(
            question: str, options: list[str], *, kind: str, seconds: float, details: str
        ) -> Answer:
            asked.append((question, options, kind, seconds, details))
            if choice is None:
                return Answer(AskOutcome.TIMEOUT)
            return Answer(AskOutcome.ANSWERED, choice)

        return ask

    nobody = await reg.call("launch", {"target": "a"}, ToolContext())
    assert not nobody.ok and nobody.content == t("tool.no_approver", name="launch") and ran == []

    denied = await reg.call("launch", {"target": "b"}, ToolContext(ask=asker(1)))
    assert not denied.ok and denied.content == t("tool.denied", name="launch") and ran == []

    late = await reg.call("launch", {"target": "c"}, ToolContext(ask=asker(None)))
    assert (
        not late.ok
        and late.content == t("tool.approval_timeout", name="launch", seconds=5.0)
        and ran == []
    )

    approved = await reg.call("launch", {"target": "d"}, ToolContext(ask=asker(0)))
    assert approved.ok and approved.content == "launched" and ran == ["d"]
    question, options, kind, seconds, details = asked[-1]
    # The tool by name and the call in one line; the full arguments beside it.
    assert question.endswith("launch\ntarget=d") and len(options) == 2
    assert json.loads(details) == {"target": "d"}
    assert (kind, seconds) == ("approval", 5.0)


def _factory(reg: ToolRegistry, choices: tuple[str, ...], limit: int) -> None:
    """Like a built-in tool's factory: a new function per registry (per Kernel); its
    annotation evaluated here (this module postpones them)."""

    def pick(which: str, count: int = limit) -> str:
        """Pick one.

        Args:
            which: the one to pick
        """
        return f"{which} {count}"

    pick.__annotations__["which"] = Literal[choices]
    reg.tool(pick)


def test_a_factorys_tool_is_declared_once_and_a_change_declares_it_anew() -> None:
    """The declaration of the same code, annotations and defaults is built once per
    process (~6 ms a tool at every Kernel start); a different annotation or default
    (the same code) gets its own, and a spec handed out is read-only."""
    first, second, other, wider = (ToolRegistry() for _ in range(4))
    _factory(first, ("a", "b"), 3)
    _factory(second, ("a", "b"), 3)
    _factory(other, ("a", "b"), 5)
    _factory(wider, ("a", "b", "c"), 3)
    tools = [reg._tools["pick"] for reg in (first, second, other, wider)]  # noqa: SLF001
    assert tools[0].declaration is tools[1].declaration
    assert tools[2].declaration is not tools[0].declaration
    assert props(other, "pick")["count"]["default"] == 5
    assert props(wider, "pick")["which"]["enum"] == ["a", "b", "c"]
    assert props(first, "pick")["which"]["enum"] == ["a", "b"]
    with pytest.raises(TypeError, match="read-only"):  # shared by both registries
        props(first, "pick")["which"]["enum"].append("x")
    assert props(second, "pick")["which"]["enum"] == ["a", "b"]


# ---------------------------------------------------------------- session modes


async def test_what_a_tool_does_decides_what_plan_and_read_only_leave(reg: ToolRegistry) -> None:
    @reg.tool
    def write(text: str) -> str:  # declares nothing: it acts
        return f"wrote {text}"

    @reg.tool(effect="reads")
    def read(path: str) -> str:
        return f"read {path}"

    def browse(action: str) -> str:
        return f"did {action}"

    # A browser reads, but its clicks act: offered everywhere, each call checked.
    schema = {"type": "object", "properties": {"action": {"type": "string"}}}
    reg.register("browse", "browse", schema, browse, effect="reads")
    reg.declare("browse", "reads", acts_when=lambda args: args.get("action") == "click")

    for mode in ("plan", "read_only"):
        assert [n for n in reg.names() if reg.visible_in(n, mode)] == ["read", "browse"]
        context = ToolContext(session_mode=mode)
        refused = await reg.call("write", {"text": "x"}, context)
        assert not refused.ok and "write" in refused.content and "/mode act" in refused.content
        assert (await reg.call("read", {"path": "a"}, context)).content == "read a"
        assert (await reg.call("browse", {"action": "open"}, context)).content == "did open"
        assert not (await reg.call("browse", {"action": "click"}, context)).ok
    assert (
        "exit_plan_mode"
        in (await reg.call("write", {"text": "x"}, ToolContext(session_mode="plan"))).content
    )
    assert (await reg.call("write", {"text": "x"}, ToolContext())).content == "wrote x"
    assert reg.read_only("read") and not reg.read_only("browse") and not reg.read_only("write")
