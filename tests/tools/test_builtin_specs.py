"""The built-in tools as a started Kernel offers them: each says what the model needs,
once (issue 16, lean by default)."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim


def nulls(schema: Any) -> list[str]:
    """Where a schema still spells "optional" as a null default."""
    if isinstance(schema, dict):
        found = [json.dumps(schema)] if "default" in schema and schema["default"] is None else []
        return found + [n for v in schema.values() for n in nulls(v)]
    if isinstance(schema, list):
        return [n for v in schema for n in nulls(v)]
    return []


async def test_the_built_in_tools_are_lean(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    specs = {s.name: s for s in kernel.tools.specs()}
    assert {"memory_add", "memory_search", "memory_list", "memory_delete", "ask_user"} <= set(specs)
    for name, spec in specs.items():
        assert spec.description.strip(), name
        params = spec.parameters
        assert params["type"] == "object" and "additionalProperties" not in params, name
        assert params.get("required", ["-"]) != [], name  # an empty list says nothing
        assert nulls(params) == [], name
        for key, prop in params["properties"].items():
            text = prop.get("description", "")
            # A parameter's words are not the tool's words again.
            assert not text or text not in spec.description, (name, key)
    # The guide in the system prompt does not list them again.
    layers = await kernel.agent.prompt.layers("你好")
    guide = next(layer.text for layer in layers if layer.name == "tools")
    assert not [name for name in specs if name in guide]
