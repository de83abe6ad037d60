"""The one interface every model provider implements, and the retry policy around it.

A provider turns a :class:`ChatRequest` into a stream of :class:`StreamEvent` values:
text deltas as they arrive (and thinking deltas, when thinking was asked for), a notice
when a tool call starts, and one final :class:`Completion` holding the whole assistant
message with the token usage the provider reported (:class:`~kernel.core.usage.Usage`:
fresh input, output, cache reads and cache writes). SDK errors are translated
into Kernel's :mod:`kernel.core.errors` tree inside the adapter, so nothing above this
layer sees an SDK type.
"""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from kernel.core.backoff import Backoff
from kernel.core.errors import (
    CapabilityError,
    ProviderAuthError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)
from kernel.core.i18n import t
from kernel.core.messages import ImageBlock, Message, ToolSpec
from kernel.core.usage import Usage

log = logging.getLogger(__name__)


DEFAULT_MAX_TOKENS = 4096  # a call's output ceiling when neither request nor provider sets one
MIN_THINKING_BUDGET = 1024  # the Messages API's least budget_tokens


@dataclass(frozen=True, slots=True)
class Capabilities:
    stream: bool = True
    tool_call: bool = True
    attachments: bool = True
    reasoning: bool = False


_CAPABILITY_FIELDS = ("stream", "tool_call", "attachments", "reasoning")


@dataclass(frozen=True, slots=True)
class Thinking:
    """Extended thinking asked for: a token budget (``enabled``) or the model's own
    judgement (``adaptive``). No thinking is ``None``."""

    mode: Literal["enabled", "adaptive"]
    budget_tokens: int = 0
    effort: str = ""  # "low" | "medium" | "high" (…) when the client named one


def thinking_for(reasoning: str | int | None) -> Thinking | None:
    """The thinking a configured ``reasoning`` asks for: a level is the model's own
    judgement at that effort (Claude: adaptive thinking with ``output_config.effort``;
    OpenAI-compatible: ``reasoning_effort``), a number a budget of thinking tokens;
    ``"off"`` or unset is none."""
    if reasoning is None or reasoning == "off":
        return None
    if isinstance(reasoning, int):
        return Thinking("enabled", budget_tokens=reasoning)
    return Thinking("adaptive", effort=reasoning)


def thinking_budget(thinking: Thinking | None) -> int:
    """The thinking tokens a budget asks for (at least the API's minimum); 0 for none."""
    if thinking is None or thinking.mode != "enabled":
        return 0
    return max(thinking.budget_tokens, MIN_THINKING_BUDGET)


def output_ceiling(max_tokens: int, thinking: Thinking | None) -> int:
    """What a call may write: ``max_tokens``, raised by a thinking budget it does not
    exceed (the answer keeps its own room on top of the thinking). The Claude adapter
    sends this; the meter's worst case counts it."""
    budget = thinking_budget(thinking)
    return max_tokens + budget if budget and max_tokens <= budget else max_tokens


@dataclass(slots=True)
class Sampling:
    """Sampling options a client may set; ``None`` leaves the provider's default."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ChatRequest:
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)
    thinking: Thinking | None = None
    # Anthropic-shaped {"type": "auto"|"any"|"tool"|"none", "name"?, "disable_parallel_tool_use"?}
    tool_choice: dict[str, Any] | None = None
    # Thinking blocks (Anthropic wire form, signature included) of the assistant message
    # at each index of ``messages``, handed back as a client sent them: a Claude backend
    # needs them before a tool result when thinking is on. Other providers ignore them.
    history_thinking: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # Volatile context (recalled memories, the current time) for the message at index
    # ``context_at`` of ``messages`` (the turn's own user message), appended by the
    # adapter after that message's content, so that everything before it (tools,
    # system, the conversation so far) stays one stable prefix a provider can cache.
    context: str = ""
    context_at: int | None = None


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ThinkingDelta:
    """A piece of the model's thinking, or the signature that closes a thinking block."""

    text: str = ""
    signature: str = ""


@dataclass(slots=True)
class ThinkingPart:
    """One whole thinking block; ``redacted`` holds a redacted block's opaque data."""

    text: str = ""
    signature: str = ""
    redacted: str = ""


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
    input_tokens: int = 0  # as the provider reported them (0: it did not); fresh input only
    output_tokens: int = 0
    stop_sequence: str | None = None  # the one that ended the text (stop_reason "stop_sequence")
    thinking: list[ThinkingPart] = field(default_factory=list)
    cache_read_tokens: int = 0  # input served from the provider's prompt cache
    cache_write_tokens: int = 0  # input written to it
    # False: the provider sent no usage at all (an OpenAI-compatible server that ignores
    # stream_options.include_usage): the counts above are not zero, they are unknown.
    usage_reported: bool = True

    @property
    def usage(self) -> Usage:
        return Usage(
            self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens
        )


@dataclass(slots=True)
class UsageSeen:
    """The usage a provider reported before its answer ended (Anthropic's
    ``message_start``: the input it read). Only the meter reads it, to price a call
    cancelled before its :class:`Completion`; it never reaches the meter's callers."""

    usage: Usage


StreamEvent = TextDelta | ThinkingDelta | ToolCallStarted | Completion | UsageSeen


