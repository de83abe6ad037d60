"""The Claude adapter's own work per call, through the real SDK against the simulator
(issue 37: its CPU per call): what it leaves off (OpenTelemetry spans Kernel never reads,
a pydantic model per event, the SDK's deep copy of the request) changes nothing sent and
nothing Kernel makes of the answer."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anthropic
import pytest
from aiohttp import web

from kernel.config import ProviderConfig
from kernel.core.errors import ProviderError, RateLimitedError, TransientProviderError
from kernel.core.messages import Message, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from kernel.core.provider import (
    ChatRequest,
    Completion,
    RawToolCall,
    Sampling,
    StreamEvent,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ThinkingPart,
    ToolCallStarted,
    UsageSeen,
)
from kernel.core.usage import Usage
from kernel.providers.claude import ClaudeProvider, _params
from kernel.providers.sdk import SDKProvider
from tests.providers.wire import Call, Factory, ask, body
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


# ---- the event stream, read as JSON objects ----------------------------------------------
# Each case is a streamed answer as bytes on the wire and what Kernel makes of it: the SDK's
# own stream still reads it (``error`` events, pings, a cut or garbled stream), Kernel
# reads each event's JSON object instead of a model the SDK would build for it.


def sse(kind: str, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return f"event: {kind}\ndata: {text}\n\n".encode()


START = sse(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 7, "output_tokens": 1, "cache_read_input_tokens": 3},
        },
    },
)
PING = sse("ping", {"type": "ping"})


def delta(index: int, **part: Any) -> bytes:
    return sse(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": part}
    )


def block(index: int, **content: Any) -> bytes:
    return sse(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": content},
    )


def stop(index: int) -> bytes:
    return sse("content_block_stop", {"type": "content_block_stop", "index": index})


END = sse(
    "message_delta",
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 42, "cache_creation_input_tokens": 5},
    },
) + sse("message_stop", {"type": "message_stop"})


def error_event(kind: str, message: str) -> bytes:
    return sse("error", {"type": "error", "error": {"type": kind, "message": message}})


class RawAnthropic:
    """An endpoint answering every request with ``body`` as an event stream (then EOF)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/messages", self._answer)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # noqa: SLF001
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(self.body)
        await response.write_eof()
        return response


def claude(base_url: str) -> ClaudeProvider:
    cfg = ProviderConfig(
        name="p",
        type="claude",
        api_base=base_url,
        api_key="k1",
        models=["m"],
        default_model="m",
        capabilities=["stream", "tool_call", "reasoning"],
    )
    return ClaudeProvider(cfg)


async def events(body: bytes) -> list[StreamEvent]:
    async with RawAnthropic(body) as base_url:
        provider = claude(base_url)
        try:
            return [e async for e in provider._stream(ask())]  # noqa: SLF001
        finally:
            await provider.aclose()


async def test_every_kind_of_event_is_read() -> None:
    """Thinking (and its signature), a redacted block, text, a tool call's arguments in
    pieces, usage from message_start then message_delta; pings, unknown events and an
    event without data are passed over."""
    body = b"".join(
        [
            START,
            block(0, type="thinking", thinking="", signature=""),
            PING,
            delta(0, type="thinking_delta", thinking="let me "),
            delta(0, type="thinking_delta", thinking="see"),
            delta(0, type="signature_delta", signature="sig"),
            stop(0),
            block(1, type="redacted_thinking", data="opaque"),
            stop(1),
            sse("future_event", {"type": "future_event", "x": 1}),
            b"event: content_block_delta\n\n",
            block(2, type="text", text=""),
            delta(2, type="text_delta", text="Hel"),
            delta(2, type="text_delta", text="lo"),
            stop(2),
            block(3, type="tool_use", id="toolu_1", name="clock", input={}),
            delta(3, type="input_json_delta", partial_json='{"zone": '),
            delta(3, type="input_json_delta", partial_json='"UTC"}'),
            delta(9, type="input_json_delta", partial_json="ignored"),
            stop(3),
            END,
        ]
    )
    got = await events(body)
    assert got[:-1] == [
        UsageSeen(Usage(7, 1, 3, 0)),
        ThinkingDelta(text="let me "),
        ThinkingDelta(text="see"),
        ThinkingDelta(signature="sig"),
        TextDelta("Hel"),
        TextDelta("lo"),
        ToolCallStarted("toolu_1", "clock"),
    ]
    assert got[-1] == Completion(
        text="Hello",
        tool_calls=[RawToolCall("toolu_1", "clock", '{"zone": "UTC"}')],
        stop_reason="tool_use",
        input_tokens=7,
        output_tokens=42,
        stop_sequence=None,
        thinking=[ThinkingPart("let me see", "sig"), ThinkingPart(redacted="opaque")],
        cache_read_tokens=3,
        cache_write_tokens=5,
        usage_reported=True,
    )


