"""Provider-neutral conversation values and their JSON form.

The content-block shape follows the Anthropic Messages API because it is the
richest of the two; the OpenAI adapter converts to and from it in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant"]
Origin = Literal["", "owner", "kernel"]


@dataclass(slots=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"
    # Who wrote the text of a user message: "owner" (their own words, never read for
    # markers), "kernel" (what Kernel attached: a voice transcript, a file, a skill, a
    # slimming marker), "" (not known: history stored before the field, read by look).
    by: Origin = field(default="", compare=False)


@dataclass(slots=True)
class ImageBlock:
    media_type: str
    data: str  # base64
    type: Literal["image"] = "image"


@dataclass(slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = "tool_use"


@dataclass(slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


Block = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock


@dataclass(slots=True)
class Message:
    role: Role
    content: list[Block] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]

    @property
    def is_user_input(self) -> bool:
        """A user message that starts a round (not a message of tool results)."""
        return self.role == "user" and not self.tool_results


@dataclass(slots=True)
class ToolSpec:
    """What a model is told about one tool."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


def block_to_dict(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} | ({"by": block.by} if block.by else {})
    if isinstance(block, ImageBlock):
        return {"type": "image", "media_type": block.media_type, "data": block.data}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": block.content,
        "is_error": block.is_error,
    }


def block_from_dict(data: dict[str, Any]) -> Block:
    kind = data.get("type")
    if kind == "text":
        by = data.get("by")
        return TextBlock(str(data.get("text", "")), by=by if by in ("owner", "kernel") else "")
    if kind == "image":
        return ImageBlock(str(data["media_type"]), str(data["data"]))
    if kind == "tool_use":
        return ToolUseBlock(str(data["id"]), str(data["name"]), dict(data.get("input") or {}))
    if kind == "tool_result":
        return ToolResultBlock(
            str(data["tool_use_id"]), str(data.get("content", "")), bool(data.get("is_error"))
        )
    raise ValueError(f"unknown content block type: {kind!r}")


def content_to_json(content: list[Block]) -> list[dict[str, Any]]:
    return [block_to_dict(b) for b in content]


def content_from_json(data: list[dict[str, Any]]) -> list[Block]:
    return [block_from_dict(d) for d in data]
