"""The model API simulators, exercised through the real `anthropic` and `openai` SDKs."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import httpx2
import openai
import pytest

from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import SILENT_MP3, OpenAISim
from tests.sim.script import (
    NO_REPLY_MESSAGE,
    Error,
    Reply,
    Stall,
    Text,
    ToolUse,
    format_seconds,
    split_evenly,
    text_reply,
    tool_reply,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = "claude-sim-1"
USER_HI: list[Any] = [{"role": "user", "content": "hi"}]
# A request that should be answered gets all the time a loaded machine needs; the stall
# tests pass their own short timeout, since timing out is what they expect.
LOADED = 60.0
# What a client sees when a stream is cut, garbled or goes silent.
BROKEN_STREAM = (
    json.JSONDecodeError,
    anthropic.APIConnectionError,
    openai.APIConnectionError,
    httpx2.TransportError,
)
PNG_1PX = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()


@pytest.fixture
async def asim() -> AsyncIterator[AnthropicSim]:
    async with AnthropicSim() as sim:
        yield sim


@pytest.fixture
async def osim() -> AsyncIterator[OpenAISim]:
    async with OpenAISim() as sim:
        yield sim


@pytest.fixture
async def claude(asim: AnthropicSim) -> AsyncIterator[anthropic.AsyncAnthropic]:
    client = anthropic.AsyncAnthropic(
        api_key="sk-test", base_url=asim.base_url, max_retries=0, timeout=LOADED
    )
    yield client
    await client.close()


@pytest.fixture
async def oai(osim: OpenAISim) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url=osim.base_url, max_retries=0, timeout=LOADED
    )
    yield client
    await client.close()


async def claude_events(client: anthropic.AsyncAnthropic, **kwargs: Any) -> list[Any]:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 100, "messages": USER_HI} | kwargs
    stream = await client.messages.create(stream=True, **params)
    return [event async for event in stream]


async def openai_chunks(client: openai.AsyncOpenAI, **kwargs: Any) -> list[Any]:
    params: dict[str, Any] = {"model": "gpt-sim", "messages": USER_HI} | kwargs
    stream = await client.chat.completions.create(stream=True, **params)
    return [chunk async for chunk in stream]


def anthropic_tool_inputs(events: list[Any]) -> dict[int, tuple[str, str, list[str]]]:
    """index -> (id, name, partial_json fragments) from raw stream events."""
    calls: dict[int, tuple[str, str, list[str]]] = {}
    for event in events:
        if event.type == "content_block_start" and event.content_block.type == "tool_use":
            calls[event.index] = (event.content_block.id, event.content_block.name, [])
        if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            calls[event.index][2].append(event.delta.partial_json)
    return calls


def openai_tool_calls(chunks: list[Any]) -> dict[int, dict[str, Any]]:
    """index -> {"id", "name", "fragments", "deltas"} accumulated from chat chunks."""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"fragments": [], "deltas": []})
                call["deltas"].append(delta)
                if delta.id:
                    call["id"], call["name"] = delta.id, delta.function.name
                if delta.function and delta.function.arguments:
                    call["fragments"].append(delta.function.arguments)
    return calls


async def raw_post(url: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body, headers=headers) as response,
    ):
        return response.status, await response.json()


# ---- script vocabulary -------------------------------------------------------------------


def test_split_evenly_and_retry_after_format() -> None:
    assert split_evenly("abcdefgh") == ["abc", "def", "gh"]
    assert split_evenly("{}") == ["{", "}"]
    assert split_evenly("") == []
    assert [format_seconds(v) for v in (2, 2.0, 0.25, 1.5)] == ["2", "2", "0.25", "1.5"]


def test_reply_defaults_and_text_chunks() -> None:
    reply = Reply(Text("a"), ToolUse("f", {}))
    assert reply.has_tool_use and reply.usage is None and reply.stop_reason is None
    assert tool_reply("f", {"x": 1}).tool_uses[0].input == {"x": 1}
    assert Text("hello world").pieces() == ["hell", "o wo", "rld"]
    assert Text("hello", chunks=["he", "l"]).pieces() == ["he", "l"]  # streamed verbatim


# ---- Anthropic ---------------------------------------------------------------------------


async def test_anthropic_streamed_text(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(Text("Hello, world", chunks=["Hel", "lo, ", "world"]), usage=(7, 3)))
    events = await claude_events(claude)

    deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert deltas == ["Hel", "lo, ", "world"]
    assert [e.type for e in events][:2] == ["message_start", "content_block_start"]
    assert events[0].message.usage.input_tokens == 7
    message_delta = next(e for e in events if e.type == "message_delta")
    assert message_delta.delta.stop_reason == "end_turn"
    assert message_delta.usage.output_tokens == 3
    assert events[-1].type == "message_stop"
    assert asim.pending == 0


async def test_anthropic_stream_helper_assembles_text_and_parallel_tools(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(
        Reply(
            Text("Checking both."),
            ToolUse("get_weather", {"city": "Paris"}, id="toolu_a"),
            ToolUse("get_time", {"tz": "Europe/Paris"}),
        )
    )
    async with claude.messages.stream(model=MODEL, max_tokens=100, messages=USER_HI) as stream:
        message = await stream.get_final_message()

    text, weather, clock = message.content
    assert text.type == "text" and text.text == "Checking both."
    assert weather.type == "tool_use" and weather.id == "toolu_a"
    assert weather.input == {"city": "Paris"}
    assert clock.type == "tool_use" and clock.id.startswith("toolu_")
    assert clock.input == {"tz": "Europe/Paris"}
    assert message.stop_reason == "tool_use"


async def test_anthropic_tool_arguments_stream_in_fragments(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    arguments = {"query": "weather in Paris", "days": 3, "units": ["C", "F"]}
    asim.enqueue(tool_reply("search", arguments), tool_reply("noop", {}))

    calls = anthropic_tool_inputs(await claude_events(claude))
    (tool_id, name, fragments) = calls[0]
    assert name == "search" and tool_id.startswith("toolu_")
    assert len(fragments) >= 2
    assert json.loads("".join(fragments)) == arguments

    (_, _, empty_fragments) = anthropic_tool_inputs(await claude_events(claude))[0]
    assert len(empty_fragments) >= 2 and json.loads("".join(empty_fragments)) == {}


async def test_anthropic_two_parallel_tool_calls_streamed(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(ToolUse("a", {"n": 1}), ToolUse("b", {"n": 2})))
    calls = anthropic_tool_inputs(await claude_events(claude))
    assert sorted(calls) == [0, 1]
    assert [calls[i][1] for i in (0, 1)] == ["a", "b"]
    assert [json.loads("".join(calls[i][2])) for i in (0, 1)] == [{"n": 1}, {"n": 2}]
    assert calls[0][0] != calls[1][0]


async def test_anthropic_non_stream_json(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(Text("Sure."), ToolUse("f", {"x": 1}), usage=(12, 4)))
    message = await claude.messages.create(model=MODEL, max_tokens=100, messages=USER_HI)
    assert message.model == MODEL and message.role == "assistant"
    assert [block.type for block in message.content] == ["text", "tool_use"]
    assert message.content[1].input == {"x": 1}
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 4)
    assert not asim.requests[-1].body.get("stream")


async def test_anthropic_rate_limit_with_retry_after(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Error(429, "rate_limit_error", "slow down", retry_after=2))
    with pytest.raises(anthropic.RateLimitError) as caught:
        await claude_events(claude)
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.body["error"] == {"type": "rate_limit_error", "message": "slow down"}


async def test_anthropic_overloaded(asim: AnthropicSim, claude: anthropic.AsyncAnthropic) -> None:
    asim.enqueue(Error(529, "overloaded_error", "Overloaded", retry_after=0.25))
    with pytest.raises(anthropic.APIStatusError) as caught:
        await claude.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
    assert caught.value.status_code == 529
    assert isinstance(caught.value, anthropic.OverloadedError)
    assert caught.value.response.headers["retry-after"] == "0.25"


async def test_anthropic_in_stream_error(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(Text("partial answer"), error_after=4))
    with pytest.raises(anthropic.APIStatusError) as caught:
        await claude_events(claude)
    assert caught.value.body["error"]["type"] == "overloaded_error"


async def test_anthropic_orphan_tool_use_rejected(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(text_reply("never sent"))
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_orphan", "name": "f", "input": {}}],
        },
        {"role": "user", "content": "forgot the result"},
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await claude.messages.create(model=MODEL, max_tokens=10, messages=messages)
    message = caught.value.body["error"]["message"]
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert message.startswith("messages.2: `tool_use` ids were found without `tool_result`")
    assert "toolu_orphan" in message
    assert asim.pending == 1, "a rejected request must not consume a scripted reply"
    assert len(asim.requests) == 1, "rejected requests are recorded too"


async def test_anthropic_orphan_tool_result_rejected(claude: anthropic.AsyncAnthropic) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_ghost", "content": "42"}],
        },
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await claude.messages.create(model=MODEL, max_tokens=10, messages=messages)
    message = caught.value.body["error"]["message"]
    assert "unexpected `tool_use_id` found in `tool_result` blocks: toolu_ghost" in message


async def test_anthropic_accepts_tool_round_trip_and_consecutive_user_turns(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(text_reply("done"))
    image = {"type": "base64", "media_type": "image/png", "data": PNG_1PX}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": [{"type": "image", "source": image}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
                {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "b"},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
            ],
        },
    ]
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("f", "g")]
    message = await claude.messages.create(
        model=MODEL, max_tokens=10, messages=messages, tools=tools
    )
    assert message.content[0].text == "done"


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}],
                },
            ],
            "must define tools",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": " "}]}], "non-empty"),
    ],
)
async def test_anthropic_rejects_tool_blocks_without_tools_and_empty_text(
    asim: AnthropicSim,
    claude: anthropic.AsyncAnthropic,
    messages: list[dict[str, object]],
    problem: str,
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=problem):
        await claude.messages.create(model=MODEL, max_tokens=10, messages=messages)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ({"type": "file", "file_id": "f"}, "expected tags"),
        ({"type": "base64", "data": PNG_1PX}, "media_type"),
        ({"type": "base64", "media_type": "image/png"}, "data"),
        ({"type": "base64", "media_type": "image/png", "data": "not base64!"}, "Invalid base64"),
    ],
)
async def test_anthropic_bad_image_rejected(
    claude: anthropic.AsyncAnthropic, source: dict[str, Any], problem: str
) -> None:
    messages = [{"role": "user", "content": [{"type": "image", "source": source}]}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await claude.messages.create(model=MODEL, max_tokens=10, messages=messages)
    assert problem in caught.value.body["error"]["message"]
    assert caught.value.body["error"]["message"].startswith("messages.0.content.0.image.source")


async def test_anthropic_raw_validation_and_auth(asim: AnthropicSim) -> None:
    url = f"{asim.base_url}/v1/messages"
    good_headers = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
    status, body = await raw_post(url, {"model": MODEL, "max_tokens": 5}, good_headers)
    assert status == 400
    assert body["error"] == {"type": "invalid_request_error", "message": "messages: Field required"}

    status, body = await raw_post(url, {"model": MODEL, "messages": USER_HI}, good_headers)
    assert (status, body["error"]["message"]) == (400, "max_tokens: Field required")

    full = {"model": MODEL, "max_tokens": 5, "messages": USER_HI}
    status, body = await raw_post(url, full, {"anthropic-version": "2023-06-01"})
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert len(asim.requests) == 3


async def test_anthropic_records_requests(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(text_reply("ok"))
    tools = [{"name": "f", "description": "does f", "input_schema": {"type": "object"}}]
    before = time.monotonic()
    await claude.messages.create(
        model=MODEL, max_tokens=10, system="You are Kernel.", tools=tools, messages=USER_HI
    )
    recorded = asim.requests[-1]
    assert (recorded.method, recorded.path) == ("POST", "/v1/messages")
    assert recorded.body["system"] == "You are Kernel."
    assert recorded.body["tools"] == tools
    assert recorded.headers["Anthropic-Version"] == recorded.headers["anthropic-version"]
    assert before <= recorded.received_at <= time.monotonic()


async def test_anthropic_stall_before_headers_times_out(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Stall())
    with pytest.raises(anthropic.APITimeoutError):
        await claude.messages.create(model=MODEL, max_tokens=10, messages=USER_HI, timeout=0.2)


async def test_anthropic_stream_stall_times_out(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(Text("slow", chunks=["s", "low"]), stall_after=3))
    events: list[Any] = []
    stream = await claude.messages.create(
        model=MODEL, max_tokens=10, messages=USER_HI, stream=True, timeout=0.2
    )
    with pytest.raises((anthropic.APITimeoutError, httpx2.TimeoutException)):
        async for event in stream:
            events.append(event)
    # pings are not counted: exactly 3 events reach the client before the stall
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
    ]


async def test_anthropic_malformed_stream_raises(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(Text("garbled"), malformed_after=2), Reply(Text("x"), malformed_after=0))
    with pytest.raises(BROKEN_STREAM):
        await claude_events(claude)
    with pytest.raises(anthropic.APIConnectionError):
        await claude.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)


async def test_anthropic_empty_queue_is_loud(claude: anthropic.AsyncAnthropic) -> None:
    with pytest.raises(anthropic.InternalServerError) as caught:
        await claude.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
    assert caught.value.body["error"]["message"] == NO_REPLY_MESSAGE


async def test_anthropic_echo_fallback() -> None:
    async with AnthropicSim(fallback="echo") as sim:
        client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=sim.base_url, max_retries=0)
        try:
            messages = [{"role": "user", "content": [{"type": "text", "text": "ping me"}]}]
            message = await client.messages.create(model=MODEL, max_tokens=10, messages=messages)
            events = await claude_events(client, messages=[{"role": "user", "content": "again"}])
        finally:
            await client.close()
    assert message.content[0].text == "echo: ping me"
    streamed = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert streamed == "echo: again"


async def test_chunk_delay_paces_the_stream(
    asim: AnthropicSim, claude: anthropic.AsyncAnthropic
) -> None:
    asim.enqueue(Reply(Text("abc"), chunk_delay=0.02))  # 8 SSE writes
    started = time.monotonic()
    await claude_events(claude)
    assert time.monotonic() - started >= 0.14


# ---- OpenAI ------------------------------------------------------------------------------


async def test_openai_streamed_text_with_usage(osim: OpenAISim, oai: openai.AsyncOpenAI) -> None:
    osim.enqueue(Reply(Text("Hello there, friend"), usage=(8, 4)))
    chunks = await openai_chunks(oai, stream_options={"include_usage": True})

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello there, friend"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.total_tokens) == (8, 12)
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 3


async def test_openai_stream_without_usage_request(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    osim.enqueue(text_reply("hi"))
    chunks = await openai_chunks(oai)
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_openai_tool_arguments_stream_in_fragments(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    arguments = {"query": "weather in Paris", "days": 3}
    osim.enqueue(tool_reply("search", arguments))
    chunks = await openai_chunks(oai)

    call = openai_tool_calls(chunks)[0]
    assert call["name"] == "search" and call["id"].startswith("call_")
    assert len(call["fragments"]) >= 2
    assert json.loads("".join(call["fragments"])) == arguments
    assert call["deltas"][0].id and all(d.id is None for d in call["deltas"][1:])
    assert all(d.function.name is None for d in call["deltas"][1:])
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_openai_text_then_two_parallel_tool_calls(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    osim.enqueue(Reply(Text("On it."), ToolUse("a", {"n": 1}, id="call_a"), ToolUse("b", {})))
    chunks = await openai_chunks(oai)

    calls = openai_tool_calls(chunks)
    assert sorted(calls) == [0, 1]
    assert (calls[0]["id"], calls[0]["name"]) == ("call_a", "a")
    assert calls[1]["name"] == "b" and calls[1]["id"].startswith("call_")
    assert json.loads("".join(calls[0]["fragments"])) == {"n": 1}
    assert json.loads("".join(calls[1]["fragments"])) == {}
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "On it."


async def test_openai_non_stream_json(osim: OpenAISim, oai: openai.AsyncOpenAI) -> None:
    osim.enqueue(Reply(ToolUse("f", {"x": 1}), ToolUse("g", {"y": 2})), text_reply("plain"))

    completion = await oai.chat.completions.create(model="gpt-sim", messages=USER_HI)
    choice = completion.choices[0]
    assert completion.object == "chat.completion" and choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [(c.type, c.function.name) for c in calls] == [("function", "f"), ("function", "g")]
    assert json.loads(calls[1].function.arguments) == {"y": 2}
    # counted (tests/sim/caching.py): "hi" is 1 token; 'f{"x": 1}g{"y": 2}' 18 chars, 5
    usage = completion.usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (1, 5, 6)

    completion = await oai.chat.completions.create(model="gpt-sim", messages=USER_HI)
    assert completion.choices[0].message.content == "plain"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.tool_calls is None


async def test_openai_rate_limit_with_retry_after(osim: OpenAISim, oai: openai.AsyncOpenAI) -> None:
    osim.enqueue(Error(429, "rate_limit_error", "slow down", retry_after=1.5))
    with pytest.raises(openai.RateLimitError) as caught:
        await openai_chunks(oai)
    assert caught.value.response.headers["retry-after"] == "1.5"
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.body["message"] == "slow down"


async def test_openai_in_stream_error(osim: OpenAISim, oai: openai.AsyncOpenAI) -> None:
    osim.enqueue(Reply(Text("partial"), error_after=2, error_type="server_error"))
    with pytest.raises(openai.APIError) as caught:
        await openai_chunks(oai)
    assert caught.value.type == "server_error"


async def test_openai_unanswered_tool_call_rejected(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    osim.enqueue(text_reply("never sent"))
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    other = {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}
    messages: list[Any] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call, other]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "user", "content": "and?"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        await oai.chat.completions.create(model="gpt-sim", messages=messages)
    assert caught.value.body["message"].startswith(
        "An assistant message with 'tool_calls' must be followed by tool messages"
    )
    assert caught.value.body["message"].endswith("call_2")
    assert osim.pending == 1


async def test_openai_orphan_tool_message_rejected(oai: openai.AsyncOpenAI) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_ghost", "content": "42"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        await oai.chat.completions.create(model="gpt-sim", messages=messages)
    assert "must be a response to a preceeding message with 'tool_calls'" in str(caught.value)
    assert caught.value.param == "messages.[1].role"


async def test_openai_answered_tool_calls_accepted(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    osim.enqueue(text_reply("done"))
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[Any] = [
        {"role": "system", "content": "You are Kernel."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    tools: list[Any] = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    completion = await oai.chat.completions.create(model="gpt-sim", messages=messages, tools=tools)
    assert completion.choices[0].message.content == "done"
    recorded = osim.requests[-1]
    assert recorded.body["messages"][0] == {"role": "system", "content": "You are Kernel."}
    assert recorded.body["tools"] == tools
    assert recorded.headers["authorization"] == "Bearer sk-test"


async def test_openai_requires_bearer_auth(osim: OpenAISim) -> None:
    body = {"model": "gpt-sim", "messages": USER_HI}
    status, answer = await raw_post(f"{osim.base_url}/chat/completions", body, {})
    assert status == 401 and "API key" in answer["error"]["message"]
    assert len(osim.requests) == 1


async def test_openai_stall_malformed_and_empty_queue(
    osim: OpenAISim, oai: openai.AsyncOpenAI
) -> None:
    osim.enqueue(Stall(), Reply(Text("slow"), stall_after=2), Reply(Text("x"), malformed_after=1))
    with pytest.raises(openai.APITimeoutError):
        await oai.chat.completions.create(model="gpt-sim", messages=USER_HI, timeout=0.2)
    with pytest.raises(openai.APITimeoutError):
        await openai_chunks(oai, timeout=0.2)
    with pytest.raises(BROKEN_STREAM):
        await openai_chunks(oai)
    with pytest.raises(openai.InternalServerError) as caught:
        await oai.chat.completions.create(model="gpt-sim", messages=USER_HI)
    assert caught.value.message.endswith(NO_REPLY_MESSAGE)


async def test_openai_echo_fallback() -> None:
    async with OpenAISim(fallback="echo") as sim:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=sim.base_url, max_retries=0)
        try:
            content = [{"type": "text", "text": "ping me"}]
            messages: list[Any] = [{"role": "user", "content": content}]
            completion = await client.chat.completions.create(model="m", messages=messages)
        finally:
            await client.close()
    assert completion.choices[0].message.content == "echo: ping me"


async def test_openai_audio_and_models(osim: OpenAISim, oai: openai.AsyncOpenAI) -> None:
    osim.enqueue_transcription("turn on the lights")
    first = await oai.audio.transcriptions.create(
        model="whisper-1", file=("voice.ogg", b"OggS" + bytes(64), "audio/ogg")
    )
    second = await oai.audio.transcriptions.create(model="whisper-1", file=("v.ogg", b"x"))
    assert (first.text, second.text) == ("turn on the lights", "simulated transcription")
    form = osim.requests[0].form
    assert form["model"] == "whisper-1"
    assert form["file"] == {"filename": "voice.ogg", "content_type": "audio/ogg", "size": 68}
    assert osim.audio_uploads == [b"OggS" + bytes(64), b"x"]

    speech = await oai.audio.speech.create(model="tts-1", voice="alloy", input="Hello")
    assert speech.response.headers["content-type"] == "audio/mpeg"
    assert speech.content == SILENT_MP3 and len(speech.content) > 100
    assert osim.requests[-1].body["input"] == "Hello"

    models = await oai.models.list()
    assert [m.id async for m in models]


async def test_openai_audio_errors_are_scripted(osim: OpenAISim, oai: openai.AsyncOpenAI) -> None:
    osim.enqueue_transcription(Error(500, "server_error", "stt down"), "after")
    with pytest.raises(openai.InternalServerError, match="stt down"):
        await oai.audio.transcriptions.create(model="whisper-1", file=("v.ogg", b"x"))
    again = await oai.audio.transcriptions.create(model="whisper-1", file=("v.ogg", b"y"))
    assert again.text == "after"

    osim.speech_audio = Error(503, "server_error", "tts down")
    with pytest.raises(openai.APIStatusError, match="tts down") as caught:
        await oai.audio.speech.create(model="tts-1", voice="alloy", input="Hello")
    assert caught.value.status_code == 503


# ---- lifecycle ---------------------------------------------------------------------------


async def test_stop_is_quick_with_a_stalled_stream_open() -> None:
    sim = await AnthropicSim().start()
    sim.enqueue(Reply(Text("never finishes"), stall_after=2))
    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=sim.base_url, max_retries=0)
    try:
        stream = await client.messages.create(
            model=MODEL, max_tokens=10, messages=USER_HI, stream=True
        )
        first = await anext(aiter(stream))
        assert first.type == "message_start"
        started = time.monotonic()
        await sim.stop()
        assert time.monotonic() - started < 25  # stop cuts the open stream, not waits
        with pytest.raises(BROKEN_STREAM):
            async for _ in stream:
                pass
    finally:
        await client.close()
        await sim.stop()


async def test_stop_is_quick_with_a_stall_before_headers() -> None:
    async with OpenAISim() as sim:
        sim.enqueue(Stall())
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=sim.base_url, max_retries=0)
        pending = asyncio.create_task(
            client.chat.completions.create(model="m", messages=USER_HI, timeout=50)
        )
        async with asyncio.timeout(30):
            await sim.wait_for_requests(1)
        started = time.monotonic()
        await sim.stop()
        assert time.monotonic() - started < 25  # stop ends the request before its 50 s
        with pytest.raises(openai.APIError):
            await pending
        await client.close()


@pytest.mark.posix
@pytest.mark.slow
@pytest.mark.parametrize("module", ["tests.sim.anthropic_sim", "tests.sim.openai_sim"])
async def test_standalone_serves_echo(module: str) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(30):
            base_url = (await process.stdout.readline()).decode().strip()
        assert base_url.startswith("http://127.0.0.1:")
        if module.endswith("anthropic_sim"):
            url = f"{base_url}/v1/messages"
            body = {"model": MODEL, "max_tokens": 5, "messages": USER_HI}
            headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
            status, answer = await raw_post(url, body, headers)
            assert answer["content"][0]["text"] == "echo: hi"
        else:
            url = f"{base_url}/chat/completions"
            body = {"model": "m", "messages": USER_HI}
            status, answer = await raw_post(url, body, {"Authorization": "Bearer k"})
            assert answer["choices"][0]["message"]["content"] == "echo: hi"
        assert status == 200
    finally:
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            assert await process.wait() == 0
