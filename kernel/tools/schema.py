"""A tool's arguments declared once, as a pydantic model: the JSON schema the model is
offered and the check its arguments pass come from the same declaration.

- A Python tool declares its arguments by its signature (as simonw/llm does with
  ``pydantic.create_model``); docstring ``Args:`` lines or ``Annotated[X, "text"]`` give
  the descriptions. Supported: ``str int float bool``, ``Literal[...]``, ``list[scalar]``,
  ``dict[str, scalar | Any]``, ``Any`` and ``X | None`` (a schema every provider takes);
  anything else fails at registration, naming the parameter.
- An extension (MCP) tool brings a JSON schema: it is offered as given and checked by a
  model read from it (``type``, ``enum``, ``items``, ``required``,
  ``additionalProperties: false``); what that reading does not know is the tool's
  business, as with any server-side check.

Both check the same way (pydantic's lax mode): ``"3"`` and ``3.0`` are the integer 3,
``"1.5"`` the number 1.5, ``"true"`` the boolean; ``2.5`` is no integer, a boolean no
number, ``"yes"`` no boolean. :func:`kernel.tools.arguments.check` turns a refusal into
words the model can act on.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from types import NoneType
from typing import Annotated, Any, Literal, Union, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    create_model,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic.types import AllowInfNan, Strict
from pydantic_core import PydanticCustomError, PydanticUndefined, core_schema

from kernel.core.frozen import frozen

# ---------------------------------------------------------------- the scalar types


def _not_boolean(value: Any) -> Any:
    if isinstance(value, bool):  # an int to Python, never a number to a model
        raise PydanticCustomError("boolean_not_number", "a boolean is not a number")
    return value


def _boolean_word(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def _scalar(kind: type, extras: tuple[Any, ...] = ()) -> Any:
    """The checked type of a scalar, with a declaration's own bounds (``Field(le=50)``)
    on the core type, where the JSON schema shows them."""
    if kind is int:
        return Annotated[int, *extras, BeforeValidator(_not_boolean)]
    if kind is float:  # an integer stays one (PEP 484: an int is a float); finite only
        whole = Annotated[int, *extras] if extras else int
        members = whole | Annotated[float, *extras, AllowInfNan(False)]
        return Annotated[members, BeforeValidator(_not_boolean)]
    if kind is bool:
        return Annotated[bool, *extras, Strict(), BeforeValidator(_boolean_word)]
    return Annotated[str, *extras] if extras else str


_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class _OneOf:
    """An enum check after the type's own: ``True`` is not ``1`` here."""

    values: tuple[Any, ...]

    def __call__(self, value: Any) -> Any:
        for allowed in self.values:
            if value == allowed and isinstance(value, bool) == isinstance(allowed, bool):
                return allowed
        raise PydanticCustomError("enum", "not one of the allowed values")


def _enum(base: Any, values: tuple[Any, ...], schema: dict[str, Any] | None) -> Any:
    checked = Annotated[base, AfterValidator(_OneOf(values))]
    return checked if schema is None else Annotated[checked, WithJsonSchema(schema)]


# ---------------------------------------------------------------- from a signature


@dataclass(frozen=True)
class Declaration:
    """A tool's arguments: the model that checks them, the JSON schema offered."""

    model: type[BaseModel]
    schema: dict[str, Any]

    def offered(self) -> dict[str, Any]:
        """``schema`` frozen (kernel/core/frozen.py), made once and shared by every
        listing: no copy per tool per turn (issue 37), and nobody changes it in place."""
        shared = self.__dict__.get("_offered")
        if shared is None:
            shared = frozen(self.schema)
            object.__setattr__(self, "_offered", shared)
        return cast(dict[str, Any], shared)


