"""Several API keys per provider, through the real SDKs against the simulators' per-key
faults: a 429 or a used-up quota moves to the next key at once (no backoff), the key
stays usable for later calls; a refused key is dropped for good; one key never rotates.
No key reaches an error message or a log line."""

from __future__ import annotations

import logging

import httpx
import pytest

from kernel.core.errors import (
    ProviderAuthError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    failover_cause,
)
from kernel.providers.sdk import SDKProvider
from tests.providers.wire import Call, Factory, Sim, ask
from tests.sim.script import Error, text_reply

RATE_LIMITED = {
    "anthropic": Error(429, "rate_limit_error", "Number of request tokens has exceeded your limit"),
    "openai": Error(429, "requests", "Rate limit reached for requests", code="rate_limit_exceeded"),
}
OUT_OF_QUOTA = {
    "anthropic": Error(
        400,
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
        "Billing to upgrade or purchase credits.",
    ),
    "openai": Error(
        429,
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
        code="insufficient_quota",
    ),
}
REFUSED = {
    "anthropic": Error(401, "authentication_error", "invalid x-api-key"),
    "openai": Error(401, "invalid_request_error", "Incorrect API key provided: k1.", code=None),
}


def kind(sim: Sim) -> str:
    return "anthropic" if type(sim).__name__ == "AnthropicSim" else "openai"


@pytest.mark.parametrize("fault", [RATE_LIMITED, OUT_OF_QUOTA], ids=["429", "quota"])
async def test_a_limited_key_hands_over_to_the_next_at_once(
    sim: Sim, make_provider: Factory, fault: dict[str, Error]
) -> None:
    provider = make_provider(sim, api_keys=["k2", "k3"])
    assert provider.key_count == 3
    sim.fail_key("k1", fault[kind(sim)])
    sim.enqueue(text_reply("from k2"), text_reply("still k2"))
    call = Call(max_retries=3)
    assert (await call.completion(provider, ask())).text == "from k2"
    assert sim.keys_seen == ["k1", "k2"]
    assert call.sleeps == []  # another key answers now: no backoff
    # The next call starts on the key that answered.
    assert (await call.completion(provider, ask())).text == "still k2"
    assert sim.keys_seen[2:] == ["k2"]


async def test_rotation_is_round_robin_and_a_limited_key_stays_usable(
    sim: Sim, make_provider: Factory
) -> None:
    provider = make_provider(sim, api_keys=["k2"])
    limited = RATE_LIMITED[kind(sim)]
    sim.fail_key("k1", limited)
    sim.enqueue(text_reply("k2"), text_reply("k1 again"))
    await Call().completion(provider, ask())
    sim.clear_key("k1")
    sim.fail_key("k2", limited)
    assert (await Call().completion(provider, ask())).text == "k1 again"
    assert sim.keys_seen == ["k1", "k2", "k2", "k1"]


async def test_every_key_limited_is_the_error_after_each_was_tried_once(
    sim: Sim, make_provider: Factory
) -> None:
    provider = make_provider(sim, api_keys=["k2"])
    for key in ("k1", "k2"):
        sim.fail_key(key, OUT_OF_QUOTA[kind(sim)])
    with pytest.raises(QuotaExceededError) as caught:
        await Call(max_retries=2).completion(provider, ask())
    assert sim.keys_seen == ["k1", "k2"]  # a quota is not retried: each key once
    assert failover_cause(caught.value) == "quota_exceeded"  # another provider may answer


