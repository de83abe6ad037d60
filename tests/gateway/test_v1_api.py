"""``/v1/*`` as the current Messages API: Claude Code 2.1.197's recorded request shape
(system-role messages, adaptive thinking, metadata, cache_control, context_management,
tools), sampling options reaching the backend, stop sequences, thinking mapped or
refused by name, ``GET /v1/models``, model aliases, and every error in the API's own
English shape. The official anthropic SDK is the client wherever it can be."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kernel.config import load_config
from kernel.core.errors import ConfigError
from kernel.core.provider import StopScanner
from kernel.gateway.v1 import glob_match
from tests.conftest import write_config
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, sse_events
from tests.sim.anthropic_sim import AnthropicSim, system_text
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Text, Thinking, text_reply

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "claude_code_2.1.197_messages.json").read_text()
)
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
REASONING = 'capabilities = ["stream", "tool_call", "attachments", "reasoning"]\n'


@pytest.fixture
async def client_for() -> AsyncIterator[Any]:
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


def sent(sim: AnthropicSim | OpenAISim, index: int = -1) -> dict[str, Any]:
    body = sim.requests[index].body
    assert isinstance(body, dict)
    return body


async def post_raw(
    sc: Sidecar, body: dict[str, Any], *, stream: bool
) -> tuple[int, list[Any], dict[str, Any] | None]:
    """POST the body as Claude Code does (its headers, ``?beta=true``): (status, SSE
    events, JSON body)."""
    headers = dict(FIXTURE["headers"]) | {"x-api-key": sc.api_key or "any"}
    url = f"{sc.url}{FIXTURE['path']}?{FIXTURE['query']}"
    data = json.dumps(body | {"stream": stream})
    async with sc.http.post(url, data=data, headers=headers) as response:
        if stream and response.status == 200:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            assert response.headers["request-id"]
            return response.status, [e async for e in sse_events(response)], None
        return response.status, [], await response.json()


# ---------------------------------------------------------------------- Claude Code


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_claude_code_recorded_requests_are_answered(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, stream: bool
) -> None:
    """The two requests of a recorded ``claude -p`` tool round trip, posted as sent."""
    sc = await sidecar(sim, api_key=API_KEY)
    sim.enqueue(text_reply("Hello from Kernel"), text_reply("Done: hi-from-tool"))
    first, second = FIXTURE["requests"]

    status, events, body = await post_raw(sc, first, stream=stream)
    assert status == 200, body
    if stream:
        kinds = [e["type"] for e in events]
        assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
        text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
        assert text == "Hello from Kernel"
    else:
        assert body is not None and body["content"] == [
            {"type": "text", "text": "Hello from Kernel"}
        ]
    backend = sent(sim)
    # The system-role message is part of the system prompt, after the system blocks.
    wire = json.dumps(backend, ensure_ascii=False)
    system_message = first["messages"][1]["content"]
    if isinstance(sim, AnthropicSim):
        assert all(m["role"] in ("user", "assistant") for m in backend["messages"])
        assert system_text(backend).endswith(system_message)
        assert system_text(backend).startswith(first["system"][0]["text"])
        assert backend["thinking"] == {"type": "adaptive"}  # passed through
    else:
        roles = [m["role"] for m in backend["messages"]]
        assert roles == ["system", "user"]
        assert backend["messages"][0]["content"].endswith(system_message)
        assert "reasoning_effort" not in backend  # adaptive: no reasoning, no thinking
    # metadata (a device hash) and Anthropic-only fields do not travel on.
    assert "device_id" not in wire and "context_management" not in wire
    assert "metadata" not in backend
    assert backend["max_tokens"] == 1024  # the provider's cap, not Claude Code's 64000
    assert sent(sim)["model"] == "model-a"  # claude-opus-4-8: the default alias → active

    status, events, body = await post_raw(sc, second, stream=stream)
    assert status == 200, body
    wire = json.dumps(sent(sim))
    assert "hi-from-tool" in wire and "toolu_01abc" in wire  # the tool result went on


async def test_claude_code_request_through_the_sdk_streamed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, client_for: Any
) -> None:
    """The recorded request, given to the official SDK as Claude Code gives it to its own."""
    sc = await sidecar(anthropic_sim)
    client = client_for(sc)
    anthropic_sim.enqueue(
        Reply(Thinking("let me think"), Text("Hello"), usage=(321, 12)),
    )
    body = dict(FIXTURE["requests"][0])
    body.pop("stream", None)
    async with client.beta.messages.stream(
        **body, betas=FIXTURE["headers"]["anthropic-beta"].split(",")
    ) as stream:
        message = await stream.get_final_message()
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == "let me think"  # type: ignore[union-attr]
    signature = message.content[0].signature  # type: ignore[union-attr]
    assert anthropic_sim.signatures[signature] == "let me think"  # as the backend signed it
    assert message.content[1].text == "Hello"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 12  # as the provider reported them
    assert "anthropic-beta" not in {k.lower() for k in anthropic_sim.requests[-1].headers}


# ---------------------------------------------------------------------- sampling options


async def test_sampling_options_and_tool_choice_reach_the_backend(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, client_for: Any
) -> None:
    sc = await sidecar(sim)
    client = client_for(sc)
    sim.enqueue(text_reply("ok"))
    tool = {"name": "now", "description": "the time", "input_schema": {"type": "object"}}
    await client.messages.create(
        model="model-b",
        max_tokens=50,
        extra_body={"temperature": 0.2, "top_p": 0.9},  # not in anthropic 2.x's signature
        stop_sequences=["END"],
        tools=[tool],  # type: ignore[list-item]
        tool_choice={"type": "any"},
        metadata={"user_id": "someone"},
        messages=[{"role": "user", "content": "x"}],
    )
    body = sent(sim)
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9
    if isinstance(sim, AnthropicSim):
        assert body["stop_sequences"] == ["END"]
        assert body["tool_choice"] == {"type": "any"}
    else:
        assert body["tool_choice"] == "required"
        assert "stop" not in body  # enforced by Kernel, which then knows which one matched
    assert "someone" not in json.dumps(body)


async def test_top_k_is_passed_to_claude_and_refused_by_name_for_openai(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, client_for: Any
) -> None:
    sc = await sidecar(sim)
    client = client_for(sc)
    sim.enqueue(text_reply("ok"))
    params: dict[str, Any] = {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    if isinstance(sim, AnthropicSim):
        await client.messages.create(model="model-a", extra_body={"top_k": 40}, **params)
        assert sent(sim)["top_k"] == 40
        return
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="model-a", extra_body={"top_k": 40}, **params)
    assert "top_k" in info.value.message and "main" in info.value.message
    assert sim.requests == []


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_stop_sequence_ends_the_text_and_is_reported(
    sidecar: SidecarFactory, openai_sim: OpenAISim, client_for: Any, stream: bool
) -> None:
    """An OpenAI-compatible backend cannot say which stop sequence matched: Kernel
    enforces them, across chunk boundaries, and reports the one that ended the text."""
    sc = await sidecar(openai_sim)
    client = client_for(sc)
    openai_sim.enqueue(
        Reply(
            Text(
                "Hello there STOP-HERE and more", chunks=["Hello there ST", "OP-HE", "RE and more"]
            )
        )
    )
    params: dict[str, Any] = {
        "model": "model-a",
        "max_tokens": 50,
        "stop_sequences": ["never", "STOP-HERE"],
        "messages": [{"role": "user", "content": "x"}],
    }
    if stream:
        async with client.messages.stream(**params) as events:
            message = await events.get_final_message()
    else:
        message = await client.messages.create(**params)
    assert message.content[0].text == "Hello there "  # type: ignore[union-attr]
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "STOP-HERE"


async def test_stop_sequence_reported_by_a_claude_backend(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, client_for: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    client = client_for(sc)
    anthropic_sim.enqueue(Reply(Text("Hello "), stop_reason="stop_sequence", stop_sequence="END"))
    message = await client.messages.create(
        model="model-a",
        max_tokens=50,
        stop_sequences=["END"],
        messages=[{"role": "user", "content": "x"}],
    )
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "END"


async def test_unknown_fields_are_ignored_and_named_at_debug(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, caplog: pytest.LogCaptureFixture
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("ok"))
    body = {
        "model": "model-a",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
        "speed": "fast-value-secret",
        "Weird Key!": 1,
        "metadata": {"user_id": "user-id-secret"},
    }
    with caplog.at_level(logging.DEBUG, logger="kernel.gateway.claude_format"):
        status, answer, _ = await sc.call("POST", "/v1/messages", body)
    assert status == 200, answer
    logged = caplog.text
    assert "ignoring unknown fields speed, <odd name>" in logged
    assert "secret" not in logged and "Weird" not in logged
    assert "speed" not in json.dumps(sent(anthropic_sim))


def test_stop_scanner_holds_back_only_what_may_start_a_sequence() -> None:
    scanner = StopScanner(["<END>"])  # holds back at most 4 characters
    assert scanner.feed("abc<E") == "a"
    assert scanner.feed("N") == "b"
    assert scanner.feed("x") == "c"
    assert scanner.feed("yy<END>zz") == "<ENxyy" and scanner.matched == "<END>"
    assert scanner.feed("more") == "" and scanner.flush() == ""
    plain = StopScanner(["<END>"])
    assert plain.feed("no match") == "no m" and plain.flush() == "atch"
    quiet = StopScanner([])
    assert quiet.feed("all") == "all" and quiet.flush() == ""


# ---------------------------------------------------------------------- thinking


async def test_thinking_is_refused_by_name_without_reasoning(
    sidecar: SidecarFactory, openai_sim: OpenAISim, client_for: Any
) -> None:
    sc = await sidecar(openai_sim)
    client = client_for(sc)
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(
            model="model-a",
            max_tokens=4096,
            thinking={"type": "enabled", "budget_tokens": 2048},
            messages=[{"role": "user", "content": "x"}],
        )
    body: Any = info.value.body
    assert body["error"]["type"] == "invalid_request_error"
    message = body["error"]["message"]
    assert message.startswith("thinking:") and "main" in message and "reasoning" in message
    assert openai_sim.requests == []


async def test_thinking_maps_to_reasoning_effort_and_back(
    sidecar: SidecarFactory, openai_sim: OpenAISim, client_for: Any
) -> None:
    """A backend declared as reasoning: the budget becomes reasoning_effort, and the
    reasoning it streams comes back as a thinking block."""
    sc = await sidecar(openai_sim, extra=REASONING)
    client = client_for(sc)
    openai_sim.enqueue(Reply(Thinking("pondering"), Text("42")))
    async with client.messages.stream(
        model="model-a",
        max_tokens=20000,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "x"}],
    ) as stream:
        message = await stream.get_final_message()
    assert sent(openai_sim)["reasoning_effort"] == "low"
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == "pondering"  # type: ignore[union-attr]


async def test_thinking_passes_to_claude_with_the_history_signatures(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, client_for: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    client = client_for(sc)
    anthropic_sim.enqueue(text_reply("done"))
    signature = anthropic_sim.issue_signature("use the tool")  # from an earlier answer
    tool = {"name": "now", "description": "the time", "input_schema": {"type": "object"}}
    await client.messages.create(
        model="model-a",
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        tools=[tool],  # type: ignore[list-item]
        messages=[
            {"role": "user", "content": "what time is it"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "use the tool", "signature": signature},
                    {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "9:00"}],
            },
        ],
    )
    body = sent(anthropic_sim)
    # Cut to the provider's max_tokens cap (1024 in this config), then raised to the
    # API's minimum budget, max_tokens kept above it.
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] > 1024
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "use the tool",
        "signature": signature,
    }


# ---------------------------------------------------------------------- models


async def test_models_list_and_retrieve_through_the_sdk(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, client_for: Any
) -> None:
    extra = (
        'aliases = { fast = "model-b" }\n'
        "[gateway.model_aliases]\n"
        '"claude-sonnet-4-5" = "main:model-b"\n'
        '"claude-*" = "active"\n'
    )
    sc = await sidecar(anthropic_sim, extra=extra)
    client = client_for(sc)
    ids = [m.id async for m in client.models.list()]
    assert ids == ["model-a", "model-b", "fast", "claude-sonnet-4-5"]
    paged = [m.id async for m in client.models.list(limit=1)]
    assert paged == ids  # the SDK followed has_more / last_id page by page
    first = await client.models.list(limit=2)
    assert first.has_more and first.first_id == "model-a" and first.last_id == "model-b"
    model = await client.models.retrieve("claude-opus-4-8")
    assert model.id == "claude-opus-4-8" and model.type == "model"
    assert "model-a" in model.display_name  # answered by the active model
    alias = await client.models.retrieve("fast")
    assert "model-b" in alias.display_name


async def test_aliases_route_claude_names_and_unknown_models_get_404(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, client_for: Any
) -> None:
    extra = '[gateway.model_aliases]\n"claude-opus-*" = "main:model-b"\n'
    sc = await sidecar(anthropic_sim, extra=extra, language="zh")
    client = client_for(sc)
    anthropic_sim.enqueue(text_reply("a"))
    params: dict[str, Any] = {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    answer = await client.messages.create(model="claude-opus-4-8", **params)
    assert sent(anthropic_sim)["model"] == "model-b" and answer.model == "model-b"
    for unknown in ("claude-haiku-4-5", "gpt-4o"):
        with pytest.raises(anthropic.NotFoundError) as info:
            await client.messages.create(model=unknown, **params)
        body: Any = info.value.body
        assert body["error"]["type"] == "not_found_error"
        assert unknown in body["error"]["message"] and "model-a" in body["error"]["message"]
        assert not CJK.search(body["error"]["message"])
    with pytest.raises(anthropic.NotFoundError):
        await client.models.retrieve("gpt-4o")
    assert len(anthropic_sim.requests) == 1


async def test_the_default_alias_serves_claude_names_only(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, client_for: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    client = client_for(sc)
    with pytest.raises(anthropic.NotFoundError):
        await client.messages.create(
            model="gpt-4o", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert anthropic_sim.requests == []  # before: answered silently by the active model


def test_glob_match_in_linear_time() -> None:
    assert glob_match("claude-*", "claude-opus-4-8")
    assert glob_match("claude-*-4-*", "claude-opus-4-8")
    assert not glob_match("claude-*-5", "claude-opus-4-8")
    assert glob_match("*", "") and glob_match("a*a", "aa") and not glob_match("a*a", "a")
    assert not glob_match("exact", "exact-not")
    # A pattern that makes a backtracking matcher explode: one pass each piece here.
    assert not glob_match("*a*a*a*a*a*a*a*a*b", "a" * 100_000)


def test_model_alias_targets_are_checked_at_start(tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude")
    path.write_text(path.read_text() + '[gateway.model_aliases]\n"claude-*" = "main:nope"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={}, require_telegram=False)
    assert info.value.key == "gateway.model_aliases.claude-*"
    path.write_text(path.read_text().replace("main:nope", "other:model-a"))
    with pytest.raises(ConfigError):
        load_config(path, env={}, require_telegram=False)
    path.write_text(path.read_text().replace("other:model-a", "main:model-b"))
    config = load_config(path, env={}, require_telegram=False)
    assert config.gateway.model_aliases == {"claude-*": "main:model-b"}
    bare = write_config(tmp_path, "http://127.0.0.1:9", "claude")
    assert load_config(bare, env={}, require_telegram=False).gateway.model_aliases == {
        "claude-*": "active"
    }


# ---------------------------------------------------------------------- errors


async def test_every_v1_error_is_english_in_the_api_shape(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """With Kernel in Chinese, each refusal on /v1 is still the API's own English error."""
    sc = await sidecar(anthropic_sim, api_key=API_KEY, language="zh")
    ok = {"model": "model-a", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    json_headers = {"X-API-Key": API_KEY, "Content-Type": "application/json"}
    cases: list[tuple[str, str, dict[str, str], Any, int, str]] = [
        (
            "POST",
            "/v1/messages",
            {"Content-Type": "application/json"},
            ok,
            401,
            "authentication_error",
        ),
        ("GET", "/v1/nothing", sc.headers(), None, 404, "not_found_error"),
        ("GET", "/v1/messages", sc.headers(), None, 405, "invalid_request_error"),
        (
            "POST",
            "/v1/messages",
            sc.headers(**{"Content-Type": "text/plain"}),
            ok,
            415,
            "invalid_request_error",
        ),
        ("POST", "/v1/messages", json_headers, b"{not json", 400, "invalid_request_error"),
        ("POST", "/v1/messages", json_headers, [], 400, "invalid_request_error"),
        (
            "POST",
            "/v1/messages",
            json_headers,
            ok | {"max_tokens": 0},
            400,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/messages",
            json_headers,
            ok | {"temperature": 3},
            400,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/messages",
            json_headers,
            ok | {"messages": [{"role": "tool", "content": "x"}]},
            400,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/messages",
            json_headers,
            ok | {"mcp_servers": [{"url": "x"}]},
            400,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/messages",
            json_headers,
            ok | {"thinking": {"type": "enabled", "budget_tokens": 5}},
            400,
            "invalid_request_error",
        ),
        ("POST", "/v1/messages", json_headers, ok | {"model": "gpt-4o"}, 404, "not_found_error"),
        (
            "POST",
            "/v1/messages/count_tokens",
            json_headers,
            {"model": "m"},
            400,
            "invalid_request_error",
        ),
        ("GET", "/v1/models?limit=0", sc.headers(), None, 400, "invalid_request_error"),
        ("GET", "/v1/models/gpt-4o", sc.headers(), None, 404, "not_found_error"),
    ]
    for method, path, headers, body, status, kind in cases:
        data = body if isinstance(body, bytes) else None if body is None else json.dumps(body)
        async with sc.http.request(method, sc.url + path, data=data, headers=headers) as response:
            answer = await response.json()
            assert response.status == status, (path, body, answer)
            assert response.headers["request-id"], path
        assert answer["type"] == "error" and answer["error"]["type"] == kind, (path, answer)
        message = answer["error"]["message"]
        assert message and not CJK.search(message), (path, body, message)

    # Longer than Kernel would wait itself: the client is told at once.
    anthropic_sim.enqueue(Error(429, "rate_limit_error", "slow down", retry_after=120))
    status, answer, response = await sc.call("POST", "/v1/messages", ok)
    assert status == 429 and answer["error"]["type"] == "rate_limit_error"
    assert "slow down" in answer["error"]["message"] and not CJK.search(answer["error"]["message"])
    assert response.headers["retry-after"] == "120"