def from_signature(
    fn: Callable[..., Any], name: str, arg_docs: dict[str, str], is_context: Callable[[Any], bool]
) -> tuple[Declaration, str | None]:
    """The declaration of ``fn``'s arguments and the name of its ToolContext parameter
    (``is_context`` tells that annotation apart). TypeError names a parameter that
    cannot be declared."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # an unresolvable forward reference, for instance
        raise TypeError(f"cannot resolve the type hints of tool {fn!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise TypeError(f"tool parameter {param.name!r} must be passable by keyword")
        if param.name not in hints:
            raise TypeError(f"tool parameter {param.name!r} has no type annotation")
        if is_context(hints[param.name]):
            context_param = param.name
            continue
        try:
            fields[f"p{len(fields)}"] = _field(param, hints[param.name], arg_docs)
        except TypeError as exc:
            raise TypeError(f"tool parameter {param.name!r}: {exc}") from exc
    model = _model(name, fields, extra="ignore")
    return Declaration(model, offered_schema(model)), context_param


def _field(param: inspect.Parameter, annotation: Any, arg_docs: dict[str, str]) -> Any:
    annotation, extras = _split_annotated(annotation)
    texts = [e for e in extras if isinstance(e, str)]
    default = param.default
    if default is inspect.Parameter.empty:
        default = PydanticUndefined
    else:
        try:
            json.dumps(default)
        except (TypeError, ValueError) as exc:
            raise TypeError("default is not JSON") from exc
    description = arg_docs.get(param.name) or (texts[0] if texts else None)
    # A description is set only when given: Annotated[X, Field(description=...)] stays.
    info = (
        Field(default=default, alias=param.name, description=description)
        if description
        else Field(default=default, alias=param.name)
    )
    return _lax(annotation, tuple(e for e in extras if not isinstance(e, str))), info


def _split_annotated(annotation: Any) -> tuple[Any, list[Any]]:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        return base, extras
    return annotation, []


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _lax(annotation: Any, extras: tuple[Any, ...] = ()) -> Any:
    """The checked type of an annotation in the supported subset, with ``extras`` (the
    rest of an ``Annotated``) on the scalar they bound; TypeError outside the subset."""
    if typing.get_origin(annotation) is typing.Annotated:  # e.g. a member of X | None
        base, *inner = typing.get_args(annotation)
        return _lax(base, (*(e for e in inner if not isinstance(e, str)), *extras))
    if _is_union(annotation):
        members = [a for a in typing.get_args(annotation) if a is not NoneType]
        if len(members) != 1:
            raise TypeError(f"unsupported union {annotation!r} (only X | None)")
        return _lax(members[0], extras) | None
    if annotation in _JSON_TYPES:
        return _scalar(annotation, extras)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        kinds = {_JSON_TYPES.get(type(v)) for v in args}
        if len(kinds) != 1 or None in kinds:
            raise TypeError(f"Literal values must share one of str/int/float/bool: {args!r}")
        schema = {"type": kinds.pop(), "enum": list(args)}
        return _enum(_scalar(type(args[0]), extras), args, schema)
    if annotation is Any:
        checked: Any = Any
    elif origin is list:
        if len(args) != 1 or args[0] not in _JSON_TYPES:
            raise TypeError(f"unsupported list item type {args!r} (use list[str], list[int], ...)")
        checked = types.GenericAlias(list, (_scalar(args[0]),))
    elif origin is dict or annotation is dict:
        value = args[1] if args else Any
        if args and args[0] is not str:
            raise TypeError("dict keys must be str")
        if value is not Any and value not in _JSON_TYPES:
            raise TypeError(f"unsupported dict value type {value!r}")
        checked = types.GenericAlias(dict, (str, Any if value is Any else _scalar(value)))
    else:
        raise TypeError(f"unsupported annotation {annotation!r}")
    return Annotated[checked, *extras] if extras else checked


def _model(name: str, fields: dict[str, Any], *, extra: Literal["ignore", "allow"]) -> Any:
    config = ConfigDict(extra=extra, validate_by_alias=True, validate_by_name=False)
    safe = re.sub(r"\W", "_", name) or "tool"
    return create_model(f"{safe}_arguments", __config__=config, **fields)


class _CompactSchema(GenerateJsonSchema):
    """The plain JSON-schema dialect tools are offered in: no titles, ``X | None`` as a
    type list (``["string", "null"]``), no ``additionalProperties: true``."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        inner = dict(self.generate_inner(schema["schema"]))
        kind = inner.get("type")
        # Other keywords apply to their own type only, so null passes them: same meaning.
        if not isinstance(kind, str) or set(inner) & {"const", "anyOf", "oneOf", "allOf", "$ref"}:
            return super().nullable_schema(schema)
        inner["type"] = [kind, "null"]
        if "enum" in inner and None not in inner["enum"]:
            inner["enum"] = [*inner["enum"], None]
        return inner

    def union_schema(self, schema: core_schema.UnionSchema) -> JsonSchemaValue:
        out = super().union_schema(schema)
        members = out.get("anyOf")
        if isinstance(members, list) and len(members) == 2:  # a number: int | float
            whole, number = members
            if {**whole, "type": "number"} == number and whole.get("type") == "integer":
                return {**{k: v for k, v in out.items() if k != "anyOf"}, **number}
        return out

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        out = super().dict_schema(schema)
        if out.get("additionalProperties") in (True, {}):
            del out["additionalProperties"]
        return out


