"""The Claude adapter's own work per call, through the real SDK against the simulator:
what it leaves off (OpenTelemetry spans Kernel never reads) changes nothing sent."""

from __future__ import annotations

from kernel.providers.sdk import SDKProvider
from tests.providers.wire import Call, Factory, ask
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply


async def test_no_opentelemetry_spans_and_no_trace_context_sent(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    """Kernel configures no tracer provider: the SDK's call spans were non-recording, yet
    each cost a walk of the request. Every client (each key's, a probe's) has them off."""
    provider: SDKProvider = make_provider(anthropic_sim, api_keys=["k2"])
    provider.limit_time(5.0, 1.0)
    clients = provider._clients  # noqa: SLF001
    assert len(clients) == 2
    for client in clients:
        assert client.open_telemetry["traces"]["enabled"] is False
        assert client._tracer is None  # noqa: SLF001
    anthropic_sim.enqueue(text_reply("hello"))
    assert (await Call().completion(provider, ask())).text == "hello"
    headers = {name.lower() for name in anthropic_sim.requests[-1].headers}
    assert not headers & {"traceparent", "tracestate", "baggage"}
