"""The judge of facts that change (issue 39): one small call to the titles model (the
``[titles]`` side model, kernel/agent/titles.py) names the known memory a new fact
restates or replaces. The call goes through the meter like every model call (the
budget before, the ledger after, purpose ``memory``); without a titles model, or when
the call fails, there is no answer and the fact is saved as new
(kernel/memory/memories.py bounds the wait)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from kernel.agent.titles import TitleMaker, complete_once, without_thinking
from kernel.audit import AuditLog, kinds
from kernel.core.errors import KernelError
from kernel.core.i18n import t
from kernel.core.messages import Message, TextBlock
from kernel.core.provider import ChatRequest
from kernel.memory.facts import chosen
from kernel.spend import CallTag, Meter
from kernel.store.db import MemoryRow

log = logging.getLogger(__name__)

MAX_ANSWER_TOKENS = 16  # a number


class FactJudge:
    """``Memories.judge`` of an agent: ``titles`` is read at each call (the titles model
    is set after the agent is made)."""

    def __init__(self, titles: Callable[[], TitleMaker | None], meter: Meter) -> None:
        self.titles = titles
        self.meter = meter

    async def __call__(self, fact: str, known: Sequence[MemoryRow]) -> int | None:
        maker = self.titles()
        if maker is None or not known:
            return None
        provider = await maker.provider()
        listing = "\n".join(f"{n}. {m.text}" for n, m in enumerate(known, start=1))
        request = ChatRequest(
            model=provider.default_model,
            system=t("prompt.fact_judge"),
            messages=[
                Message("user", [TextBlock(t("prompt.fact_judge_ask", known=listing, fact=fact))])
            ],
            max_tokens=MAX_ANSWER_TOKENS,
        )
        try:
            answer = await complete_once(self.meter, provider, request, CallTag("memory"))
        except KernelError as exc:  # the provider, the budget: the fact is saved as new
            log.info("memory judge: no answer (%s)", type(exc).__name__)
            return None
        return chosen(without_thinking(answer), known)


def audit_changes(audit: AuditLog) -> Callable[..., None]:
    """``Memories.changed``: each change one ``memory.changed`` audit row."""

    def changed(action: str, actor: str, **facts: Any) -> None:
        audit.note(kinds.MEMORY_CHANGED, actor=actor, action=action, **facts)

    return changed
