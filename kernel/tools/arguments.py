"""A tool call's arguments checked against the tool's declaration
(:mod:`kernel.tools.schema`), and the refusal the model reads when they do not fit: it
names the parameter, what it must be and what came (``parameter 'n' must be an integer,
got 2.5 (a number with a fractional part)``)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from kernel.tools.schema import Declaration

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}
# Refusals of a bound declared with pydantic's Field (max_length, le, ...): its own words.
_BOUNDS = frozenset(
    {
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "too_short",
        "too_long",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "multiple_of",
    }
)


def check(declaration: Declaration, args: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The checked arguments (in the order given) and None, or the arguments as given
    and the problem in words."""
    schema = declaration.schema
    properties = _properties(schema)
    required = _required(schema)
    if schema.get("additionalProperties") is False:
        args = {k: v for k, v in args.items() if k in properties}
    # Models send null for "not given": the default applies.
    given = {
        k: v
        for k, v in args.items()
        if v is not None or k in required or _nullable(properties.get(k))
    }
    try:
        checked = declaration.model.model_validate(given)
    except ValidationError as exc:
        return args, _problem(exc.errors(include_url=False), given, properties, required)
    return _values(checked, given), None


def _values(checked: BaseModel, given: dict[str, Any]) -> dict[str, Any]:
    fields = type(checked).model_fields
    values = dict(checked.model_extra or {})
    for name in checked.model_fields_set & set(fields):
        values[fields[name].alias or name] = getattr(checked, name)
    return {k: values[k] for k in given if k in values}


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _required(schema: dict[str, Any]) -> list[str]:
    required = schema.get("required")
    return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []


def _kinds(prop: Any) -> list[str]:
    kind = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(kind, str):
        return [kind]
    return [k for k in kind if isinstance(k, str)] if isinstance(kind, list) else []


def _nullable(prop: Any) -> bool:
    kinds = _kinds(prop)
    return not kinds or "null" in kinds


def _problem(
    errors: list[ErrorDetails],
    given: dict[str, Any],
    properties: dict[str, Any],
    required: list[str],
) -> str:
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing" and e["loc"]]
    if missing:
        ordered = [r for r in required if r in missing] + [m for m in missing if m not in required]
        return f"missing required parameter(s): {', '.join(dict.fromkeys(ordered))}"
    order = list(given)

    def position(error: ErrorDetails) -> int:
        key = error["loc"][0] if error["loc"] else None
        return order.index(key) if key in order else len(order)

    return _describe(min(errors, key=position), given, properties)


def _describe(error: ErrorDetails, given: dict[str, Any], properties: dict[str, Any]) -> str:
    if not error["loc"] or error["loc"][0] not in given:
        return error["msg"]
    key = str(error["loc"][0])
    value, prop = given[key], properties.get(key)
    where = [f"parameter '{key}'"]
    for part in error["loc"][1:]:
        if isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value):
            where.append(f"item {part}")
            value, prop = value[part], prop.get("items") if isinstance(prop, dict) else None
        elif isinstance(part, str) and isinstance(value, dict) and part in value:
            where.append(f"key {json.dumps(part, ensure_ascii=False)}")
            extra = prop.get("additionalProperties") if isinstance(prop, dict) else None
            value, prop = value[part], extra
        # any other part names a member of a union: the value is the same
    subject = " ".join(where)
    enum = prop.get("enum") if isinstance(prop, dict) else None
    if error["type"] in ("enum", "literal_error") and isinstance(enum, list):
        allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in enum)
        return f"{subject} must be one of: {allowed}"
    if error["type"] in _BOUNDS:
        return f"{subject}: {error['msg'][:1].lower()}{error['msg'][1:]}"
    kinds = _kinds(prop)
    if not kinds:
        return f"{subject}: {error['msg']}"
    expected = " or ".join(_TYPE_WORDS.get(k, k) for k in kinds)
    if isinstance(value, float) and not value.is_integer() and "integer" in kinds:
        return f"{subject} must be {expected}, got {value!r} (a number with a fractional part)"
    return f"{subject} must be {expected}, got {_json_type(value)}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
