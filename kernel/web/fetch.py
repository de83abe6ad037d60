"""``web_fetch`` (issue 18): being built; see kernel/web/__init__.py."""

from __future__ import annotations

from kernel.config import Config
from kernel.tools.registry import ToolRegistry


def register(registry: ToolRegistry, config: Config) -> None:
    """Register web_fetch."""
