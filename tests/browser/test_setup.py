"""The browser without Chromium (issue 38 item 4): off by default (no tool offered,
nothing imported), ``kernel check``'s line naming a missing Playwright or Chromium and
the install command, and the sidecar's ``browser`` items mapped onto the tools."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from kernel import browser
from kernel.check import _browser
from kernel.config import Config, load_config
from kernel.core.errors import ToolError
from kernel.core.i18n import set_language
from kernel.tools.registry import ToolRegistry
from tests.conftest import write_config
from tests.webconsole.chromium import CHROMIUM


def load(tmp_path: Path, section: str = "") -> Config:
    path = write_config(tmp_path, "http://127.0.0.1:9/v1", "openai_compat")
    path.write_text(path.read_text() + section, encoding="utf-8")
    return load_config(path, env={}, require_telegram=False)


def test_off_by_default_and_on_when_enabled(tmp_path: Path) -> None:
    registry = ToolRegistry()
    assert browser.register(registry, load(tmp_path)) is None
    assert not [n for n in registry.names() if n.startswith("browser")]
    on = ToolRegistry()
    closer = browser.register(on, load(tmp_path, "\n[browser]\nenabled = true\n"))
    assert closer is not None
    assert sorted(n for n in on.names() if n.startswith("browser")) == sorted(
        browser.TOOLS.values()
    )


def test_check_names_a_missing_chromium_or_playwright_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_language("en")
    missing = load(tmp_path, '\n[browser]\nenabled = true\nexecutable = "/no/such/chromium"\n')
    assert _browser(missing).render() == (
        "[warn] browser: no Chromium at /no/such/chromium: run apt install chromium, "
        "or set its path in [browser] executable"
    )
    if Path(CHROMIUM).is_file() and importlib.util.find_spec("playwright") is not None:
        found = load(
            tmp_path, f"\n[browser]\nenabled = true\nexecutable = {json.dumps(CHROMIUM)}\n"
        )
        assert _browser(found).render() == (
            f"[ok  ] browser: Playwright installed, Chromium: {CHROMIUM}"
        )
    real = importlib.util.find_spec

    def without_playwright(name: str, *args: Any) -> Any:
        return None if name == "playwright" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_playwright)
    assert _browser(missing).render() == (
        "[warn] browser: the browser tool needs Playwright, which is not installed: "
        "run uv sync --extra browser (or pip install playwright)"
    )


def test_the_sidecars_browser_items_name_the_tools() -> None:
    assert browser.tool_call({"action": "open", "url": "https://example.org/"}) == (
        "browser_open",
        {"url": "https://example.org/"},
    )
    assert browser.tool_call({"url": "https://example.org/"})[0] == "browser_open"
    assert browser.tool_call({"action": "fill", "number": 2, "text": "x", "submit": True}) == (
        "browser_fill",
        {"number": 2, "text": "x", "submit": True},
    )
    assert browser.tool_call({"action": "screenshot"}) == ("browser_screenshot", {})
    for bad in ({"action": "drag"}, ["open"], {}):
        with pytest.raises(ToolError, match="click"):
            browser.tool_call(bad)


def test_plan_mode_keeps_reading_pages_and_holds_clicks_and_fills_back(tmp_path: Path) -> None:
    registry = ToolRegistry()
    browser.register(registry, load(tmp_path, "\n[browser]\nenabled = true\n"))
    for mode in ("plan", "read_only"):
        allowed = {name for name in browser.TOOLS.values() if registry.allowed_in(name, mode)}
        assert allowed == {"browser_open", "browser_find", "browser_screenshot"}
    assert all(registry.allowed_in(name, "act") for name in browser.TOOLS.values())
