"""What the model is sent, as values: prompt layers, and a stored history repaired into
one every provider accepts (tool pairs complete, roles alternating)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from kernel.core.i18n import t
from kernel.core.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from kernel.core.usage import estimate_tokens

_SPACE_RUN = re.compile(r"[ \t]+")


@dataclass(frozen=True, slots=True)
class Layer:
    name: str
    text: str
    source: str = ""  # where the text comes from: a file path, "tools", "memories", …
    # Changes from turn to turn (recalled memories, the time): sent after the cached
    # prefix, with the turn's own message, never in the system prompt.
    volatile: bool = False
    # Tools this layer has rules for (SOUL.md's tool sections): their definitions are
    # sent without Kernel's own rules (kernel/agent/soul.py).
    covers: frozenset[str] = frozenset()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    @property
    def normalized_hash(self) -> str:
        """The hash of the text with line endings, trailing blanks and runs of spaces
        normalised, so only a change of content (not of formatting) changes it."""
        lines = self.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        norm = "\n".join(_SPACE_RUN.sub(" ", line).strip() for line in lines).strip()
        return hashlib.sha256(norm.encode()).hexdigest()[:16]

    @property
    def token_estimate(self) -> int:
        return estimate_tokens(self.text)


def covered_tools(layers: list[Layer]) -> frozenset[str]:
    """The tools some layer has the owner's rules for."""
    return frozenset().union(*(layer.covers for layer in layers))


def join_layers(layers: list[Layer]) -> str:
    return "\n\n".join(layer.text for layer in layers if layer.text.strip())


def split_layers(layers: list[Layer]) -> tuple[str, str]:
    """(the system prompt, the volatile context sent with the turn's own message)."""
    system = join_layers([layer for layer in layers if not layer.volatile])
    volatile = join_layers([layer for layer in layers if layer.volatile])
    return system, f"<context>\n{volatile}\n</context>" if volatile else ""


def repair_history(messages: list[Message]) -> list[Message]:
    """Make stored history acceptable to every provider, whatever happened while writing it.

    - every tool_use gets a tool_result in the next user message (a crash mid-tool
      leaves none); tool_results with no tool_use right before them are dropped;
    - consecutive messages of one role are merged; empty messages are dropped;
    - the conversation starts with a user message.
    """
    out: list[Message] = []
    start = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
    for message in messages[start:]:
        content = list(message.content)
        if message.role == "user":
            expected = (
                {u.id for u in out[-1].tool_uses} if out and out[-1].role == "assistant" else set()
            )
            content = [
                b
                for b in content
                if not isinstance(b, ToolResultBlock) or b.tool_use_id in expected
            ]
        if out and out[-1].role == "assistant" and out[-1].tool_uses:
            answered = {b.tool_use_id for b in content if isinstance(b, ToolResultBlock)}
            if message.role == "assistant":
                answered = set()
            missing: list[Block] = [
                ToolResultBlock(u.id, t("history.tool_lost"), is_error=True)
                for u in out[-1].tool_uses
                if u.id not in answered
            ]
            if missing:
                if message.role == "user":
                    content = [*missing, *content]
                else:
                    out.append(Message("user", missing))
        if not content:
            continue
        if out and out[-1].role == message.role:
            _merge(out[-1], content)
        else:
            out.append(Message(message.role, content))
    if out and out[-1].role == "assistant" and out[-1].tool_uses:
        out.append(
            Message(
                "user",
                [ToolResultBlock(u.id, t("history.tool_lost"), True) for u in out[-1].tool_uses],
            )
        )
    return out


def flatten_tool_blocks(messages: list[Message]) -> list[Message]:
    """Tool blocks as plain text, for a request that offers no tools: the APIs reject
    tool_use/tool_result blocks in a request without tool definitions."""
    out: list[Message] = []
    for message in messages:
        blocks: list[Block] = []
        for b in message.content:
            if isinstance(b, ToolUseBlock):
                blocks.append(
                    TextBlock(f"[tool call {b.name} {json.dumps(b.input, ensure_ascii=False)}]")
                )
            elif isinstance(b, ToolResultBlock):
                blocks.append(
                    TextBlock(f"[tool result{' (error)' if b.is_error else ''}: {b.content}]")
                )
            else:
                blocks.append(b)
        out.append(Message(message.role, blocks))
    return out


def _merge(target: Message, content: list[Block]) -> None:
    # Tool results must come first in a user message (Anthropic rule).
    if target.role == "user":
        results = [b for b in target.content + content if isinstance(b, ToolResultBlock)]
        rest = [b for b in target.content + content if not isinstance(b, ToolResultBlock)]
        target.content = [*results, *rest]
    else:
        target.content.extend(content)