async def test_a_refused_key_is_dropped_for_good(
    sim: Sim, make_provider: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    provider = make_provider(sim, api_key="sk-first-secret", api_keys=["sk-second-secret"])
    sim.fail_key("sk-first-secret", REFUSED[kind(sim)])
    sim.enqueue(text_reply("second"), text_reply("second again"))
    call = Call(max_retries=2)
    assert (await call.completion(provider, ask())).text == "second"
    assert sim.keys_seen == ["sk-first-secret", "sk-second-secret"]
    # Dropped: the next call starts on the good key, and a 429 there finds no other.
    assert (await call.completion(provider, ask())).text == "second again"
    sim.fail_key("sk-second-secret", RATE_LIMITED[kind(sim)])
    with pytest.raises(RateLimitedError):
        await Call().completion(provider, ask())
    assert sim.keys_seen[2:] == ["sk-second-secret", "sk-second-secret"]
    assert call.sleeps == []
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "key 1 of 2 refused" in logged
    assert "secret" not in logged  # keys are named by position only


async def test_all_keys_refused_is_an_auth_error_without_the_keys(
    sim: Sim, make_provider: Factory
) -> None:
    provider = make_provider(sim, api_key="sk-first-secret", api_keys=["sk-second-secret"])
    for key in ("sk-first-secret", "sk-second-secret"):
        sim.fail_key(key, Error(401, "authentication_error", f"invalid x-api-key: {key}"))
    with pytest.raises(ProviderAuthError) as caught:
        await Call(max_retries=2).completion(provider, ask())
    assert sim.keys_seen == ["sk-first-secret", "sk-second-secret"]
    assert failover_cause(caught.value) is None  # reported, not failed over
    assert "secret" not in str(caught.value)  # every key is redacted
    with pytest.raises(ProviderAuthError):  # still refused; no key comes back by itself
        await Call().completion(provider, ask())
    assert len(sim.keys_seen) == 3


async def test_one_key_never_rotates(sim: Sim, make_provider: Factory) -> None:
    provider = make_provider(sim)
    assert provider.key_count == 1
    sim.fail_key("k1", RATE_LIMITED[kind(sim)])
    with pytest.raises(RateLimitedError):
        await Call().completion(provider, ask())
    assert sim.keys_seen == ["k1"]
    assert provider.rotate_key(RateLimitedError("429", provider="p")) is False


async def test_concurrent_calls_rotate_from_the_key_that_failed(
    sim: Sim, make_provider: Factory
) -> None:
    """Two calls fail on k1 together: both go on to k2 (the second does not skip past
    it to k3 because the first already moved)."""
    provider = make_provider(sim, api_keys=["k2", "k3"])
    limited = RATE_LIMITED[kind(sim)]
    first = provider._translate(_status_error(provider, 429), 0)
    second = provider._translate(_status_error(provider, 429), 0)
    assert isinstance(first, RateLimitedError) and isinstance(second, RateLimitedError)
    assert provider.rotate_key(first) and provider.rotate_key(second)
    sim.fail_key("k1", limited)
    sim.enqueue(text_reply("k2"))
    await Call().completion(provider, ask())
    assert sim.keys_seen == ["k2"]


def _status_error(provider: SDKProvider, status: int) -> Exception:
    """The SDK's own error for an HTTP ``status`` (what a failed attempt raises)."""
    request = httpx.Request("POST", "http://127.0.0.1/")
    response = httpx.Response(status, request=request, json={"error": {"message": "limited"}})
    error: Exception = provider.sdk.APIStatusError("limited", response=response, body=None)
    return error


async def test_every_key_speaks_through_one_pool_aiohttp_for_claude(
    sim: Sim, make_provider: Factory
) -> None:
    """Claude's calls go through the SDK's aiohttp transport (issue 37: well under half
    httpx's CPU per call), one session for every key, closed with the provider; an
    OpenAI-compatible provider keeps httpx (its SDK's aiohttp copy calls a refused
    connection a timeout: sdk.py)."""
    import aiohttp

    provider = make_provider(sim, api_keys=["k2"])
    sim.fail_key("k1", RATE_LIMITED[kind(sim)])
    sim.enqueue(text_reply("from k2"))
    assert (await Call(max_retries=1).completion(provider, ask())).text == "from k2"
    assert sim.keys_seen == ["k1", "k2"]
    pools = {id(client._client) for client in provider._clients}  # noqa: SLF001
    assert len(pools) == 1
    transport = provider._clients[0]._client._transport  # noqa: SLF001
    if kind(sim) == "openai":
        assert not hasattr(transport, "client")  # httpx's own
        return
    session = transport.client
    assert isinstance(session, aiohttp.ClientSession) and not session.closed
    await provider.aclose()
    assert session.closed


async def test_a_refused_connection_is_a_connection_error_not_a_timeout(
    sim: Sim, make_provider: Factory
) -> None:
    """What the owner is told depends on it: "could not reach" (check the address), not
    "did not answer in time" (wait)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = make_provider(sim)
    provider._clients = [  # noqa: SLF001 (the same client, its address closed)
        c.with_options(base_url=f"http://127.0.0.1:{port}/v1")
        for c in provider._clients  # noqa: SLF001
    ]
    with pytest.raises(ProviderError) as caught:
        await Call().completion(provider, ask())
    assert caught.value.code == "connection_error"
