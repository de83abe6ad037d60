"""The built-in ``ask_user`` tool: the model asks the owner to choose (SPEC §9)."""

from __future__ import annotations

from typing import Any

from kernel.core.asks import AskOutcome
from kernel.core.errors import ToolError
from kernel.core.session_modes import READS
from kernel.tools.registry import ToolContext, ToolRegistry

MAX_OPTIONS = 8
MAX_OPTION_LENGTH = 40  # an inline button shows about this much


def register(registry: ToolRegistry, default_seconds: float = 300.0) -> None:
    @registry.tool(effect=READS)  # asks the owner; changes nothing
    async def ask_user(
        question: str, options: list[str], context: ToolContext, wait_seconds: int = 0
    ) -> dict[str, Any]:
        """Ask the owner to pick one of a few concrete options (shown as buttons) and
        wait for the choice, when they must decide before you go on. The owner may
        answer in their own words instead: then ``reply`` holds what they wrote.

        Args:
            options: 2 to 8 answers, each within 40 characters
            wait_seconds: seconds to wait (0: the default)
        """
        choices = [o.strip() for o in options if o.strip()]
        if not question.strip() or not 2 <= len(choices) <= MAX_OPTIONS:
            raise ToolError(f"give a question and 2 to {MAX_OPTIONS} non-empty options")
        if any(len(o) > MAX_OPTION_LENGTH for o in choices):
            raise ToolError(f"keep each option within {MAX_OPTION_LENGTH} characters")
        if context.ask is None:
            raise ToolError("nobody can be asked in this channel; ask in your reply instead")
        seconds = float(wait_seconds) if wait_seconds > 0 else default_seconds
        answer = await context.ask(question.strip(), choices, kind="question", seconds=seconds)
        if answer.outcome is AskOutcome.UNDELIVERED:
            return {"answered": False, "note": "the question could not be shown to the owner"}
        if answer.text is not None:  # typed instead of pressed
            return {"answered": True, "reply": answer.text}
        if answer.outcome is AskOutcome.TIMEOUT or answer.option is None:
            return {"answered": False, "note": f"no answer within {seconds:g} s"}
        return {"answered": True, "choice": choices[answer.option]}
