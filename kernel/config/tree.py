"""The shape of ``config.toml``: which table holds which section model.

Unknown-key warnings (:func:`unknown_keys`), SelfOps' refusals and the test that
``config.example.toml`` documents every key all walk this one tree (:data:`SCHEMA`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernel.config.channels import CHANNEL_MODELS
from kernel.config.cli import CLIConfig
from kernel.config.gateway import GatewayConfig
from kernel.config.general import (
    BudgetConfig,
    CronConfig,
    GeneralConfig,
    TelegramConfig,
    ToolPolicy,
)
from kernel.config.mcp import MCPServerConfig, MCPSettings
from kernel.config.prompts import FeaturesConfig, PromptsConfig
from kernel.config.providers import ModelPrice, ProviderConfig, TitlesConfig
from kernel.config.routing import ModelOptions, RoutingConfig, RoutingRule
from kernel.config.schema import Section, toml_keys
from kernel.config.voice import SttConfig, TtsConfig
from kernel.config.web import AgentsConfig, WebConfig, WebSearchConfig


@dataclass(frozen=True, slots=True)
class Node:
    """A table: its own keys (``model``), fixed sub-tables (``tables``), sub-tables under
    any name (``each``), an array of tables (``array``), or any keys at all (``free``)."""

    model: type[Section] | None = None
    tables: Mapping[str, Node] = field(default_factory=dict)
    each: Node | None = None
    array: bool = False
    free: bool = False


_PRICES = Node(each=Node(ModelPrice))  # [providers.<name>.prices."<model>"]
_OPTIONS = Node(each=Node(ModelOptions))  # [providers.<name>.model_options."<model>"]

SCHEMA = Node(
    tables={
        "envs": Node(free=True),
        "telegram": Node(TelegramConfig),
        "general": Node(GeneralConfig),
        "providers": Node(
            each=Node(ProviderConfig, tables={"prices": _PRICES, "model_options": _OPTIONS})
        ),
        "titles": Node(TitlesConfig, tables={"prices": _PRICES}),
        "cli": Node(each=Node(CLIConfig)),
        "mcp": Node(MCPSettings, tables={"servers": Node(MCPServerConfig, array=True)}),
        "gateway": Node(GatewayConfig),
        "channels": Node(tables={name: Node(model) for name, model in CHANNEL_MODELS.items()}),
        "stt": Node(SttConfig),
        "tts": Node(TtsConfig),
        "tools": Node(each=Node(ToolPolicy)),
        "cron": Node(CronConfig),
        "budget": Node(BudgetConfig),
        "routing": Node(RoutingConfig, tables={"rules": Node(RoutingRule, array=True)}),
        "web": Node(WebConfig, tables={"search": Node(WebSearchConfig)}),
        "agents": Node(AgentsConfig),
        "prompts": Node(PromptsConfig),
        "features": Node(FeaturesConfig),
    }
)
SECTIONS = tuple(SCHEMA.tables)


def unknown_keys(raw: dict[str, Any]) -> list[str]:
    """Keys Kernel does not read (a typo such as ``[telegram] tokne`` would otherwise be
    ignored silently), section names included; ``[envs]`` takes any name."""
    found: list[str] = []
    _walk(SCHEMA, raw, "", found)
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
