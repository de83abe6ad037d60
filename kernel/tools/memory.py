"""Built-in long-term memory tools (SPEC §6, seed 004 result shapes), registered like
any extension's tools."""

from __future__ import annotations

from typing import Any, Literal

from kernel.core.errors import ToolError
from kernel.memory.memories import Memories
from kernel.store.db import MemoryRow
from kernel.tools.registry import ToolRegistry

Category = Literal["user", "feedback", "project", "reference"]


def _row(m: MemoryRow) -> dict[str, Any]:
    out: dict[str, Any] = {"id": m.id, "text": m.text, "created_at": m.created_at.isoformat()}
    if m.category:
        out["category"] = m.category
    return out


def register(registry: ToolRegistry, memories: Memories) -> None:
    @registry.tool
    async def memory_add(text: str, category: Category | None = None) -> dict[str, Any]:
        """Remember one lasting fact the owner told you (preference, identity, project,
        usual places): one self-contained sentence per call. Never passwords, keys or codes.

        Args:
            category: user (who they are), feedback (how they want you to work),
                project (ongoing work), reference (where things are)
        """
        if not text.strip():
            raise ToolError("text is empty: give the fact to remember")
        row, _ = await memories.add(text, category)
        return {"id": row.id}

    @registry.tool
    async def memory_search(query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Search long-term memory, best match first: do it before answering about
        the owner's past."""
        return [_row(m) for m in await memories.search(query, limit=max(1, min(limit, 50)))]

    @registry.tool
    async def memory_list(limit: int = 200) -> list[dict[str, Any]]:
        """List long-term memories, newest first."""
        return [_row(m) for m in await memories.recent(max(1, min(limit, 1000)))]

    @registry.tool
    async def memory_delete(id: int) -> dict[str, Any]:
        """Delete a memory by id: when the fact changed (then remember the new one) or
        the owner asks to forget it."""
        if not await memories.delete([id]):
            raise ToolError(f"no memory with id {id}: find ids with memory_search or memory_list")
        return {"ok": True}
