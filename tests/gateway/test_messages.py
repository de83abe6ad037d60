"""``/v1/messages``: the official anthropic SDK uses Kernel as its endpoint, with a Claude
provider and with an OpenAI-compatible provider behind it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.gateway.test_process import PNG
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Text, ToolUse, text_reply

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture
async def claude_client() -> AsyncIterator[Any]:
    clients: list[anthropic.AsyncAnthropic] = []

    def make(sc: Sidecar) -> anthropic.AsyncAnthropic:
        client = anthropic.AsyncAnthropic(
            api_key=sc.api_key or "unused", base_url=sc.url, max_retries=0
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


def sent_model(sim: AnthropicSim | OpenAISim, index: int = -1) -> str:
    return str(sim.requests[index].body["model"])


def sent_texts(sim: AnthropicSim | OpenAISim, index: int = -1) -> str:
    """Everything the model was sent, as one string (either wire format)."""
    return json.dumps(sim.requests[index].body, ensure_ascii=False)


async def test_plain_message(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, claude_client: Any
) -> None:
    sc = await sidecar(sim, api_key=API_KEY)
    client = claude_client(sc)
    sim.enqueue(text_reply("Hello from Kernel"))
    message = await client.messages.create(
        model="model-b",
        max_tokens=100,
        system="Answer in one line.",
        messages=[{"role": "user", "content": "hi there"}],
    )
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Hello from Kernel"
    assert message.model == "model-b" and message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0
    assert sent_model(sim) == "model-b"
    assert "Answer in one line." in sent_texts(sim) and "hi there" in sent_texts(sim)
    # Nothing of this is stored as a Kernel chat: it is a pass-through.
    _, chats, _ = await sc.call("GET", "/chats")
    assert [c["id"] for c in chats["chats"]] == ["chat-default"]


async def test_streamed_message(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, claude_client: Any
) -> None:
    sc = await sidecar(sim)
    client = claude_client(sc)
    sim.enqueue(Reply(Text("Streaming works", chunks=["Stream", "ing ", "works"])))
    async with client.messages.stream(
        model="model-a", max_tokens=50, messages=[{"role": "user", "content": "go"}]
    ) as stream:
        pieces = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert pieces == ["Stream", "ing ", "works"]
    assert final.content[0].text == "Streaming works"
    assert final.stop_reason == "end_turn"


@pytest.mark.parametrize("streamed", [False, True])
async def test_tool_use_round_trip(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, claude_client: Any, streamed: bool
) -> None:
    sc = await sidecar(sim)
    client = claude_client(sc)
    sim.enqueue(
        Reply(Text("Checking."), ToolUse("get_weather", {"city": "Paris"})),
        text_reply("It is sunny in Paris."),
    )
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]

    async def ask() -> Any:
        params = {"model": "model-a", "max_tokens": 200, "tools": [WEATHER_TOOL]}
        if not streamed:
            return await client.messages.create(messages=history, **params)
        async with client.messages.stream(messages=history, **params) as stream:
            return await stream.get_final_message()

    first = await ask()
    assert first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert (use.name, use.input) == ("get_weather", {"city": "Paris"})
    assert next(b for b in first.content if b.type == "text").text == "Checking."
    wire = sent_texts(sim, 0)
    assert "get_weather" in wire and '"city"' in wire  # the client's tool was offered

    history += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 24C"}],
        },
    ]
    second = await ask()
    assert second.content[0].text == "It is sunny in Paris."
    sent = sim.requests[1].body["messages"]
    if isinstance(sim, AnthropicSim):
        result = sent[-1]["content"][0]
        assert result["type"] == "tool_result" and result["content"] == "sunny, 24C"
        assert sent[-2]["content"][-1]["type"] == "tool_use"
    else:
        assert sent[-1] == {"role": "tool", "tool_call_id": use.id, "content": "sunny, 24C"}
        assert sent[-2]["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_images_pass_through(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, claude_client: Any
) -> None:
    sc = await sidecar(sim)
    client = claude_client(sc)
    sim.enqueue(text_reply("one red pixel"))
    image = {"type": "base64", "media_type": "image/png", "data": PNG}
    message = await client.messages.create(
        model="model-a",
        max_tokens=50,
        messages=[
            {
                "role": "user",
                "content": [{"type": "image", "source": image}, {"type": "text", "text": "?"}],
            }
        ],
    )
    assert message.content[0].text == "one red pixel"
    assert PNG in sent_texts(sim)


async def test_model_choice_alias_and_claude_names_to_active(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, claude_client: Any
) -> None:
    sc = await sidecar(anthropic_sim, extra='aliases = { fast = "model-b" }\n')
    client = claude_client(sc)
    anthropic_sim.enqueue(text_reply("a"), text_reply("b"))
    params: dict[str, Any] = {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    first = await client.messages.create(model="fast", **params)
    assert sent_model(anthropic_sim) == "model-b" and first.model == "model-b"
    second = await client.messages.create(model="claude-not-configured", **params)
    assert sent_model(anthropic_sim) == "model-a" and second.model == "model-a"


async def test_errors_are_in_the_anthropic_format(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, claude_client: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    client = claude_client(sc)
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(
            model="model-a",
            max_tokens=5,
            messages=[{"role": "user", "content": [{"type": "document", "source": {}}]}],
        )
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "document" in info.value.body["error"]["message"]  # type: ignore[index]

    anthropic_sim.enqueue(Error(429, "rate_limit_error", "slow down", retry_after=120))
    with pytest.raises(anthropic.RateLimitError) as limited:
        await client.messages.create(
            model="model-a", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert limited.value.response.headers["retry-after"] == "120"
    assert "slow down" in str(limited.value)

    status, data, _ = await sc.call(
        "POST", "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    )
    assert status == 400 and data == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": data["error"]["message"]},
    }
    assert "max_tokens" in data["error"]["message"]


async def test_provider_failure_mid_stream_is_an_error_event(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, claude_client: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    client = claude_client(sc)
    anthropic_sim.enqueue(Reply(Text("partial", chunks=["par", "tial"]), error_after=3))
    with pytest.raises(anthropic.APIStatusError):
        async with client.messages.stream(
            model="model-a", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        ) as stream:
            async for _ in stream.text_stream:
                pass


async def test_count_tokens(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, claude_client: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    client = claude_client(sc)
    short = await client.messages.count_tokens(
        model="model-a", messages=[{"role": "user", "content": "hello"}]
    )
    long = await client.messages.count_tokens(
        model="model-a",
        system="You are terse.",
        tools=[WEATHER_TOOL],
        messages=[{"role": "user", "content": "hello " * 400}],
    )
    assert 0 < short.input_tokens < long.input_tokens
    assert long.input_tokens >= 400
    assert anthropic_sim.requests == []  # estimated locally
