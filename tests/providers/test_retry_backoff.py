"""The model call's backoff (kernel/core/provider.py ``stream_with_retry`` over
``RetryPolicy.backoff``): what a real adapter waits between tries against the Anthropic
simulator, the waits recorded instead of slept, the jitter fixed at its bounds."""

from __future__ import annotations

import pytest

from kernel.core.errors import RateLimitedError
from kernel.core.provider import Completion, RetryPolicy, stream_with_retry
from tests.providers.wire import Factory, ask
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, text_reply

OVERLOADED = Error(529, "overloaded_error", "Overloaded")
POLICY = RetryPolicy(max_retries=4, base_delay=1.0, max_delay=4.0)


async def call(provider_sim: AnthropicSim, make_provider: Factory, rand: float) -> list[float]:
    """One call through the policy; the waits it took (the answer is the simulator's)."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    events = [
        e
        async for e in stream_with_retry(
            make_provider(provider_sim), ask(), POLICY, sleep=sleep, rand=lambda: rand
        )
    ]
    last = events[-1]
    assert isinstance(last, Completion) and last.text == "ok"
    return slept


@pytest.mark.parametrize(
    ("rand", "waits"),
    [(0.0, [0.8, 1.6, 3.2, 3.2]), (1.0, [1.2, 2.4, 4.0, 4.0])],
    ids=["low", "high"],
)
async def test_waits_double_to_the_cap_within_the_jitter_bounds(
    anthropic_sim: AnthropicSim, make_provider: Factory, rand: float, waits: list[float]
) -> None:
    """80 %–120 % of 1, 2, 4, 4 s (8 s capped), and never above the 4 s cap."""
    anthropic_sim.enqueue(*[OVERLOADED] * 4, text_reply("ok"))
    assert await call(anthropic_sim, make_provider, rand) == pytest.approx(waits)
    assert len(anthropic_sim.requests) == 5


async def test_retry_after_wins_over_the_backoff_and_its_jitter(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    slow_down = Error(429, "rate_limit_error", "slow down", retry_after=3)
    anthropic_sim.enqueue(slow_down, OVERLOADED, text_reply("ok"))
    assert await call(anthropic_sim, make_provider, 1.0) == pytest.approx([3.0, 2.4])


async def test_a_retry_after_beyond_the_cap_is_raised_at_once(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    anthropic_sim.enqueue(Error(429, "rate_limit_error", "slow down", retry_after=10))
    with pytest.raises(RateLimitedError):
        await call(anthropic_sim, make_provider, 0.5)
    assert len(anthropic_sim.requests) == 1
