"""The one declaration of the sidecar's JSON: pydantic models validate request bodies,
describe response bodies, and produce ``/openapi.json``'s schemas.

- :class:`BodyModel`: the base of every request body. Strict types (``1.5`` is no
  integer, ``"true"`` no boolean), unknown fields ignored, and a ``null`` field counts
  as absent (as the sidecar always read bodies).
- :class:`Shape`: the base of response bodies (documentation only: the handlers build
  plain JSON, and a test checks the answers against these models).
- :func:`refuse`: a refusal in the catalogue's words, raised inside a validator.
- :func:`problem`: a :class:`pydantic.ValidationError` as the sidecar's 400, with the
  catalogue's words (``gw.bad_field``, ``gw.field_required``, …) naming the field.
- :func:`json_schema`: any declared type as an OpenAPI 3.0 schema, its models gathered
  in ``components``.
- Field types with the sidecar's own refusals: :data:`Text` (non-blank),
  :data:`StrList`, :data:`StrMap`, :func:`expecting`; :func:`documented` for a field
  its handler converts on its own (validated as given, documented as its model says).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from kernel.core.i18n import t

REF_PREFIX = "#/components/schemas/"
# Every model of the sidecar is built on its first use (its route's first request, or
# /openapi.json), not at start: ~250 models, a third of a second and megabytes a
# resting Kernel would otherwise spend (issue 37).
LAZY = ConfigDict(defer_build=True)


class BodyModel(BaseModel):
    """A JSON request body: strict types, unknown fields ignored, null is absent."""

    model_config = ConfigDict(strict=True, extra="ignore", **LAZY)

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data


class Shape(BaseModel):
    """A JSON response body (or a part of one); fields beyond those named may appear."""

    model_config = ConfigDict(extra="allow", **LAZY)


class OpenShape(Shape):
    """An object whose fields are not described further (``{"type": "object"}``)."""

    model_config = ConfigDict(
        extra="allow", json_schema_extra={"additionalProperties": True}, **LAZY
    )


def documented_required(*names: str) -> ConfigDict:
    """A body's config whose document lists ``names`` as required although the model
    lets them be absent: its handler refuses their absence in its own words."""

    def extra(schema: dict[str, Any]) -> None:
        required = schema.setdefault("required", [])
        required.extend(n for n in names if n not in required)

    return ConfigDict(strict=True, extra="ignore", json_schema_extra=extra, **LAZY)


# ---------------------------------------------------------------------- field types


def refuse(message: str, /, **params: Any) -> PydanticCustomError:
    """A refusal worded by the catalogue (raised in a validator); ``field`` is filled in
    by :func:`problem` unless given here."""
    return PydanticCustomError("gw", message, {**params, "gw_message": message})


_gw = refuse


def _not_blank(value: str) -> str:
    if not value.strip():
        raise _gw("gw.field_required")
    return value


def expecting(expected: str) -> Any:
    """A wrap validator: any failure inside the value is "field must be <expected>"."""

    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise _gw("gw.bad_field", expected=expected) from None

    return WrapValidator(check)


Text = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]
"""A required string with something in it (blank is "missing")."""
StrList = Annotated[
    list[Annotated[str, Field(min_length=1)]], expecting("array of non-empty strings")
]
StrMap = Annotated[dict[str, str], expecting("object of strings")]


_EXPECTED = {
    "string_type": "string",
    "bool_type": "boolean",
    "int_type": "integer",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
}


def field_of(loc: tuple[int | str, ...]) -> str:
    """A location as the sidecar names fields: ``input[0].content[1]``."""
    field = ""
    for part in loc:
        field += f"[{part}]" if isinstance(part, int) else f".{part}" if field else str(part)
    return field


def problem(exc: ValidationError) -> tuple[str, str]:
    """(message, field) for the first problem, as the sidecar words it."""
    error = exc.errors(include_url=False)[0]
    field = field_of(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "gw":  # a refusal may name its own field (e.g. a variable's name)
        field = str(ctx.get("field", field))
        params = {k: v for k, v in ctx.items() if k not in ("gw_message", "field")}
        return t(str(ctx["gw_message"]), field=field, **params), field
    if kind in ("missing", "string_too_short"):
        return t("gw.field_required", field=field), field
    if kind == "string_too_long":
        return t("gw.field_too_long", field=field, limit=ctx.get("max_length")), field
    if kind == "greater_than_equal":
        return t("gw.field_min", field=field, minimum=ctx.get("ge")), field
    expected = _EXPECTED.get(kind, error["msg"])
    return t("gw.bad_field", field=field, expected=expected), field


# ---------------------------------------------------------------------- OpenAPI


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def json_schema(kind: Any, components: dict[str, Any]) -> dict[str, Any]:
    """``kind``'s schema as OpenAPI 3.0 takes it; its models are added to ``components``."""
    schema = _adapter(kind).json_schema(ref_template=REF_PREFIX + "{model}")
    for name, sub in schema.pop("$defs", {}).items():
        _add(components, name, _openapi(sub))
    return _openapi(schema)


def component(kind: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """A reference to ``kind``, whose schema is added to ``components``."""
    _add(components, kind.__name__, json_schema(kind, components))
    return {"$ref": REF_PREFIX + kind.__name__}


def _add(components: dict[str, Any], name: str, schema: dict[str, Any]) -> None:
    if components.setdefault(name, schema) != schema:
        raise ValueError(f"two different models are both named {name}")


def inline_schema(kind: Any) -> dict[str, Any]:
    """``kind``'s schema with its models written in place (for a field documented by a
    model its handler converts on its own)."""
    schema = _adapter(kind).json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    result: dict[str, Any] = inline(schema)
    return result


@dataclass(slots=True, eq=False)  # keeps WithJsonSchema's hash, for `Annotated[…] | None`
class Documented(WithJsonSchema):
    """A field's documentation by ``kind`` (kept, so a test can validate examples by it)."""

    kind: Any = None


def documented(kind: Any) -> Any:
    """``Annotated`` metadata: a field validated as given, documented as ``kind``."""
    return Documented(inline_schema(kind), kind=kind)


_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")


def _openapi(node: Any) -> Any:
    """JSON Schema (pydantic's, 2020-12) → OpenAPI 3.0.3: ``null`` as ``nullable``,
    ``const`` as a one-value ``enum``, an exclusive bound as the bound and a flag, no
    titles."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "properties":
            out[key] = {name: _openapi(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _openapi(value)
        elif key in _SCHEMA_LISTS:
            out[key] = [_openapi(sub) for sub in value]
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out[key.removeprefix("exclusive").lower()] = value  # 3.0: a bound and a flag
            out[key] = True
        else:
            out[key] = value
    for key in _SCHEMA_LISTS:
        options = out.get(key)
        if not options:
            continue
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == len(options):
            continue
        del out[key]
        if len(rest) == 1:
            only = rest[0]
            out.update(only if "$ref" not in only else {"allOf": [only]})
        else:
            out[key] = rest
        out["nullable"] = True
    return out


__all__ = [
    "BodyModel",
    "component",
    "OpenShape",
    "Shape",
    "StrList",
    "StrMap",
    "Text",
    "Documented",
    "documented",
    "documented_required",
    "expecting",
    "inline_schema",
    "json_schema",
    "field_of",
    "problem",
    "refuse",
]
