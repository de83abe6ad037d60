"""TUI tests drive the real app headless with Textual's own pilot; the HTTP backend talks
to a live sidecar (the gateway suite's harness)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
from tests.waiting import wait_until

TEXTUAL_MISSING = "kernel tui needs Textual: uv sync --extra tui (or the dev group)"


async def until(pilot: Any, condition: Callable[[], bool], seconds: float = 30) -> None:
    """Return once ``condition()`` holds, letting the app run between checks."""
    await wait_until(condition, timeout=seconds, pause=lambda: pilot.pause(0.02))


def lines(app: Any, kind: str | None = None) -> list[str]:
    """The conversation's lines as shown (``kind``: owner, assistant, tool, note, error)."""
    selector = "#conversation TextLine" + (f".{kind}" if kind else "")
    return [widget.text for widget in app.query(selector)]


async def send(pilot: Any, text: str) -> None:
    """Type ``text`` into the input line and press Enter."""
    pilot.app.query_one("#input").value = text
    await pilot.press("enter")
