"""The cache fields of ``/v1`` usage: ``/v1/messages`` answers with
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` beside the fresh
``input_tokens`` (JSON, and streamed in ``message_delta``); ``/v1/chat/completions``
with ``prompt_tokens`` including ``prompt_tokens_details.cached_tokens``. The figures
are the backend simulator's (tests/sim/caching.py), whichever provider type answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest

from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim

SYSTEM = "You answer questions about the owner's handbook. " * 120  # ~1500 tokens


@pytest.fixture
async def clients() -> AsyncIterator[Any]:
    made: list[anthropic.AsyncAnthropic | openai.AsyncOpenAI] = []

    def make(sc: Sidecar, kind: str) -> Any:
        key = sc.api_key or "unused"
        client: anthropic.AsyncAnthropic | openai.AsyncOpenAI = (
            anthropic.AsyncAnthropic(api_key=key, base_url=sc.url, max_retries=0)
            if kind == "anthropic"
            else openai.AsyncOpenAI(api_key=key, base_url=f"{sc.url}/v1", max_retries=0)
        )
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


def echo(sim: AnthropicSim | OpenAISim) -> None:
    sim.fallback = "echo"


async def test_messages_usage_carries_the_cache_fields(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, clients: Any
) -> None:
    echo(sim)
    sc = await sidecar(sim, api_key=API_KEY)
    client: anthropic.AsyncAnthropic = clients(sc, "anthropic")
    params: dict[str, Any] = {"model": "model-a", "max_tokens": 100, "system": SYSTEM}

    cold = await client.messages.create(
        **params, messages=[{"role": "user", "content": "first question"}]
    )
    async with client.messages.stream(
        **params, messages=[{"role": "user", "content": "second question"}]
    ) as stream:
        events = [event async for event in stream]
        warm = await stream.get_final_message()

    first, second = sim.cache_log
    for message, use in ((cold, first), (warm, second)):
        usage = message.usage
        assert usage.input_tokens == use.input
        assert usage.cache_read_input_tokens == use.read
        assert usage.cache_creation_input_tokens == use.write
        assert usage.output_tokens > 0
    assert first.read == 0 and second.read >= 1024  # the system prompt was read back
    if isinstance(sim, AnthropicSim):
        assert first.write > 1024  # Kernel marked the system prompt for the cache
    # Streamed: message_start carries the shape at once, message_delta the counts.
    start = next(e for e in events if e.type == "message_start").message.usage
    assert start.cache_read_input_tokens == 0 and start.cache_creation_input_tokens == 0
    delta = next(e for e in events if e.type == "message_delta").usage
    assert delta.cache_read_input_tokens == second.read
    assert delta.input_tokens == second.input


async def test_chat_completions_usage_counts_cached_tokens_in_the_prompt(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, clients: Any
) -> None:
    echo(sim)
    sc = await sidecar(sim, api_key=API_KEY)
    client: openai.AsyncOpenAI = clients(sc, "openai")

    def chat(question: str) -> list[Any]:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]

    cold = await client.chat.completions.create(model="model-a", messages=chat("first?"))
    stream = await client.chat.completions.create(
        model="model-a",
        messages=chat("second?"),
        stream=True,
        stream_options={"include_usage": True},
    )
    [warm] = [chunk.usage async for chunk in stream if chunk.usage is not None]

    first, second = sim.cache_log
    for usage, use in ((cold.usage, first), (warm, second)):
        assert usage is not None and usage.prompt_tokens_details is not None
        assert usage.prompt_tokens == use.input + use.read + use.write  # all input
        assert usage.prompt_tokens_details.cached_tokens == use.read
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert second.read >= 1024


async def test_a_client_s_own_breakpoints_give_way_to_kernel_s(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, clients: Any
) -> None:
    """cache_control sent by a client is dropped (claude_format.py): five of them, which
    the API would refuse, reach the backend as Kernel's own two."""
    echo(anthropic_sim)
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    client: anthropic.AsyncAnthropic = clients(sc, "anthropic")
    mark = {"type": "ephemeral"}
    content = [{"type": "text", "text": f"part {i}", "cache_control": mark} for i in range(5)]
    answer = await client.messages.create(
        model="model-a",
        max_tokens=100,
        system=[{"type": "text", "text": SYSTEM, "cache_control": mark}],
        messages=[{"role": "user", "content": content}],  # type: ignore[typeddict-item]
    )
    assert answer.content[0].type == "text"
    body = anthropic_sim.requests[-1].body
    assert body["system"][0]["cache_control"] == mark
    marked = [
        i for i, block in enumerate(body["messages"][0]["content"]) if "cache_control" in block
    ]
    assert marked == [4]  # the last block only
