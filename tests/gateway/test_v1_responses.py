"""``/v1/responses`` for Codex and the openai SDK's ``client.responses``: the requests
Codex 0.171.0 and the locked SDK were recorded sending (fixtures/), the API's typed SSE
events in order, tool call round trips, reasoning items, stored responses and
``previous_response_id``, errors in the API's own shape; either provider type behind Kernel."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, get_args

import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent

from kernel.store.responses import ROW_MAX, ResponseStore
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim, system_text
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Text, Thinking, ToolUse, text_reply

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "codex_0.171.0_responses.json").read_text()
)
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
REASONING = 'capabilities = ["stream", "tool_call", "attachments", "reasoning"]\n'
# The SDK's type of each event, by its ``type`` (ResponseStreamEvent is their union).
EVENT_TYPES: dict[str, type[Any]] = {
    get_args(kind.model_fields["type"].annotation)[0]: kind
    for kind in get_args(get_args(ResponseStreamEvent)[0])
}
SHELL = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
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


def strict(response: dict[str, Any]) -> Response:
    """The response validated by the SDK's own type: a required field missing fails (the
    SDK's client only constructs, never validates, what it receives)."""
    return Response.model_validate(response)


def sent(sim: AnthropicSim | OpenAISim, index: int = -1) -> dict[str, Any]:
    body = sim.requests[index].body
    assert isinstance(body, dict)
    return body


def system_of(sim: AnthropicSim | OpenAISim) -> str:
    body = sent(sim)
    if isinstance(sim, AnthropicSim):
        return system_text(body)
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")