def offered_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a tool's model is offered, every byte of it sent with each
    request: its arguments and which are required (an argument the tool does not take
    is dropped, not refused, so nothing says so). An optional ``X | None = None`` is
    offered as plain ``X``: leaving it out says "none" (null is still accepted)."""
    generated = model.model_json_schema(by_alias=True, schema_generator=_CompactSchema)
    properties = generated.get("properties", {})
    required = generated.get("required", [])
    offered: dict[str, Any] = {
        "type": "object",
        "properties": {
            key: prop if key in required else _optional(prop) for key, prop in properties.items()
        },
    }
    if required:
        offered["required"] = required
    return offered


def _optional(prop: dict[str, Any]) -> dict[str, Any]:
    """An optional argument's schema without its null default (``type: [X, "null"]``
    becomes ``X``, ``null`` leaves the enum)."""
    if "default" not in prop or prop["default"] is not None:
        return prop
    kind = prop.get("type")
    if not (isinstance(kind, list) and len(kind) == 2 and "null" in kind):
        return prop
    out = {k: v for k, v in prop.items() if k != "default"}
    out["type"] = next(k for k in kind if k != "null")
    if isinstance(out.get("enum"), list):
        out["enum"] = [v for v in out["enum"] if v is not None]
    return out


# ---------------------------------------------------------------- from a JSON schema

_READ_TYPES: dict[str, Any] = {
    "string": str,
    "integer": _scalar(int),
    "number": _scalar(float),
    "boolean": _scalar(bool),
    "object": dict[str, Any],
    "null": NoneType,
}


def from_json_schema(name: str, schema: dict[str, Any]) -> Declaration:
    """The declaration of an extension tool's arguments: its schema as given, and a model
    read from it."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    required = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
    fields: dict[str, Any] = {}
    for key in [*properties, *(r for r in required if r not in properties)]:
        default = PydanticUndefined if key in required else None
        info = Field(default=default, alias=str(key))
        fields[f"p{len(fields)}"] = (read_type(properties.get(key)), info)
    closed = schema.get("additionalProperties") is False
    model = _model(name, fields, extra="ignore" if closed else "allow")
    return Declaration(model, schema)


def read_type(prop: Any) -> Any:
    """The checked type a JSON-schema property stands for; Any where it says nothing
    this reading knows."""
    if not isinstance(prop, dict):
        return Any
    kind = prop.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    members: list[Any] = []
    for k in kinds:
        if k == "array":
            items = prop.get("items")
            members.append(types.GenericAlias(list, (read_type(items),)))
        elif isinstance(k, str) and k in _READ_TYPES:
            members.append(_READ_TYPES[k])
        else:
            members = [Any]
            break
    base: Any = Any if not members or Any in members else Union[tuple(members)]  # noqa: UP007
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return _enum(base, tuple(enum), None)
    return base
