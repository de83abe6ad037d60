"""Session titles from a small, separate model (seed 004 Phase 1 "会话标题").

Generated once after a session's first turn and on ``/retitle``. Transient failures
are retried after 0, 3, 15 and 60 seconds; a 429 gives up at once (the owner's quota
matters more than a title); a title never blocks or breaks the chat.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable

from kernel.core.errors import (
    BudgetExceededError,
    ProviderError,
    RateLimitedError,
    TransientProviderError,
)
from kernel.core.i18n import t
from kernel.core.messages import Message, TextBlock
from kernel.core.provider import ChatRequest, Completion, Provider, RetryPolicy, Sleep
from kernel.spend import CallTag, Meter

log = logging.getLogger(__name__)

RETRY_DELAYS = (0.0, 3.0, 15.0, 60.0)
MAX_TITLE = 40

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


def without_thinking(raw: str) -> str:
    """``raw`` without its reasoning blocks (closed or not)."""
    return _THINK.sub("", raw)


def clean_title(raw: str) -> str:
    """Strip reasoning blocks (closed or not), quotes, a 'Title:' prefix, extra lines."""
    text = without_thinking(raw).strip()
    text = text.splitlines()[0].strip() if text else ""
    text = re.sub(r"^(title|标题)\s*[:：]\s*", "", text, flags=re.IGNORECASE)
    text = text.strip(" \"'“”‘’「」《》*#`")
    return text[:MAX_TITLE].rstrip()


class TitleMaker:
    def __init__(
        self,
        factory: Callable[[], Provider],
        sleep: Sleep,
        delays: tuple[float, ...] = RETRY_DELAYS,
    ) -> None:
        self._factory = factory
        self._provider: Provider | None = None
        self._lock = asyncio.Lock()
        self.sleep = sleep
        self.delays = delays

    async def provider(self) -> Provider:
        """Built on first use, in a thread: importing an SDK must not delay start-up
        nor stall the event loop."""
        async with self._lock:
            if self._provider is None:
                self._provider = await asyncio.to_thread(self._factory)
        return self._provider

    async def aclose(self) -> None:
        if self._provider is not None:
            await self._provider.aclose()

    async def make(self, messages: list[Message], meter: Meter, tag: CallTag) -> str | None:
        """A title for ``messages``, its calls through ``meter``; None when there is
        none to be had (nothing to title, the budget, the provider)."""
        transcript = "\n".join(f"{m.role}: {m.text[:500]}" for m in messages if m.text.strip())[
            :4000
        ]
        if not transcript:
            return None
        provider = await self.provider()
        request = ChatRequest(
            model=provider.default_model,
            system=t("prompt.title"),
            messages=[Message("user", [TextBlock(transcript)])],
        )
        for attempt, delay in enumerate(self.delays):
            if delay:
                await self.sleep(delay)
            try:
                return clean_title(await complete_once(meter, provider, request, tag)) or None
            except BudgetExceededError:
                log.info("no title: the budget does not admit the call")
                return None
            except RateLimitedError as exc:
                if exc.status != 529 and exc.code != "overloaded_error":
                    log.warning("title generation rate-limited; giving up")
                    return None
                # "Overloaded" is the provider's trouble, not the owner's quota: retry.
                log.warning("title attempt %d failed (overloaded)", attempt + 1)
            except TransientProviderError as exc:
                log.warning("title attempt %d failed (%s)", attempt + 1, exc.code or "transient")
            except ProviderError as exc:
                log.warning("title generation failed (%s)", exc.code or exc.status)
                return None
        return None


async def complete_once(
    meter: Meter, provider: Provider, request: ChatRequest, tag: CallTag
) -> str:
    # One attempt per call: the delays above are the title's own retry policy.
    async for event in meter.stream(provider, request, RetryPolicy(max_retries=0), tag):
        if isinstance(event, Completion):
            return event.text
    return ""