TEXT = START + block(0, type="text", text="") + delta(0, type="text_delta", text="Hi")
FAULTS = [
    # (what the stream holds, Kernel's error class, code, status, message)
    (
        START + error_event("overloaded_error", "Overloaded"),
        RateLimitedError,
        "overloaded_error",
        200,
        "Overloaded",
    ),
    (
        TEXT + error_event("api_error", "Internal server error"),
        TransientProviderError,
        "api_error",
        200,
        "Internal server error",
    ),
    (
        TEXT + error_event("invalid_request_error", "bad"),
        ProviderError,
        "invalid_request_error",
        200,
        "bad",
    ),
    (TEXT + sse("error", "not json"), ProviderError, "", 200, "HTTP 200"),
    (
        TEXT + b'event: content_block_delta\ndata: {"type": <<garbage\n\n',
        TransientProviderError,
        "bad_response",
        None,
        "malformed response (JSONDecodeError)",
    ),
    (
        TEXT,  # cut before message_delta
        TransientProviderError,
        "bad_response",
        None,
        "malformed response (ValueError)",
    ),
]


@pytest.mark.parametrize(
    ("body", "error", "code", "status", "message"),
    FAULTS,
    ids=["overloaded", "api_error", "invalid_request", "error_not_json", "garbled", "cut"],
)
async def test_a_failed_stream_is_the_same_kernel_error(
    body: bytes, error: type[ProviderError], code: str, status: int | None, message: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        await events(body)
    assert type(caught.value) is error
    assert (caught.value.code, caught.value.status, caught.value.message) == (
        code,
        status,
        message,
    )


async def test_no_model_is_built_per_event(
    anthropic_sim: AnthropicSim, make_provider: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pydantic event per SSE event was ~12 % of a call's CPU (issue 37), for fields
    Kernel reads once: the adapter takes each event's JSON object as it arrives."""
    import anthropic._base_client as base  # the SDK's one constructor of response models

    def refuse(**_: Any) -> Any:
        raise AssertionError("a response model was built")

    monkeypatch.setattr(base, "construct_type", refuse)
    anthropic_sim.enqueue(text_reply("hello"))
    assert (await Call().completion(make_provider(anthropic_sim), ask())).text == "hello"


# ---- the request: the bytes messages.create would send, encoded once ----------------------


def full_request() -> ChatRequest:
    """A request using every part of the body the adapter builds."""
    history = [
        Message("user", [TextBlock("héllo 你好 \u2028")]),
        Message(
            "assistant",
            [TextBlock("calling"), ToolUseBlock("functions.x:0", "web.search", {"q": "é"})],
        ),
        Message("user", [ToolResultBlock("functions.x:0", "result", is_error=False)]),
        Message("assistant", [TextBlock("")]),
        Message("user", [TextBlock("now")]),
    ]
    return ChatRequest(
        "m",
        "be brief",
        history,
        tools=[
            ToolSpec(
                "web.search", "Search", {"type": "object", "properties": {"q": {"type": "string"}}}
            )
        ],
        max_tokens=5000,
        sampling=Sampling(temperature=0.5, top_p=0.9, top_k=3, stop_sequences=["X"]),
        thinking=Thinking("enabled", budget_tokens=2000),
        tool_choice={"type": "auto"},
        history_thinking={1: [{"type": "thinking", "thinking": "hm", "signature": "s"}]},
        context="<context>now</context>",
        context_at=4,
    )


async def test_the_body_is_the_bytes_messages_create_sends(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    provider = make_provider(anthropic_sim, capabilities=["stream", "tool_call", "reasoning"])
    request = full_request()
    params = _params(request, 4096, request.thinking)
    client = provider._clients[0]  # noqa: SLF001
    # Whatever the simulator answers (it refuses the made-up thinking signature): the
    # request is what is compared.
    with contextlib.suppress(anthropic.APIStatusError):
        await (await client.messages.create(**params, stream=True)).close()
    with contextlib.suppress(ProviderError):
        await Call().completion(provider, request)
    by_sdk, by_kernel = anthropic_sim.requests[-2:]
    assert by_kernel.raw == by_sdk.raw
    assert json.loads(by_kernel.raw)["stream"] is True
    skip = {"idempotency-key", "x-stainless-retry-count", "x-stainless-read-timeout"}
    assert {k: v for k, v in by_kernel.headers.items() if k.lower() not in skip} == {
        k: v for k, v in by_sdk.headers.items() if k.lower() not in skip
    }


async def test_the_request_is_not_deep_copied(
    anthropic_sim: AnthropicSim, make_provider: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's copy of the whole request (every message, every tool schema), made for
    retries the SDK never makes for Kernel, cost more than encoding it."""
    from anthropic._utils import _prepare

    walk = _prepare.copy_tree

    def copy_tree(data: object, **kw: Any) -> Any:
        assert not data, "the request body was deep-copied"
        return walk(data, **kw)

    monkeypatch.setattr(_prepare, "copy_tree", copy_tree)
    anthropic_sim.enqueue(text_reply("hello"))
    assert (await Call().completion(make_provider(anthropic_sim), ask())).text == "hello"


async def test_a_value_plain_json_cannot_hold_is_the_sdk_s_to_convert(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    schema = {"type": "object", "properties": {"unit": {"enum": ("c",)}}, "x": {"only"}}
    anthropic_sim.enqueue(text_reply("hello"))
    request = ask(tools=[ToolSpec("t", "d", schema)])
    assert (await Call().completion(make_provider(anthropic_sim), request)).text == "hello"
    assert body(anthropic_sim)["tools"][0]["input_schema"]["x"] == ["only"]
