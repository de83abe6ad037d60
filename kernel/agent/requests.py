"""The request of one step for one candidate model, as its provider can take it
(tools only where it calls tools, thinking only where it reasons, and a model's own
thinking blocks handed back to that model only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernel.agent.context import flatten_tool_blocks
from kernel.core.messages import Message, ToolSpec
from kernel.core.provider import ChatRequest, Provider, thinking_for
from kernel.routing import Candidate


@dataclass(slots=True)
class Requests:
    """Builds a turn's requests; ``working`` and ``thinking`` are the turn's own, read
    as they stand at each step. ``thinking``: index in ``working`` → (the model that
    made the blocks, the blocks)."""

    system: str
    context: str
    anchor: int  # the turn's own message: the volatile context rides with it
    working: list[Message]
    offered: list[ToolSpec]
    thinking: dict[int, tuple[str, list[dict[str, Any]]]]

    def __call__(self, candidate: Candidate, provider: Provider) -> ChatRequest:
        working = self.working
        tools = self.offered if provider.capabilities.tool_call else []
        thinking = thinking_for(candidate.reasoning)
        if thinking is not None and not provider.capabilities.reasoning:
            thinking = None
        if not tools:  # no tool blocks, so no thinking to hand back either
            return ChatRequest(
                candidate.model,
                self.system,
                flatten_tool_blocks(working),
                thinking=thinking,
                context=self.context,
                context_at=self.anchor,
            )
        history = {
            index: blocks
            for index, (made_by, blocks) in self.thinking.items()
            if made_by == str(candidate)
        }
        continuing = len(working) - 2  # the assistant message a tool loop goes on from
        budgeted = thinking is not None and thinking.mode == "enabled"
        if budgeted and working[-1].tool_results and continuing not in history:
            # Budgeted thinking requires that message to start with this model's own
            # thinking (another model answered it, or none was asked): not this step.
            # (Adaptive thinking does not: the model may well have skipped it.)
            thinking = None
        return ChatRequest(
            candidate.model,
            self.system,
            working,
            tools,
            thinking=thinking,
            history_thinking=history,
            context=self.context,
            context_at=self.anchor,
        )
