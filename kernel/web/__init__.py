"""The web for the model (issue 18): ``web_search`` through the provider of
``[web.search]`` (:mod:`kernel.web.search`) and ``web_fetch`` of one page
(:mod:`kernel.web.fetch`), whose every connection is checked by :mod:`kernel.web.guard`.
What either returns reaches the model wrapped by :func:`untrusted` (outside content).

Public API: :func:`register` (the tools hook of ``kernel.plugins``), :func:`untrusted`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.core.untrusted import untrusted

if TYPE_CHECKING:  # kept light: the extraction worker process imports this package
    from kernel.config import Config
    from kernel.tools.registry import ToolRegistry

__all__ = ["register", "untrusted"]


def register(registry: ToolRegistry, config: Config) -> None:
    """Register web_search and web_fetch (web_search is offered only while a provider
    and its key are configured)."""
    from kernel.web import fetch, search

    search.register(registry, config)
    fetch.register(registry, config)
