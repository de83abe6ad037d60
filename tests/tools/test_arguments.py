"""Tool arguments declared once: the schema offered and the check come from the same
pydantic model, for Python tools (from the signature) and extension tools (from their
JSON schema). Calls go through ToolRegistry.call with the JSON text a model sends."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from kernel.tools.registry import ToolRegistry


@pytest.fixture
def reg() -> ToolRegistry:
    return ToolRegistry()


def spec_of(reg: ToolRegistry, name: str) -> dict[str, Any]:
    return next(s.parameters for s in reg.specs() if s.name == name)


async def test_a_fractional_number_for_an_integer_is_refused_with_the_value(
    reg: ToolRegistry,
) -> None:
    seen: list[int] = []

    @reg.tool
    def page(n: int, ids: list[int] | None = None) -> str:
        seen.append(n)
        return str(n)

    refused = await reg.call("page", '{"n": 2.5}')
    assert (refused.ok, refused.content) == (
        False,
        "invalid arguments for page: parameter 'n' must be an integer, "
        "got 2.5 (a number with a fractional part)",
    )
    item = await reg.call("page", '{"n": 1, "ids": [3, 0.5]}')
    assert item.content == (
        "invalid arguments for page: parameter 'ids' item 1 must be an integer, "
        "got 0.5 (a number with a fractional part)"
    )
    assert seen == []  # never run with a guessed value
    # Lax where nothing is guessed: a whole number in any spelling is that integer.
    for sent in ('{"n": "2"}', '{"n": 2.0}', '{"n": " 2 "}'):
        outcome = await reg.call("page", sent)
        assert (outcome.ok, outcome.content, outcome.arguments) == (True, "2", {"n": 2}), sent
    assert seen == [2, 2, 2]


async def test_an_extension_tool_is_checked_against_its_own_schema(reg: ToolRegistry) -> None:
    calls: list[dict[str, Any]] = []

    async def handler(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "ok"

    schema = {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "level": {"type": "integer", "enum": [1, 2]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "when": {"type": "string", "format": "date-time"},
        },
        "required": ["count"],
    }
    reg.register("remote", "an MCP tool", schema, handler, source="mcp:x")
    assert spec_of(reg, "remote") == schema  # offered exactly as the server gave it

    fraction = await reg.call("remote", '{"count": 2.5}')
    assert fraction.content == (
        "invalid arguments for remote: parameter 'count' must be an integer, "
        "got 2.5 (a number with a fractional part)"
    )
    boolean = await reg.call("remote", '{"count": 1, "level": true}')
    assert (
        boolean.content
        == "invalid arguments for remote: parameter 'level' must be an integer, got a boolean"
    )
    outside = await reg.call("remote", '{"count": 1, "level": 3}')
    assert outside.content == "invalid arguments for remote: parameter 'level' must be one of: 1, 2"
    tag = await reg.call("remote", '{"count": 1, "tags": ["a", 7]}')
    assert tag.content == (
        "invalid arguments for remote: parameter 'tags' item 1 must be a string, got a number"
    )
    assert calls == []

    good = await reg.call("remote", '{"count": "3", "level": 2, "when": "soon", "more": [1]}')
    assert good.ok and calls == [{"count": 3, "level": 2, "when": "soon", "more": [1]}]


def test_the_schema_is_the_models_own(reg: ToolRegistry) -> None:
    @reg.tool
    def search(
        query: Annotated[str, Field(min_length=1, description="words to look for")],
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
        weights: dict[str, float] | None = None,
    ) -> str:
        """Search.

        Args:
            limit: how many results at most
        """
        return ""

    assert spec_of(reg, "search") == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "words to look for"},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 50,
                "default": 5,
                "description": "how many results at most",
            },
            "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "required": ["query"],
    }


async def test_declared_bounds_and_values_are_checked(reg: ToolRegistry) -> None:
    @reg.tool
    def search(
        query: Annotated[str, Field(min_length=1)],
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
        weights: dict[str, float] | None = None,
    ) -> str:
        return f"{query}/{limit}/{weights}"

    too_many = await reg.call("search", '{"query": "x", "limit": 70}')
    assert too_many.content == (
        "invalid arguments for search: parameter 'limit': input should be less than or equal to 50"
    )
    empty = await reg.call("search", '{"query": ""}')
    assert "parameter 'query': string should have at least 1 character" in empty.content
    weight = await reg.call("search", '{"query": "x", "weights": {"a": 1, "b": "heavy"}}')
    assert weight.content == (
        "invalid arguments for search: parameter 'weights' key \"b\" must be a number, got a string"
    )
    good = await reg.call("search", '{"query": "x", "weights": {"a": "0.5"}}')
    assert (good.ok, good.content) == (True, "x/5/{'a': 0.5}")


async def test_parameter_names_that_a_model_class_would_shadow(reg: ToolRegistry) -> None:
    @reg.tool
    def odd(json: str, schema: int = 0, model_config: bool = False) -> str:
        return f"{json}/{schema}/{model_config}"

    assert list(spec_of(reg, "odd")["properties"]) == ["json", "schema", "model_config"]
    outcome = await reg.call("odd", '{"json": "a", "schema": "2", "model_config": "true"}')
    assert (outcome.ok, outcome.content) == (True, "a/2/True")
