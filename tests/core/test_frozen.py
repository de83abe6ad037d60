"""Shared read-only JSON values (kernel/core/frozen.py): what reads them sees plain JSON,
what changes them in place is refused, a copy is an ordinary value again."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from mcp.types import Tool

from kernel.core.frozen import FrozenDict, FrozenList, frozen

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}},
    "required": ["colour"],
}


def test_it_reads_as_the_json_it_was_made_from() -> None:
    shared = frozen(SCHEMA)
    assert shared == SCHEMA and isinstance(shared, dict)
    assert json.dumps(shared) == json.dumps(SCHEMA)
    assert isinstance(shared["properties"]["colour"]["enum"], FrozenList)
    # pydantic (the MCP endpoint's Tool) takes it as the dict it is
    tool = Tool(name="pick", inputSchema=shared)
    assert json.loads(tool.model_dump_json(by_alias=True))["inputSchema"] == SCHEMA


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.__setitem__("type", "array"),
        lambda s: s.pop("required"),
        lambda s: s.update(extra=1),
        lambda s: s.setdefault("extra", 1),
        lambda s: s.clear(),
        lambda s: s["properties"].__delitem__("colour"),
        lambda s: s["required"].append("size"),
        lambda s: s["required"].extend(["size"]),
        lambda s: s["properties"]["colour"]["enum"].sort(),
        lambda s: s["required"].__setitem__(0, "size"),
        lambda s: s["required"].__iadd__(["size"]),
    ],
)
def test_a_change_in_place_is_refused(change: Any) -> None:
    shared = frozen(SCHEMA)
    with pytest.raises(TypeError, match="read-only"):
        change(shared)
    assert shared == SCHEMA


def test_a_copy_is_an_ordinary_value() -> None:
    shared = frozen(SCHEMA)
    for mine in (copy.deepcopy(shared), pickle.loads(pickle.dumps(shared))):
        assert type(mine) is dict and type(mine["properties"]["colour"]["enum"]) is list
        mine["properties"]["colour"]["enum"].append("green")
        assert shared == SCHEMA
    top = copy.copy(shared)
    assert type(top) is dict
    top["type"] = "array"
    assert shared["type"] == "object"
    assert type(FrozenDict(a=1).__copy__()) is dict
