"""Built-in long-term memory tools (SPEC §6, seed 004 result shapes), registered like
any extension's tools.

Each call sees only the memory scopes of its chat (``ToolContext.memory_scopes``:
global plus the chat's project and persona, issue 18); a new memory goes to
``ToolContext.memory_scope`` unless the model names another scope of the chat.
"""

from __future__ import annotations

from typing import Any, Literal

from kernel.core.errors import ToolError
from kernel.core.session_modes import READS
from kernel.memory import scopes
from kernel.memory.memories import Memories
from kernel.store.db import MemoryRow
from kernel.tools.registry import ToolContext, ToolRegistry

Category = Literal["user", "feedback", "project", "reference"]
Scope = Literal["global", "project", "persona"]
RULES = {
    "memory_add": "One self-contained sentence per call. Never passwords, keys or codes.",
    "memory_search": "Do it before answering about the owner's past.",
    "memory_delete": "When the fact changed (then remember the new one) or the owner asks "
    "to forget it.",
}


def _row(m: MemoryRow) -> dict[str, Any]:
    out: dict[str, Any] = {"id": m.id, "text": m.text, "created_at": m.created_at.isoformat()}
    if m.category:
        out["category"] = m.category
    out["scope"] = m.scope
    return out


def _target(scope: Scope | None, context: ToolContext) -> str:
    """The scope a memory_add call writes to; ToolError when the chat has no such scope."""
    if scope is None:
        return context.memory_scope
    if scope == "global":
        return scopes.GLOBAL
    if scope == "project":
        if not context.project:
            raise ToolError(
                "this chat has no active project: leave scope out or use global"
                " (the owner chooses a project with /project)"
            )
        return scopes.project(context.project)
    if not context.persona:
        raise ToolError(
            "this chat has no active persona: leave scope out or use global"
            " (the owner chooses a persona with /persona)"
        )
    return scopes.persona(context.persona)


def register(registry: ToolRegistry, memories: Memories) -> None:
    @registry.tool
    async def memory_add(
        text: str,
        context: ToolContext,
        category: Category | None = None,
        scope: Scope | None = None,
    ) -> dict[str, Any]:
        """Remember one lasting fact the owner told you (preference, identity, project,
        usual places).

        Args:
            category: user (who they are), feedback (how they want you to work),
                project (ongoing work), reference (where things are)
            scope: global (every chat), project (only chats in the active project),
                persona (only chats with the active persona); default: the active
                project, else global
        """
        if not text.strip():
            raise ToolError("text is empty: give the fact to remember")
        # A fact that replaces one kept updates that memory (its id; the old text kept).
        saved = await memories.remember(text, category, _target(scope, context), actor="model")
        return {"id": saved.row.id}

    @registry.tool(effect=READS)
    async def memory_search(
        query: str, context: ToolContext, limit: int = 5
    ) -> list[dict[str, Any]]:
        """Search long-term memory, best match first."""
        found = await memories.search(query, max(1, min(limit, 50)), context.memory_scopes)
        return [_row(m) for m in found]

    @registry.tool(effect=READS)
    async def memory_list(context: ToolContext, limit: int = 200) -> list[dict[str, Any]]:
        """List long-term memories, newest first."""
        rows = await memories.recent(max(1, min(limit, 1000)), context.memory_scopes)
        return [_row(m) for m in rows]

    @registry.tool
    async def memory_delete(id: int, context: ToolContext) -> dict[str, Any]:
        """Delete a memory by id."""
        if not await memories.forget([id], context.memory_scopes, actor="model"):
            raise ToolError(f"no memory with id {id}: find ids with memory_search or memory_list")
        return {"ok": True}

    # Kernel's rules, left out where SOUL.md has a section about the tool (issue 38).
    for name, rules in RULES.items():
        registry.add_rules(name, rules)
