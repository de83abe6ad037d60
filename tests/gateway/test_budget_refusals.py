"""HTTP callers over the budget (issue 16): ``budget_exceeded`` (402) in the sidecar's
error model and as the SSE error event, and in each model API's own shape on ``/v1``
(the official SDKs as clients). Nothing reaches the provider."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from tests.gateway.conftest import Sidecar, SidecarFactory, Sim, message, sse_events

# A turn's worst case (max_tokens 1024 at 0.001 a token) passes a 0.5 limit, and so
# does a /v1 request asking for 1000 tokens.
OVER = """
[providers.main.prices.model-a]
input = 10.0
output = 1000.0
[budget]
daily = 0.5
"""


async def start(sidecar: SidecarFactory, sim: Sim) -> Sidecar:
    return await sidecar(sim, extra=OVER)


async def test_agent_process_answers_402_in_the_error_model(
    sidecar: SidecarFactory, sim: Sim
) -> None:
    sc = await start(sidecar, sim)
    status, data = await sc.process("hello")

    assert status == 402
    error = data["error"]
    assert error["code"] == "budget_exceeded" and "$0.50" in error["message"]
    details = error["details"]
    assert (details["scope"], details["limit"], details["currency"]) == ("day", 0.5, "USD")
    assert details["spent"] == 0 and details["worst_case"] > 1.0
    assert sim.requests == []


async def test_agent_process_stream_ends_with_the_error_event(
    sidecar: SidecarFactory, sim: Sim
) -> None:
    sc = await start(sidecar, sim)
    body = {"input": [message("hello")], "stream": True}
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as r:
        assert r.status == 200
        events = [event async for event in sse_events(r)]

    assert events[-1] == "[DONE]"
    error = events[-2]
    assert error["type"] == "error" and error["meta"]["code"] == "budget_exceeded"
    assert sim.requests == []


@pytest.mark.parametrize("stream", [False, True])
async def test_v1_messages_answers_402_in_anthropics_shape(
    sidecar: SidecarFactory, sim: Sim, stream: bool
) -> None:
    sc = await start(sidecar, sim)
    client = anthropic.AsyncAnthropic(api_key=sc.api_key, base_url=sc.url, max_retries=0)
    try:
        with pytest.raises(anthropic.APIStatusError) as info:
            request: dict[str, Any] = {
                "model": "model-a",
                "max_tokens": 1000,
                "messages": [{"role": "user", "content": "hi"}],
            }
            if stream:
                async with client.messages.stream(**request) as events:
                    async for _ in events:
                        pass
            else:
                await client.messages.create(**request)
    finally:
        await client.close()

    assert info.value.status_code == 402
    body: Any = info.value.body
    assert body["type"] == "error" and body["error"]["type"] == "billing_error"
    assert body["error"]["message"].startswith("budget_exceeded: Kernel's day spend limit")
    assert sim.requests == []


async def test_v1_chat_completions_answers_402_in_openais_shape(
    sidecar: SidecarFactory, sim: Sim
) -> None:
    sc = await start(sidecar, sim)
    client = openai.AsyncOpenAI(api_key=sc.api_key, base_url=f"{sc.url}/v1", max_retries=0)
    try:
        with pytest.raises(openai.APIStatusError) as info:
            await client.chat.completions.create(
                model="model-a", messages=[{"role": "user", "content": "hi"}], max_tokens=1000
            )
    finally:
        await client.close()

    assert info.value.status_code == 402
    assert info.value.code == "budget_exceeded" and info.value.type == "budget_exceeded"
    assert "not sent to the model" in info.value.message
    assert sim.requests == []
