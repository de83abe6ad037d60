"""``/v1/chat/completions`` and ``/v1/models`` for OpenAI-only tools: the official openai
SDK as the client, either provider type behind Kernel."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, ToolUse, text_reply

CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
async def oai() -> AsyncIterator[Any]:
    clients: list[openai.AsyncOpenAI] = []

    def make(sc: Sidecar) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(
            api_key=sc.api_key or "unused", base_url=f"{sc.url}/v1", max_retries=0
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_chat_completion_json_and_stream(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    sc = await sidecar(sim, api_key=API_KEY)
    client = oai(sc)
    sim.enqueue(Reply(Text("Hello there"), usage=(11, 3)), text_reply("streamed answer"))
    answer = await client.chat.completions.create(
        model="model-b",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ],
        temperature=0.5,
        stop=["never"],
    )
    assert answer.choices[0].message.content == "Hello there"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.prompt_tokens == 11
    assert answer.usage.completion_tokens == 3
    body = sim.requests[-1].body
    assert body["model"] == "model-b" and body["temperature"] == 0.5
    assert "Be brief." in json.dumps(body)

    stream = await client.chat.completions.create(
        model="model-a",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, finish, usage = [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(pieces) == "streamed answer" and finish == "stop"
    assert usage is not None and usage.completion_tokens > 0


async def test_tool_calls_round_trip(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    sc = await sidecar(sim)
    client = oai(sc)
    sim.enqueue(Reply(ToolUse("get_weather", {"city": "Paris"})), text_reply("Sunny in Paris"))
    first = await client.chat.completions.create(
        model="model-a", messages=[{"role": "user", "content": "weather?"}], tools=[TOOL]
    )
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    stream = await client.chat.completions.create(
        model="model-a",
        tools=[TOOL],
        stream=True,
        messages=[
            {"role": "user", "content": "weather?"},
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21°C"},
        ],
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Sunny in Paris"
    assert "sunny, 21°C" in json.dumps(sim.requests[-1].body, ensure_ascii=False)


async def test_models_list_and_errors_for_openai_clients(
    sidecar: SidecarFactory, openai_sim: OpenAISim, oai: Any
) -> None:
    sc = await sidecar(openai_sim, language="zh")
    client = oai(sc)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["model-a", "model-b"]
    assert models.data[0].owned_by == "main" and models.data[0].object == "model"
    with pytest.raises(openai.NotFoundError) as missing:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}]
        )
    assert "gpt-4o" in missing.value.message and not CJK.search(missing.value.message)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="model-a", messages=[{"role": "user", "content": "x"}], reasoning_effort="high"
        )
    assert "reasoning_effort" in refused.value.message and "main" in refused.value.message
    with pytest.raises(openai.BadRequestError) as bad_role:
        await client.chat.completions.create(
            model="model-a",
            messages=[{"role": "robot", "content": "x"}],  # type: ignore[misc,list-item]
        )
    assert "messages.0.role" in bad_role.value.message
    # OpenAI's own error shape (not Anthropic's) on its route.
    assert isinstance(bad_role.value.body, dict) and bad_role.value.body["type"] == (
        "invalid_request_error"
    )
    assert "messages.0.role" in bad_role.value.body["message"]
    status, body, _ = await sc.call("POST", "/v1/chat/completions", {"model": "gpt-4o"})
    assert status in (400, 404) and set(body) == {"error"}, body
    assert openai_sim.requests == []
