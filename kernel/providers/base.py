"""The one interface every model provider implements, and the retry policy around it.

A provider turns a :class:`ChatRequest` into a stream of :class:`StreamEvent` values:
text deltas as they arrive, a notice when a tool call starts, and one final
:class:`Completion` holding the whole assistant message. SDK errors are translated
into Kernel's :mod:`kernel.errors` tree inside the adapter, so nothing above this
layer sees an SDK type.
"""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from kernel.agent.messages import ImageBlock, Message, ToolSpec
from kernel.errors import CapabilityError, TransientProviderError
from kernel.i18n import t

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Capabilities:
    stream: bool = True
    tool_call: bool = True
    attachments: bool = True
    reasoning: bool = False


_CAPABILITY_FIELDS = ("stream", "tool_call", "attachments", "reasoning")


@dataclass(slots=True)
class ChatRequest:
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ToolCallStarted:
    id: str
    name: str


@dataclass(slots=True)
class RawToolCall:
    """A tool call as the model sent it: arguments still unparsed text (may be broken)."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class Completion:
    text: str
    tool_calls: list[RawToolCall]
    stop_reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0


StreamEvent = TextDelta | ToolCallStarted | Completion


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0


class Provider(ABC):
    """A configured model endpoint. Subclasses set ``capabilities`` and implement ``_stream``."""

    capabilities: Capabilities = Capabilities()

    def __init__(
        self,
        name: str,
        models: list[str],
        default_model: str,
        declared: list[str] | None = None,
    ) -> None:
        self.name = name
        self.models = models
        self.default_model = default_model
        if declared is not None:
            # The owner narrowed what this endpoint can do (e.g. a text-only model).
            self.capabilities = Capabilities(**{f: f in declared for f in _CAPABILITY_FIELDS})

    @abstractmethod
    def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """One attempt: stream the answer, raising Kernel errors on failure."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release the SDK client."""

    def check(self, request: ChatRequest) -> None:
        """Refuse, with a named reason, what this provider cannot do. (Without
        ``tool_call`` the agent simply offers no tools: the owner declared that.)"""
        if not self.capabilities.attachments and any(
            isinstance(b, ImageBlock) for m in request.messages for b in m.content
        ):
            raise CapabilityError(
                t("provider.no_images"), provider=self.name, code="provider_not_supported"
            )


Sleep = Callable[[float], Awaitable[None]]


async def stream_with_retry(
    provider: Provider,
    request: ChatRequest,
    policy: RetryPolicy,
    *,
    sleep: Sleep = asyncio.sleep,
    on_retry: Callable[[int, float, Exception], None] | None = None,
) -> AsyncIterator[StreamEvent]:
    """Stream from ``provider``, retrying transient failures that happen before any output.

    Once a delta has been yielded the caller has shown it, so a later failure is raised
    rather than silently replayed. ``Retry-After`` wins over the exponential backoff.
    """
    provider.check(request)
    attempt = 0
    while True:
        produced = False
        try:
            async for event in provider._stream(request):
                produced = produced or isinstance(event, (TextDelta, ToolCallStarted))
                yield event
            return
        except TransientProviderError as exc:
            if produced or attempt >= policy.max_retries:
                raise
            delay = min(policy.max_delay, policy.base_delay * (2**attempt))
            delay *= 0.8 + 0.4 * random.random()  # jitter
            if exc.retry_after is not None:
                if exc.retry_after > policy.max_delay:
                    raise  # waiting that long silently would look like a hang; say so now
                delay = max(0.0, exc.retry_after)
            attempt += 1
            log.warning(
                "provider %s attempt %d failed (%s); retrying in %.2fs",
                provider.name,
                attempt,
                type(exc).__name__,
                delay,
            )
            if on_retry is not None:
                on_retry(attempt, delay, exc)
            await sleep(delay)
