"""The shape of ``config.toml``, derived from :class:`kernel.config.model.Config`: which
table holds which section model (:func:`node_of`).

Unknown-key warnings (:func:`unknown_keys`), SelfOps' refusals and the test that
``config.example.toml`` documents every key all walk this one tree (:data:`SCHEMA`).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from kernel.config.model import Config
from kernel.config.schema import Section, is_toml, toml_keys, unwrap


@dataclass(frozen=True, slots=True)
class Node:
    """A table: its own keys (``model``), fixed sub-tables (``tables``), sub-tables under
    any name (``each``), an array of tables (``array``), or any keys at all (``free``)."""

    model: type[Section] | None = None
    tables: Mapping[str, Node] = field(default_factory=dict)
    each: Node | None = None
    array: bool = False
    free: bool = False


def _section(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, Section)


def _child(annotation: Any) -> Node | None:
    """The sub-table a field's annotation holds: a section, an array of sections
    (``[[…]]``) or sections by name; None for a plain key."""
    base = unwrap(annotation)
    args = typing.get_args(base)
    if _section(base):
        return node_of(base)
    if typing.get_origin(base) is list and _section(unwrap(args[0])):
        return dataclasses.replace(node_of(unwrap(args[0])), array=True)
    if typing.get_origin(base) is dict and _section(unwrap(args[1])):
        return Node(each=node_of(unwrap(args[1])))
    return None


def _key(name: str, info: Any) -> str:
    return info.validation_alias if isinstance(info.validation_alias, str) else name


@functools.cache
def node_of(model: type[BaseModel]) -> Node:
    """The tree ``model`` reads. A section: its keys, and a sub-table for each field
    holding sections. The whole configuration: a table for each of its fields not marked
    internal (one holding no section takes any keys, as ``[envs]``)."""
    if _section(model):
        tables = {
            _key(name, info): child
            for name, info in model.model_fields.items()
            if (child := _child(info.annotation)) is not None
        }
        own = set(toml_keys(typing.cast(type[Section], model))) - set(tables)
        # A section that is only its sub-tables ([channels]) has no keys of its own.
        return Node(typing.cast(type[Section], model) if own else None, tables)
    return Node(
        tables={
            name: _child(info.annotation) or Node(free=True)
            for name, info in model.model_fields.items()
            if is_toml(info)
        }
    )


SCHEMA = node_of(Config)
SECTIONS = tuple(SCHEMA.tables)


def unknown_keys(raw: dict[str, Any], model: type[BaseModel] = Config) -> list[str]:
    """Keys ``model`` does not read (a typo such as ``[telegram] tokne`` would otherwise
    be ignored silently), section names included; ``[envs]`` takes any name."""
    found: list[str] = []
    _walk(node_of(model), raw, "", found)
    return found


def _walk(node: Node, value: Any, prefix: str, found: list[str]) -> None:
    if node.array:
        for i, item in enumerate(value if isinstance(value, list) else []):
            _table(node, item, f"{prefix}[{i}]", found)
    else:
        _table(node, value, prefix, found)


def _table(node: Node, table: Any, prefix: str, found: list[str]) -> None:
    if not isinstance(table, dict) or node.free:
        return
    keys = toml_keys(node.model) if node.model else {}
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key in node.tables:
            _walk(node.tables[key], value, path, found)
        elif node.each is not None:
            _walk(node.each, value, path, found)
        elif key not in keys:
            found.append(path)


def schema_keys(node: Node = SCHEMA, prefix: str = "") -> Iterator[tuple[str, str, Node]]:
    """Every (table, key, node) the schema reads; a table read under any name is
    ``<section>.*``, an array of tables is ``<section>[]``."""
    if node.model is not None:
        for key in toml_keys(node.model):
            yield prefix, key, node
    for name, child in node.tables.items():
        path = f"{prefix}.{name}" if prefix else name
        yield from schema_keys(child, f"{path}[]" if child.array else path)
    if node.each is not None:
        yield from schema_keys(node.each, f"{prefix}.*")