def thinking_blocks(parts: list[ThinkingPart]) -> list[dict[str, Any]]:
    """Thinking parts in the Messages API's wire form (what ``history_thinking`` holds),
    exactly as they came: a tool loop must send them back unchanged. Parts without a
    signature (an OpenAI-compatible server's reasoning text) cannot be sent back."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.redacted:
            out.append({"type": "redacted_thinking", "data": part.redacted})
        elif part.signature:
            out.append({"type": "thinking", "thinking": part.text, "signature": part.signature})
    return out


class StopScanner:
    """Ends streamed text at the first of ``sequences``, for providers whose API cannot
    say which stop sequence ended an answer. Text that may be the start of one is held
    back until the next piece decides; each piece is scanned once per sequence."""

    def __init__(self, sequences: list[str]) -> None:
        self.sequences = [s for s in sequences if s]
        self._hold = max((len(s) for s in self.sequences), default=1) - 1
        self._pending = ""
        self.matched: str | None = None

    def feed(self, text: str) -> str:
        """What may be shown now; after a match, nothing more."""
        if self.matched is not None or not self.sequences:
            return "" if self.matched is not None else text
        buffer = self._pending + text
        cut = -1
        for sequence in self.sequences:
            at = buffer.find(sequence)
            if at != -1 and (cut == -1 or at < cut):
                cut, self.matched = at, sequence
        if cut != -1:
            self._pending = ""
            return buffer[:cut]
        keep = min(self._hold, len(buffer))
        self._pending = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        pending, self._pending = self._pending, ""
        return "" if self.matched is not None else pending


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0

    @property
    def backoff(self) -> Backoff:
        """``base_delay`` doubling to ``max_delay``, each wait 80 %–120 % of itself."""
        cap = max(self.max_delay, 0.0)
        return Backoff(min(max(self.base_delay, 0.0), cap), cap, jitter=0.2)


class Provider(ABC):
    """A configured model endpoint. Subclasses set ``capabilities`` and implement ``_stream``;
    one with several API keys sets ``key_count`` and implements :meth:`rotate_key`."""

    capabilities: Capabilities = Capabilities()
    key_count: int = 1  # the keys it can use in turn
    # It yields :class:`UsageSeen` as soon as the provider reads the request (Anthropic's
    # message_start): a call cancelled before that was not billed. Without it nothing
    # tells a cancelled call's cost (a reasoning model bills what it thought unseen):
    # the meter counts the call's worst case.
    reports_usage_early: bool = False

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

    def rotate_key(self, error: ProviderError) -> bool:
        """Use the next key after ``error`` (429, a used-up quota, a refused key: that
        key is then dropped for good); True when another key is now in use."""
        return False

    def check(self, request: ChatRequest) -> None:
        """Refuse, with a named reason, what this provider cannot do. (Without
        ``tool_call`` the agent simply offers no tools: the owner declared that.)"""
        if not self.capabilities.attachments and any(
            isinstance(b, ImageBlock) for m in request.messages for b in m.content
        ):
            raise CapabilityError(
                t("provider.no_images"), provider=self.name, code="provider_not_supported"
            )
        thinking = request.thinking
        if thinking is not None and thinking.mode == "enabled" and not self.capabilities.reasoning:
            raise CapabilityError(
                "thinking needs the reasoning capability", provider=self.name, code="no_reasoning"
            )


Sleep = Callable[[float], Awaitable[None]]


async def stream_with_retry(
    provider: Provider,
    request: ChatRequest,
    policy: RetryPolicy,
    *,
    sleep: Sleep = asyncio.sleep,
    on_retry: Callable[[int, float, Exception], None] | None = None,
    rand: Callable[[], float] = random.random,
) -> AsyncIterator[StreamEvent]:
    """Stream from ``provider``, retrying transient failures that happen before any output.

    Once a delta has been yielded the caller has shown it, so a later failure is raised
    rather than silently replayed. ``Retry-After`` wins over the exponential backoff.
    A provider with several keys moves to its next key at once on a 429 or a used-up
    quota (each key at most once per call) and on a refused key (dropped for good, so a
    call ends with ProviderAuthError only when no key is left), before any backoff.
    The waits are ``policy.backoff``'s; ``rand``: its jitter (tests fix it).
    """
    provider.check(request)
    attempt = 0
    rotated = 0
    while True:
        produced = False
        try:
            async for event in provider._stream(request):
                produced = produced or isinstance(
                    event, (TextDelta, ThinkingDelta, ToolCallStarted)
                )
                yield event
            return
        except ProviderError as exc:
            # What the owner's words name: the model and how often it was retried.
            exc.model, exc.retries = exc.model or request.model, attempt
            if produced:
                raise
            if isinstance(exc, ProviderAuthError) and provider.rotate_key(exc):
                # That key is dropped for good (so this ends): the next is tried at once.
                log.warning("provider %s: a key was refused; trying the next", provider.name)
                continue
            if (
                isinstance(exc, RateLimitedError | QuotaExceededError)
                and rotated < provider.key_count - 1
                and provider.rotate_key(exc)
            ):
                rotated += 1
                log.warning("provider %s: %s on one key; trying the next", provider.name, exc.code)
                continue
            if not isinstance(exc, TransientProviderError) or attempt >= policy.max_retries:
                raise
            if exc.retry_after is not None and exc.retry_after > policy.max_delay:
                raise  # waiting that long silently would look like a hang; say so now
            attempt += 1
            delay = policy.backoff.delay(attempt, exc.retry_after, rand=rand)
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
