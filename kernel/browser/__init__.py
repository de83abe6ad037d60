"""A browser for the model (issue 38 item 4): Playwright driving the system's Chromium,
off unless ``[browser] enabled``. ``browser_open`` reads a page as text with its links,
buttons and inputs numbered; ``browser_click`` / ``browser_fill`` act on them by number;
``browser_screenshot`` sends the page into the chat; ``browser_find`` finds text on it.

- :mod:`kernel.browser.session`: one Chromium, one page per chat, closed when idle;
  Playwright is imported and Chromium started at the first action, never at start.
- :mod:`kernel.browser.network`: every request a page makes is fetched through
  web_fetch's address guard (:mod:`kernel.web.guard`), redirects and sub-resources
  included; downloads and WebSockets are refused.
- :mod:`kernel.browser.pages`: what each action does on the page.
- :mod:`kernel.browser.tools`: the tools, and where screenshots go.

This module imports none of them (nor Playwright): registering the tools costs nothing
until one is called.

Public API: :func:`register`, :data:`TOOLS`, :func:`tool_call` (the
sidecar's ``browser`` items), :func:`check` (``kernel check``'s line).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kernel.core.errors import ToolError
from kernel.core.i18n import t

if TYPE_CHECKING:
    from pathlib import Path

    from kernel.browser.session import Browsers
    from kernel.config import Config
    from kernel.core.delivery import ChannelRegistry
    from kernel.store.artifacts import ArtifactStore
    from kernel.tools.registry import ToolRegistry

__all__ = ["TOOLS", "check", "register", "tool_call"]

# action → the tool that does it (the sidecar's `browser` items name an action).
TOOLS: dict[str, str] = {
    "open": "browser_open",
    "click": "browser_click",
    "fill": "browser_fill",
    "screenshot": "browser_screenshot",
    "find": "browser_find",
}


def register(
    registry: ToolRegistry,
    config: Config,
    *,
    data_dir: Path | None = None,
    artifacts: ArtifactStore | None = None,
    channels: ChannelRegistry | None = None,
    browsers: Browsers | None = None,
) -> Callable[[], Awaitable[None]] | None:
    """Register the browser tools when ``[browser] enabled``; the closer that ends
    Chromium at Kernel's stop (None: nothing registered). ``browsers``: a given one
    (tests: a resolver, a shared Chromium), else a new one over ``config``."""
    if not config.browser.enabled and browsers is None:
        return None
    from kernel.browser import tools
    from kernel.browser.session import Browsers

    if browsers is None:
        browsers = Browsers(config)
    shots = tools.Shots(data_dir or config.data_dir, artifacts, channels)
    tools.register(registry, config, browsers, shots)
    return browsers.close


def tool_call(item: Any) -> tuple[str, dict[str, Any]]:
    """One item of ``/agent/process``'s ``browser`` array as (tool name, arguments):
    ``{"action": "open", "url": …}``, ``{"action": "click", "number": 3}``,
    ``{"action": "fill", "number": 2, "text": …, "submit": true}``, ``{"action":
    "screenshot"}``, ``{"action": "find", "text": …}``; an item with ``url`` and no
    action opens it. The caller invokes the tool through the registry (so modes,
    approvals and disabled tools apply). ToolError names a bad item."""
    if not isinstance(item, dict):
        raise ToolError(t("browser.bad_item", actions=", ".join(TOOLS)))
    arguments = {k: v for k, v in item.items() if k != "action"}
    action = item.get("action") or ("open" if "url" in item else None)
    if action not in TOOLS:
        raise ToolError(t("browser.bad_item", actions=", ".join(TOOLS)))
    return TOOLS[str(action)], arguments


def check(config: Config) -> tuple[str, str]:
    """``kernel check``'s browser line: (status, words). Imports nothing heavy."""
    from kernel.browser.session import chromium_path, playwright_missing, searched

    if playwright_missing():
        return "missing", t("browser.no_playwright")
    found = chromium_path(config.browser.executable)
    if found is None:
        return "missing", t("browser.no_chromium", path=searched(config.browser.executable))
    return "ok", t("check.browser_ok", path=found)