async def stream_raw(
    sc: Sidecar, body: dict[str, Any], headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The events of a streamed POST /v1/responses, each checked against its SSE name."""
    head = sc.headers(**(headers or {}))
    async with sc.http.post(f"{sc.url}/v1/responses", json=body, headers=head) as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "text/event-stream"
        raw = (await response.read()).decode()
    events = []
    for frame in raw.split("\n\n"):
        if not frame.strip():
            continue
        name, data = frame.split("\n", 1)
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}"
        EVENT_TYPES[event["type"]].model_validate(event)  # the SDK's type, strictly
        events.append(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


# ---------------------------------------------------------------------- plain and streamed


async def test_plain_response_through_the_sdk(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    sc = await sidecar(sim, api_key=API_KEY)
    sim.enqueue(Reply(Text("Hello there"), usage=(11, 3)))
    body = FIXTURE["openai_sdk"]["requests"][0]  # input string, instructions, max_output_tokens
    raw = await oai(sc).responses.with_raw_response.create(**(body | {"model": "model-b"}))
    answer = strict(raw.http_response.json())

    assert answer.output_text == "Hello there"
    assert answer.id.startswith("resp_") and answer.object == "response"
    assert answer.status == "completed" and answer.model == "model-b"
    assert [item.type for item in answer.output] == ["message"]
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (11, 3)
    assert answer.usage.total_tokens == 14
    assert answer.usage.input_tokens_details.cached_tokens == 0
    assert answer.usage.input_tokens_details.cache_write_tokens == 0
    assert answer.usage.output_tokens_details.reasoning_tokens == 0
    assert "Be brief." in system_of(sim)
    assert sent(sim)["model"] == "model-b" and "hi" in json.dumps(sent(sim))
    # The usage ledger has the call, as for the other /v1 routes (purpose "api").
    rows = await sc.kernel.store.read(
        "ledger",
        lambda conn: conn.execute(
            "SELECT provider, model, purpose, input_tokens, output_tokens FROM usage"
        ).fetchall(),
    )
    assert [tuple(r) for r in rows] == [("main", "model-b", "api", 11, 3)]


async def test_usage_carries_the_cache_reads_and_writes(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """``input_tokens_details`` holds both cache fields the SDK requires, as the backend
    reported them (tests/sim/caching.py), in the JSON answer and the streamed one."""
    anthropic_sim.fallback = "echo"
    sc = await sidecar(anthropic_sim)
    body = {"model": "model-a", "instructions": "Answer from the handbook. " * 200}
    status, cold, _ = await sc.call("POST", "/v1/responses", body | {"input": "first"})
    assert status == 200, cold
    events = await stream_raw(sc, body | {"input": "second", "stream": True})
    warm = events[-1]["response"]

    first, second = anthropic_sim.cache_log
    for response, use in ((strict(cold), first), (strict(warm), second)):
        assert response.usage is not None
        details = response.usage.input_tokens_details
        assert (details.cached_tokens, details.cache_write_tokens) == (use.read, use.write)
        assert response.usage.input_tokens == use.input + use.read + use.write
    assert first.write > 1024 and second.read > 1024


async def test_streamed_events_come_in_the_apis_order(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim
) -> None:
    sc = await sidecar(sim)
    sim.enqueue(Reply(Text("streamed answer"), usage=(20, 5)))
    events = await stream_raw(sc, FIXTURE["openai_sdk"]["requests"][2] | {"model": "model-a"})

    kinds = [e["type"] for e in events]
    deltas = kinds.count("response.output_text.delta")
    assert deltas >= 2
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * deltas,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "streamed answer"
    done = events[-1]["response"]
    assert done["status"] == "completed" and done["id"] == events[0]["response"]["id"]
    assert done["output"][0]["content"][0]["text"] == "streamed answer"
    assert done["usage"]["input_tokens"] == 20 and done["usage"]["output_tokens"] == 5


async def test_sdk_stream_helper_assembles_the_response(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    sc = await sidecar(sim)
    sim.enqueue(Reply(Text("Let me look."), ToolUse("f", {"q": 1})))
    body = dict(FIXTURE["openai_sdk"]["requests"][1])  # the stream helper's own request
    body.pop("stream")
    async with oai(sc).responses.stream(**(body | {"model": "model-a"})) as stream:
        final = await stream.get_final_response()

    assert [item.type for item in final.output] == ["message", "function_call"]
    assert final.output_text == "Let me look."
    call = final.output[1]
    assert call.type == "function_call" and call.name == "f"
    assert json.loads(call.arguments) == {"q": 1} and call.call_id


# ---------------------------------------------------------------------- tool calls


async def test_function_call_round_trip(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    sc = await sidecar(sim)
    client = oai(sc)
    sim.enqueue(Reply(ToolUse("exec_command", {"cmd": "ls"})), text_reply("Two files."))
    first = await client.responses.create(
        model="model-a", input="list files", tools=[SHELL], store=False
    )
    [call] = first.output
    assert call.type == "function_call" and call.name == "exec_command"
    assert json.loads(call.arguments) == {"cmd": "ls"}
    tools = sent(sim)["tools"]
    assert "exec_command" in json.dumps(tools)

    second = await client.responses.create(
        model="model-a",
        tools=[SHELL],
        store=False,
        input=[
            {"role": "user", "content": "list files"},
            call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "a.txt\nb.txt"},
        ],
    )
    assert second.output_text == "Two files."
    wire = json.dumps(sent(sim))
    assert "a.txt\\nb.txt" in wire and call.call_id in wire


async def test_codex_recorded_requests_are_answered(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim
) -> None:
    """The three requests Codex sent (a shell call round trip, then a second turn), with
    its headers: developer messages, namespace and hosted tools, another server's
    reasoning item, store false, include, prompt_cache_key, client_metadata."""
    sc = await sidecar(sim)
    headers = {k: v for k, v in FIXTURE["headers"].items() if k.lower() != "authorization"}
    first, second, third = FIXTURE["requests"]
    sim.enqueue(Reply(ToolUse("exec_command", {"cmd": "echo codex-was-here"})))
    events = await stream_raw(sc, first | {"model": "model-a"}, headers)

    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    item = events[-2]["item"]
    assert item["type"] == "function_call" and item["name"] == "exec_command"
    assert json.loads(item["arguments"]) == {"cmd": "echo codex-was-here"}
    wire = json.dumps(sent(sim))
    assert "multi_agent_v1__close_agent" in wire  # a namespace's functions, flattened
    assert "You are a coding agent running in the Codex CLI" in system_of(sim)

    sim.enqueue(text_reply("The answer is done."), text_reply("You are welcome."))
    for body, answer in ((second, "The answer is done."), (third, "You are welcome.")):
        events = await stream_raw(sc, body | {"model": "model-a"}, headers)
        assert events[-1]["type"] == "response.completed"
        assert events[-1]["response"]["output"][0]["content"][0]["text"] == answer
    wire = json.dumps(sent(sim))
    assert "codex-was-here" in wire and "Now say thanks" in wire
    assert "opaque-signature-1" not in wire  # another server's reasoning: dropped
    status, data, _ = await sc.call("GET", f"/v1/responses/{events[-1]['response']['id']}")
    assert status == 404 and data["error"]["param"] == "response_id"  # store false: kept none


async def test_namespace_and_custom_tool_calls_come_back_in_their_kind(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, oai: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    tools = [
        {"type": "namespace", "name": "agents", "description": "x", "tools": [SHELL]},
        {"type": "custom", "name": "apply_patch", "description": "edit files"},
        {"type": "web_search"},
    ]
    anthropic_sim.enqueue(
        Reply(
            ToolUse("agents__exec_command", {"cmd": "pwd"}),
            ToolUse("apply_patch", {"input": "*** x"}),
        )
    )
    body = {"model": "model-a", "input": "go", "tools": tools}
    status, data, _ = await sc.call("POST", "/v1/responses", body)

    assert status == 200
    strict(data)
    spaced, custom = data["output"]
    assert (spaced["type"], spaced["namespace"], spaced["name"]) == (
        "function_call",
        "agents",
        "exec_command",
    )
    assert (custom["type"], custom["name"], custom["input"]) == (
        "custom_tool_call",
        "apply_patch",
        "*** x",
    )
    names = [t["name"] for t in sent(anthropic_sim)["tools"]]
    assert names == ["agents__exec_command", "apply_patch"]  # web_search: left out

    anthropic_sim.enqueue(text_reply("done"))
    back = [
        {"type": "message", "role": "user", "content": "go"},
        spaced,
        custom,
        {"type": "function_call_output", "call_id": spaced["call_id"], "output": "/tmp"},
        {"type": "custom_tool_call_output", "call_id": custom["call_id"], "output": "ok"},
    ]
    status, data, _ = await sc.call("POST", "/v1/responses", body | {"input": back})
    assert status == 200, data
    messages = sent(anthropic_sim)["messages"]
    uses = [b["name"] for b in messages[1]["content"] if b["type"] == "tool_use"]
    assert uses == ["agents__exec_command", "apply_patch"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "tool_result"]


# ---------------------------------------------------------------------- reasoning


async def test_reasoning_items_are_sent_and_passed_back(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """The provider's signed thinking comes out as a reasoning item (summary and
    encrypted_content); given back with the tool call, it reaches the provider unchanged
    (the simulator refuses a thinking block whose signature it did not issue)."""
    sc = await sidecar(anthropic_sim, extra=REASONING)
    anthropic_sim.enqueue(Reply(Thinking("run ls first"), ToolUse("exec_command", {"cmd": "ls"})))
    body = {
        "model": "model-a",
        "input": "list files",
        "tools": [SHELL],
        "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": False,
    }
    events = await stream_raw(sc, body | {"stream": True})
    assert sent(anthropic_sim)["thinking"]["type"] == "adaptive"
    kinds = [e["type"] for e in events]
    assert kinds[2:8] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        *["response.reasoning_summary_text.delta"] * 3,
        "response.reasoning_summary_text.done",
    ]
    reasoning, call = events[-1]["response"]["output"]
    assert reasoning["type"] == "reasoning"
    assert reasoning["summary"] == [{"type": "summary_text", "text": "run ls first"}]
    assert reasoning["encrypted_content"]
    assert events[-1]["response"]["usage"]["output_tokens"] > 0  # the thinking counted in it

    anthropic_sim.enqueue(text_reply("Two files."))
    back = [
        {"role": "user", "content": "list files"},
        reasoning,
        call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "a b"},
    ]
    status, data, _ = await sc.call("POST", "/v1/responses", body | {"input": back})
    assert status == 200, data
    strict(data)
    assert data["output"][-1]["content"][0]["text"] == "Two files."
    assistant = sent(anthropic_sim)["messages"][1]["content"]
    assert assistant[0]["type"] == "thinking" and assistant[0]["thinking"] == "run ls first"

    # A reasoning item of another server (Codex passes back what it was given): dropped.
    foreign = back[:1] + [reasoning | {"encrypted_content": "gAAAA-opaque"}] + back[2:]
    anthropic_sim.enqueue(text_reply("Still two."))
    status, data, _ = await sc.call("POST", "/v1/responses", body | {"input": foreign})
    assert status == 200, data
    assert sent(anthropic_sim)["messages"][1]["content"][0]["type"] == "tool_use"


async def test_effort_is_ignored_where_the_provider_does_not_reason(
    sidecar: SidecarFactory, openai_sim: OpenAISim
) -> None:
    """Codex sends its configured effort whatever the model: an OpenAI-compatible
    provider without the reasoning capability answers without it, not a 400."""
    sc = await sidecar(openai_sim)
    openai_sim.enqueue(text_reply("fine"))
    body = {"model": "model-a", "input": "hi", "reasoning": {"effort": "medium"}}
    status, data, _ = await sc.call("POST", "/v1/responses", body)
    assert status == 200 and data["output"][0]["content"][0]["text"] == "fine"
    assert "reasoning_effort" not in sent(openai_sim)
    assert data["reasoning"]["effort"] == "medium"


# ---------------------------------------------------------------------- stored responses


async def test_previous_response_id_continues_a_stored_response(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    sc = await sidecar(sim)
    client = oai(sc)
    sim.enqueue(text_reply("Your name is Ada."), text_reply("Ada Lovelace."))
    first = await client.responses.create(
        model="model-a", input="My name is Ada. What is it?", instructions="Be brief."
    )
    assert first.store is True
    second = await client.responses.create(
        model="model-a", input="And my full name?", previous_response_id=first.id
    )
    assert second.output_text == "Ada Lovelace." and second.previous_response_id == first.id
    wire = json.dumps(sent(sim))
    assert "My name is Ada" in wire and "Your name is Ada." in wire and "full name" in wire
    assert "Be brief." not in system_of(sim)  # instructions are not carried over

    again = await client.responses.retrieve(second.id)
    assert again.output_text == "Ada Lovelace."
    status, stored, _ = await sc.call("GET", f"/v1/responses/{second.id}")
    assert status == 200 and strict(stored).output_text == "Ada Lovelace."
    rows = await sc.kernel.store.read(
        "count", lambda conn: conn.execute("SELECT COUNT(*) FROM v1_responses").fetchone()[0]
    )
    assert rows == 2
    await client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError) as gone:
        await client.responses.create(
            model="model-a", input="still there?", previous_response_id=first.id
        )
    error = gone.value.body
    assert isinstance(error, dict) and error["param"] == "previous_response_id"
    assert first.id in error["message"] and not CJK.search(error["message"])


async def test_store_false_keeps_nothing(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    sc = await sidecar(sim)
    client = oai(sc)
    sim.enqueue(text_reply("hello"))
    answer = await client.responses.create(model="model-a", input="hi", store=False)
    assert answer.store is False
    rows = await sc.kernel.store.read(
        "count", lambda conn: conn.execute("SELECT COUNT(*) FROM v1_responses").fetchone()[0]
    )
    assert rows == 0
    with pytest.raises(openai.NotFoundError) as missing:
        await client.responses.create(model="model-a", input="x", previous_response_id=answer.id)
    assert "previous_response_id" in missing.value.message
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(answer.id)
    assert len(sim.requests) == 1


async def rows_stored(sc: Sidecar) -> list[str]:
    return await sc.kernel.store.read(
        "ids", lambda conn: [r[0] for r in conn.execute("SELECT id FROM v1_responses")]
    )


async def test_a_stored_chain_counts_whole_against_the_item_limit(
    sidecar: SidecarFactory, openai_sim: OpenAISim
) -> None:
    sc = await sidecar(openai_sim)
    chain = [{"role": "user", "content": "x"}] * 9_999
    assert await ResponseStore(sc.kernel.store).save({"id": "resp_long", "output": []}, chain)
    body = {"model": "model-a", "previous_response_id": "resp_long"}
    status, data, _ = await sc.call("POST", "/v1/responses", body | {"input": chain[:2]})

    assert status == 400, data
    error = data["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "previous_response_id"
    assert "9999 items" in error["message"] and "10000" in error["message"]
    assert "without previous_response_id" in error["message"]  # the fix
    assert openai_sim.requests == []


async def test_a_response_too_large_to_keep_says_store_false(
    sidecar: SidecarFactory, openai_sim: OpenAISim, caplog: pytest.LogCaptureFixture
) -> None:
    """The client is never told ``store: true`` of a response it then cannot find: one
    whose context outgrows a stored row is answered with ``store: false``, and the log
    says why (without the content)."""
    caplog.set_level(logging.INFO, logger="kernel.gateway.routes.responses")
    sc = await sidecar(openai_sim)
    search = {"type": "search", "query": "q" * (ROW_MAX - 300)}  # kept, never sent on
    chain = [
        {"role": "user", "content": "hello"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": search},
    ]
    assert await ResponseStore(sc.kernel.store).save({"id": "resp_big", "output": []}, chain)
    openai_sim.enqueue(text_reply("still here"), text_reply("streamed too"))
    body = {"model": "model-a", "previous_response_id": "resp_big"}

    status, data, _ = await sc.call("POST", "/v1/responses", body | {"input": "and now?"})
    assert status == 200, data
    assert strict(data).store is False and data["output"][0]["content"][0]["text"] == "still here"
    events = await stream_raw(sc, body | {"input": "and now?", "stream": True})
    done = events[-1]["response"]
    assert done["store"] is False and done["output"][0]["content"][0]["text"] == "streamed too"

    assert await rows_stored(sc) == ["resp_big"]
    for answered in (data["id"], done["id"]):
        status, missing, _ = await sc.call("GET", f"/v1/responses/{answered}")
        assert status == 404, missing
    said = [r.getMessage() for r in caplog.records if "store false" in r.getMessage()]
    assert len(said) == 2 and not any("qqq" in line or "and now" in line for line in said)


# ---------------------------------------------------------------------- refusals


async def test_unknown_model_and_budget_refusal_in_openais_shape(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    over = (
        "\n[providers.main.prices.model-a]\ninput = 10.0\noutput = 1000.0\n[budget]\ndaily = 0.5\n"
    )
    sc = await sidecar(sim, extra=over)
    client = oai(sc)
    with pytest.raises(openai.NotFoundError) as missing:
        await client.responses.create(model="gpt-5.1-codex", input="x")
    assert "gpt-5.1-codex" in missing.value.message and "model-a" in missing.value.message
    assert missing.value.type == "not_found_error"
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as info:
            await client.responses.create(
                model="model-a", input="hi", max_output_tokens=1000, stream=stream
            )
        assert info.value.status_code == 402
        assert info.value.code == "budget_exceeded" and info.value.type == "budget_exceeded"
        assert "not sent to the model" in info.value.message
    assert sim.requests == []


async def test_provider_failure_before_and_during_the_stream(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, oai: Any
) -> None:
    sc = await sidecar(sim)
    sim.enqueue(Error(400, "invalid_request_error", "bad thing"))
    with pytest.raises(openai.BadRequestError) as refused:
        await oai(sc).responses.create(model="model-a", input="hi")
    assert "the model provider failed" in refused.value.message

    sim.enqueue(Reply(Text("partial answer here"), error_after=3, error_type="api_error"))
    events = await stream_raw(sc, {"model": "model-a", "input": "hi", "stream": True})
    assert events[-1]["type"] == "response.failed"
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
    assert "the model provider failed" in failed["error"]["message"]


BIG = "x" * 300


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"input": "hi"}, "model", "Field required"),
        ({"model": "model-a"}, "input", "Field required"),
        ({"model": "model-a", "input": 5}, "input", "a string or an array"),
        ({"model": "model-a", "input": [5]}, "input.0", "input item object"),
        ({"model": "model-a", "input": [{"type": "bogus"}]}, "input.0.type", "'bogus'"),
        ({"model": "model-a", "input": [{"type": BIG}]}, "input.0.type", "not supported"),
        (
            {"model": "model-a", "input": [{"role": "robot", "content": "x"}]},
            "input.0.role",
            "user",
        ),
        (
            {"model": "model-a", "input": [{"role": "user", "content": [{"type": "input_file"}]}]},
            "input.0.content.0",
            "input_image",
        ),
        (
            {
                "model": "model-a",
                "input": [
                    {"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}
                ],
            },
            "input.0.content.0.image_url",
            "data: URLs",
        ),
        (
            {"model": "model-a", "input": [{"type": "function_call", "name": "f", "call_id": "c"}]},
            "input.0.arguments",
            "Field required",
        ),
        (
            {
                "model": "model-a",
                "input": [{"type": "function_call_output", "call_id": "c", "output": 3}],
            },
            "input.0.output",
            "string or an array",
        ),
        ({"model": "model-a", "input": "x", "tools": "all"}, "tools", "array"),
        ({"model": "model-a", "input": "x", "tools": [{"type": "robot"}]}, "tools.0.type", "robot"),
        (
            {"model": "model-a", "input": "x", "tools": [{"type": "function"}]},
            "tools.0.name",
            "name",
        ),
        ({"model": "model-a", "input": "x", "tool_choice": 7}, "tool_choice", "'auto'"),
        ({"model": "model-a", "input": "x", "stream": "yes"}, "stream", "boolean"),
        ({"model": "model-a", "input": "x", "temperature": 3}, "temperature", "0 to 2"),
        ({"model": "model-a", "input": "x", "max_output_tokens": 0}, "max_output_tokens", "≥ 1"),
        (
            {"model": "model-a", "input": "x", "reasoning": {"effort": "max"}},
            "reasoning.effort",
            "high",
        ),
        (
            {"model": "model-a", "input": "x", "text": {"format": {"type": "json_schema"}}},
            "text.format",
            "text",
        ),
        ({"model": "model-a", "input": "x", "background": True}, "background", "not supported"),
        (
            {"model": "model-a", "input": "x", "previous_response_id": ""},
            "previous_response_id",
            "resp_",
        ),
        (
            {"model": "model-a", "input": [{"type": "reasoning", "encrypted_content": 1}]},
            "input.0.encrypted_content",
            "string",
        ),
        ({"model": "model-a", "input": []}, "input", "at least one"),
        ({"model": "model-a", "input": [{"type": ["message"]}]}, "input.0.type", "Field required"),
        (
            {"model": "model-a", "input": "x", "reasoning": {"effort": ["high"]}},
            "reasoning.effort",
            "high",
        ),
    ],
)
async def test_hostile_input_is_refused_in_the_apis_shape(
    sidecar: SidecarFactory, openai_sim: OpenAISim, body: dict[str, Any], param: str, words: str
) -> None:
    sc = await sidecar(openai_sim)
    status, data, response = await sc.call("POST", "/v1/responses", body)

    assert status == 400, data
    error = data["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert words in error["message"] and error["message"].startswith(param)
    assert response.headers["request-id"]
    assert openai_sim.requests == []


async def test_malformed_and_huge_bodies_are_refused_never_5xx(
    sidecar: SidecarFactory, openai_sim: OpenAISim
) -> None:
    sc = await sidecar(openai_sim)
    headers = sc.headers(**{"Content-Type": "application/json"})
    for data in (b"{not json", b'{"model": "model-a\\ud800", "input": "x"}', b"[1, 2]"):
        status, body, _ = await sc.call("POST", "/v1/responses", data=data, headers=headers)
        assert status == 400 and body["error"]["type"] == "invalid_request_error", body
    deep: Any = "x"
    for _ in range(400):
        deep = [deep]
    status, body, _ = await sc.call(
        "POST", "/v1/responses", {"model": "model-a", "input": [{"role": "user", "content": deep}]}
    )
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    many = {"model": "model-a", "input": [{"role": "user", "content": "x"}] * 10_001}
    status, body, _ = await sc.call("POST", "/v1/responses", many)
    assert status == 400 and body["error"]["param"] == "input"
    status, body, _ = await sc.call("GET", "/v1/responses/" + "r" * 5000)
    assert status == 404 and body["error"]["param"] == "response_id"
    status, body, _ = await sc.call("DELETE", "/v1/responses/resp_nothing")
    assert status == 404 and body["error"]["type"] == "not_found_error"
    assert openai_sim.requests == []
