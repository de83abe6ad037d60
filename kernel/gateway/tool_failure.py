"""A direct tool call that could not run (seed 000's tool failure semantics).

Public API: :class:`ToolFailed`.
"""

from __future__ import annotations

from typing import Any


class ToolFailed(Exception):
    """An item that could not run: its error code (``tool_invoke_failed``,
    ``tool_invalid_result``, ``tool_not_supported`` …, each with its status in
    ``HTTP_STATUS``), words naming the fix, and details for the answer."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
