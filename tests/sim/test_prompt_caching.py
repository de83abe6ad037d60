"""The model simulators' token counts and prompt caching (tests/sim/caching.py), through
the real `anthropic` and `openai` SDKs. Kept apart from test_model_sims.py for size."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest

from kernel.core.usage import estimate_tokens
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, Thinking, text_reply

MODEL = "claude-sim-1"
EPHEMERAL = {"type": "ephemeral"}
LONG = "x" * 4400  # 1100 tokens: over the 1024 minimum
SHORT = "y" * 4000  # 1000 tokens: under it


@pytest.fixture
async def asim() -> AsyncIterator[AnthropicSim]:
    async with AnthropicSim(fallback="echo") as sim:
        yield sim


@pytest.fixture
async def osim() -> AsyncIterator[OpenAISim]:
    async with OpenAISim(fallback="echo") as sim:
        yield sim


@pytest.fixture
async def claude(asim: AnthropicSim) -> AsyncIterator[anthropic.AsyncAnthropic]:
    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=asim.base_url, max_retries=0)
    yield client
    await client.close()


@pytest.fixture
async def oai(osim: OpenAISim) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=osim.base_url, max_retries=0)
    yield client
    await client.close()


def cached_system(text: str, **mark: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": EPHEMERAL | mark}]


async def ask(client: anthropic.AsyncAnthropic, **params: Any) -> Any:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 100} | params
    body.setdefault("messages", [{"role": "user", "content": "hello world!"}])
    return await client.messages.create(**body)


def blocks(count: int, marked: int | None = None) -> list[dict[str, Any]]:
    """One user message of ``count`` text blocks of 10 tokens, ``marked`` a breakpoint."""
    content: list[dict[str, Any]] = [
        {"type": "text", "text": f"block {i:03d} " + "z" * 30} for i in range(count)
    ]
    if marked is not None:
        content[marked]["cache_control"] = EPHEMERAL
    return [{"role": "user", "content": content}]


# ---- Anthropic ---------------------------------------------------------------------------


async def test_anthropic_counts_the_request_and_the_answer(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(Text("four")), Reply(Text("four")))
    message = await ask(claude, system="abcd" * 10)  # 10 tokens + "hello world!" 3
    assert (message.usage.input_tokens, message.usage.output_tokens) == (13, 1)
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens == 0

    stream = await claude.messages.create(
        model=MODEL,
        max_tokens=100,
        stream=True,
        system="abcd" * 10,
        messages=[{"role": "user", "content": "你好"}],  # CJK: a token a character
    )
    events = [event async for event in stream]
    start = events[0].message.usage
    assert (start.input_tokens, start.cache_read_input_tokens) == (12, 0)
    delta = next(e for e in events if e.type == "message_delta").usage
    assert (delta.input_tokens, delta.output_tokens, delta.cache_read_input_tokens) == (12, 1, 0)


async def test_anthropic_writes_then_reads_the_prefix(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    first = await ask(claude, system=cached_system(LONG))
    assert first.usage.cache_creation_input_tokens == 1100
    assert (first.usage.cache_read_input_tokens, first.usage.input_tokens) == (0, 3)

    other = [{"role": "user", "content": "a different question"}]  # 20 chars: 5 tokens
    second = await ask(claude, system=cached_system(LONG), messages=other)
    assert second.usage.cache_read_input_tokens == 1100
    assert (second.usage.cache_creation_input_tokens, second.usage.input_tokens) == (0, 5)
    assert [(u.read, u.write, u.input) for u in asim.cache_log] == [(0, 1100, 3), (1100, 0, 5)]

    changed = await ask(claude, system=cached_system(LONG + "!"))  # one byte differs
    assert changed.usage.cache_read_input_tokens == 0
    assert changed.usage.cache_creation_input_tokens == estimate_tokens(LONG + "!")

    other_model = await ask(claude, system=cached_system(LONG), model="claude-sim-2")
    assert other_model.usage.cache_read_input_tokens == 0  # a cache is per model


async def test_anthropic_tools_come_first_in_the_prefix(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    tool = {"name": "t", "description": LONG, "input_schema": {"type": "object"}}
    first = await ask(claude, tools=[tool], system=cached_system("be brief"))
    assert first.usage.cache_creation_input_tokens > 1100
    changed = await ask(claude, tools=[tool | {"name": "u"}], system=cached_system("be brief"))
    assert changed.usage.cache_read_input_tokens == 0  # a tool changed: the prefix did


async def test_anthropic_minimum_cacheable_length(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    for _ in range(2):
        message = await ask(claude, system=cached_system(SHORT))
        assert message.usage.cache_creation_input_tokens == 0
        assert message.usage.cache_read_input_tokens == 0
        assert message.usage.input_tokens == 1003  # all of it fresh, and no error

    asim.cache.min_tokens = 512  # as a model with a lower minimum
    assert (await ask(claude, system=cached_system(SHORT))).usage.cache_creation_input_tokens
    assert (await ask(claude, system=cached_system(SHORT))).usage.cache_read_input_tokens == 1000


async def test_anthropic_at_most_four_breakpoints(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    marked = blocks(5)
    for block in marked[0]["content"]:
        block["cache_control"] = EPHEMERAL
    with pytest.raises(anthropic.BadRequestError) as caught:
        await ask(claude, messages=marked)
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )
    del marked[0]["content"][0]["cache_control"]
    await ask(claude, messages=marked)  # four is fine
    assert len(asim.cache_log) == 1  # only the answered request used the cache


async def test_anthropic_rejects_bad_cache_control(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s", "cache_control": EPHEMERAL}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "a"}]},
        {"role": "user", "content": "again"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="thinking.cache_control"):
        await ask(claude, messages=messages)
    with pytest.raises(anthropic.BadRequestError, match="ttl"):
        await ask(claude, system=cached_system("s", ttl="2h"))
    with pytest.raises(anthropic.BadRequestError, match="ephemeral"):
        await ask(claude, system=[{"type": "text", "text": "s", "cache_control": {"type": "x"}}])


async def test_anthropic_lookback_finds_a_write_within_20_blocks(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.cache.min_tokens = 1
    await ask(claude, messages=blocks(30, marked=4))  # writes the prefix ending at block 4
    await ask(claude, messages=blocks(30, marked=24))  # 24..5: 20 places, 4 not among them
    assert asim.cache_log[-1].hit is None and asim.cache_log[-1].read == 0

    asim.cache.clear()
    await ask(claude, messages=blocks(30, marked=4))
    message = await ask(claude, messages=blocks(30, marked=23))  # 23..4: found
    assert asim.cache_log[-1].hit == 4
    assert message.usage.cache_read_input_tokens == 50  # blocks 0-4, 10 tokens each
    assert message.usage.cache_creation_input_tokens == 190  # blocks 5-23
    assert message.usage.input_tokens == 60  # blocks 24-29, after the breakpoint


async def test_anthropic_entries_expire_after_their_ttl(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    now = [1000.0]
    asim.cache.clock = lambda: now[0]
    await ask(claude, system=cached_system(LONG))
    now[0] += 299  # a hit refreshes the 5 minutes
    assert (await ask(claude, system=cached_system(LONG))).usage.cache_read_input_tokens == 1100
    now[0] += 299
    assert (await ask(claude, system=cached_system(LONG))).usage.cache_read_input_tokens == 1100
    now[0] += 301
    assert (await ask(claude, system=cached_system(LONG))).usage.cache_read_input_tokens == 0

    hour = await ask(claude, system=cached_system(LONG + "h", ttl="1h"))
    assert hour.usage.cache_creation is not None
    assert hour.usage.cache_creation.ephemeral_1h_input_tokens == 1101
    now[0] += 3000
    again = await ask(claude, system=cached_system(LONG + "h", ttl="1h"))
    assert again.usage.cache_read_input_tokens == 1101


async def test_anthropic_top_level_cache_control_marks_the_last_block(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    messages = [{"role": "user", "content": LONG}]
    await ask(claude, messages=messages, extra_body={"cache_control": EPHEMERAL})
    assert asim.cache_log[-1].breakpoints == [0]
    assert asim.cache_log[-1].write == 1100


async def test_anthropic_scripted_usage_wins(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(Text("hi"), Thinking("hm"), usage=(5, 6, 7, 8)))
    usage = (await ask(claude, system=cached_system(LONG))).usage
    assert (usage.input_tokens, usage.output_tokens) == (5, 6)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (7, 8)
    assert asim.cache_log[-1].write == 1100  # the cache itself still took the prefix


# ---- OpenAI ------------------------------------------------------------------------------


def chat(system: str, question: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


async def test_openai_caches_long_prefixes_in_128_token_steps(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    system = "s" * 4800  # 1200 tokens
    first = await oai.chat.completions.create(model="gpt-sim", messages=chat(system, "one?"))
    assert first.usage is not None and first.usage.prompt_tokens == 1201
    assert first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0

    stream = await oai.chat.completions.create(
        model="gpt-sim",
        messages=chat(system, "two?"),
        stream=True,
        stream_options={"include_usage": True},
    )
    usage = [chunk.usage async for chunk in stream if chunk.usage is not None][-1]
    assert usage.prompt_tokens == 1201  # all input, cached included
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 1152  # 1200 shared: 1024 + 128
    assert [(u.read, u.input) for u in osim.cache_log] == [(0, 1201), (1152, 49)]


async def test_openai_short_prompts_are_not_cached(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    for _ in range(2):
        answer = await oai.chat.completions.create(model="gpt-sim", messages=chat("s" * 4000, "q?"))
        assert answer.usage is not None and answer.usage.prompt_tokens == 1001
        assert answer.usage.prompt_tokens_details is not None
        assert answer.usage.prompt_tokens_details.cached_tokens == 0


async def test_openai_prefix_matches_inside_a_message(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    osim.enqueue(text_reply("a"), text_reply("b"))
    shared = "w" * 4400  # 1100 tokens of one user message, then different endings
    await oai.chat.completions.create(model="gpt-sim", messages=[user(shared + "A" * 400)])
    answer = await oai.chat.completions.create(model="gpt-sim", messages=[user(shared + "B")])
    assert answer.usage is not None and answer.usage.prompt_tokens_details is not None
    assert answer.usage.prompt_tokens_details.cached_tokens == 1024


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}
