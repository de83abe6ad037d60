"""Which Kernel error each provider answer becomes, through the real SDKs against the
simulators, and whether another model may answer instead (``failover_cause``): refused
keys and bad requests are reported, quotas and transient causes may be failed over."""

from __future__ import annotations

import pytest

from kernel.core.errors import (
    InputRefusedError,
    ProviderAuthError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
    failover_cause,
)
from tests.providers.wire import Call, Factory, Sim, ask
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error

CREDIT = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
    "Billing to upgrade or purchase credits."
)
QUOTA = "You exceeded your current quota, please check your plan and billing details."

CASES = [
    # (API, scripted answer, Kernel's error, failover cause)
    ("anthropic", Error(401, "authentication_error", "invalid x-api-key"), ProviderAuthError, None),
    (
        "anthropic",
        Error(403, "permission_error", "Your API key does not have permission"),
        ProviderAuthError,
        None,
    ),
    ("openai", Error(401, "invalid_request_error", "Incorrect API key"), ProviderAuthError, None),
    # A 403 that does not say the key is refused (a project or region not allowed, a
    # moderation refusal) is reported, but does not mark the provider unusable.
    ("openai", Error(403, "invalid_request_error", "Project not allowed"), ProviderError, None),
    (
        "openai",
        Error(403, "moderation_error", "Your input was flagged: violence"),
        InputRefusedError,
        None,
    ),
    (
        "openai",
        Error(429, "insufficient_quota", QUOTA, code="insufficient_quota"),
        QuotaExceededError,
        "quota_exceeded",
    ),
    (
        "anthropic",
        Error(400, "invalid_request_error", CREDIT),
        QuotaExceededError,
        "quota_exceeded",
    ),
    (
        "openai",
        Error(402, "billing_error", "Payment required"),
        QuotaExceededError,
        "quota_exceeded",
    ),
    (
        "anthropic",
        Error(402, "billing_error", "Payment required"),
        QuotaExceededError,
        "quota_exceeded",
    ),
    (
        "anthropic",
        Error(529, "overloaded_error", "Overloaded"),
        RateLimitedError,
        "overloaded_error",
    ),
    (
        "openai",
        Error(429, "requests", "Rate limit reached", code="rate_limit_exceeded"),
        RateLimitedError,
        "requests",
    ),
    (
        "anthropic",
        Error(500, "api_error", "Internal server error"),
        TransientProviderError,
        "api_error",
    ),
    (
        "anthropic",
        Error(400, "invalid_request_error", "max_tokens: too large"),
        ProviderError,
        None,
    ),
    ("openai", Error(400, "invalid_request_error", "Invalid 'tools'"), ProviderError, None),
    (
        "anthropic",
        Error(400, "invalid_request_error", "prompt is too long: 210345 tokens > 200000 maximum"),
        InputRefusedError,
        None,
    ),
]


@pytest.mark.parametrize(
    ("api", "answer", "expected", "cause"),
    CASES,
    ids=[f"{api}-{answer.status}-{expected.__name__}" for api, answer, expected, _ in CASES],
)
async def test_answers_become_kernel_errors(
    anthropic_sim: AnthropicSim,
    openai_sim: OpenAISim,
    make_provider: Factory,
    api: str,
    answer: Error,
    expected: type[ProviderError],
    cause: str | None,
) -> None:
    sim: Sim = anthropic_sim if api == "anthropic" else openai_sim
    provider = make_provider(sim)
    sim.enqueue(answer)
    with pytest.raises(ProviderError) as caught:
        await Call().completion(provider, ask())
    error = caught.value
    assert type(error) is expected
    assert error.status == answer.status
    assert failover_cause(error) == cause
    assert answer.message[:20] in str(error)  # the API's own words are kept
