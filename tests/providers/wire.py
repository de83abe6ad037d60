"""Helpers for provider tests on the wire: a real adapter (and its SDK) pointed at a model
simulator, and one call through ``stream_with_retry`` with its backoff sleeps recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel.config import ProviderConfig
from kernel.core.messages import Message, TextBlock
from kernel.core.provider import (
    ChatRequest,
    Completion,
    RetryPolicy,
    StreamEvent,
    stream_with_retry,
)
from kernel.providers.claude import ClaudeProvider
from kernel.providers.openai_compat import OpenAICompatProvider
from kernel.providers.sdk import SDKProvider
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim

Sim = AnthropicSim | OpenAISim


Factory = Callable[..., SDKProvider]


def provider_for(sim: Sim, **fields: Any) -> SDKProvider:
    """The adapter of the simulator's API, configured with ``fields`` (``api_key`` "k1")."""
    cfg = ProviderConfig(
        name="p",
        type="claude" if isinstance(sim, AnthropicSim) else "openai_compat",
        api_base=sim.base_url,
        models=["m"],
        default_model="m",
        **({"api_key": "k1"} | fields),
    )
    return ClaudeProvider(cfg) if isinstance(sim, AnthropicSim) else OpenAICompatProvider(cfg)


def ask(text: str = "hi", **fields: Any) -> ChatRequest:
    return ChatRequest("m", "be brief", [Message("user", [TextBlock(text)])], **fields)


class Call:
    """One call through the retry policy; ``sleeps`` holds the backoff waits it took."""

    def __init__(self, max_retries: int = 0) -> None:
        self.policy = RetryPolicy(max_retries=max_retries, base_delay=0.01, max_delay=0.05)
        self.sleeps: list[float] = []

    async def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    async def events(self, provider: SDKProvider, request: ChatRequest) -> list[StreamEvent]:
        return [
            e async for e in stream_with_retry(provider, request, self.policy, sleep=self._sleep)
        ]

    async def completion(self, provider: SDKProvider, request: ChatRequest) -> Completion:
        last = (await self.events(provider, request))[-1]
        assert isinstance(last, Completion)
        return last


def body(sim: Sim, index: int = -1) -> dict[str, Any]:
    sent = sim.requests[index].body
    assert isinstance(sent, dict)
    return sent
