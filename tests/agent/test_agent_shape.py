"""The agent's shape (issue 36): its parts (``sessions``, ``selection``, ``control``,
``scopes``, ``meter``, …) are services handed out, not re-exported one method at a time.
A method of :class:`Agent` whose whole body is ``return self.<part>.<name>(…)`` (or
reads ``self.<part>.<name>``) is a forward: callers use the part instead."""

from __future__ import annotations

import ast
from pathlib import Path

import kernel.agent.agent

SOURCE = Path(kernel.agent.agent.__file__)


def _forwarded(statement: ast.stmt) -> bool:
    """``return self.a.b(…)``, ``self.a.b(…)``, ``await …`` of either, ``return self.a.b``."""
    if not isinstance(statement, ast.Return | ast.Expr) or statement.value is None:
        return False
    value = statement.value
    if isinstance(value, ast.Await):
        value = value.value
    if isinstance(value, ast.Call):
        value = value.func
    return (
        isinstance(value, ast.Attribute)
        and isinstance(value.value, ast.Attribute)
        and isinstance(value.value.value, ast.Name)
        and value.value.value.id == "self"
    )


def _forwards(tree: ast.Module) -> list[str]:
    agent = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Agent")
    found = []
    for node in agent.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = list(node.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if len(body) == 1 and _forwarded(body[0]):
            found.append(node.name)
    return found


def test_the_agent_has_no_one_line_forwarding_methods() -> None:
    assert _forwards(ast.parse(SOURCE.read_text(encoding="utf-8"))) == []


def test_the_check_finds_a_forward() -> None:
    sample = ast.parse(
        "class Agent:\n"
        "    def is_busy(self, c):\n"
        "        return self.sessions.is_busy(c)\n"
        "    async def undo(self, c):\n"
        '        """Cut."""\n'
        "        return await self.control.undo(c)\n"
        "    @property\n"
        "    def model(self):\n"
        "        return self.selection.model\n"
        "    def local_time(self, when):\n"
        "        return when.astimezone(self.tz)\n"
    )
    assert _forwards(sample) == ["is_busy", "undo", "model"]
