"""The model APIs' one pipeline (``kernel.gateway.model_api``) and one problems table
(``kernel.gateway.v1.PROBLEMS``): the same failure, or the same wrong field, reaches
each API (``/v1/messages``, ``/v1/chat/completions``, ``/v1/responses``) in that API's
own English shape."""

from __future__ import annotations

from typing import Any

import pytest

from kernel.gateway.v1 import PROBLEMS, problem_words
from tests.gateway.conftest import Sidecar, SidecarFactory, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Text

HI = [{"role": "user", "content": "hi"}]
BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "messages": ("/v1/messages", {"model": "model-a", "max_tokens": 64, "messages": HI}),
    "chat": ("/v1/chat/completions", {"model": "model-a", "messages": HI}),
    "responses": ("/v1/responses", {"model": "model-a", "input": "hi"}),
}


async def _post(sc: Sidecar, api: str, **extra: Any) -> tuple[int, Any, dict[str, str]]:
    path, body = BODIES[api]
    async with sc.http.post(sc.url + path, json=body | extra, headers=sc.headers()) as resp:
        return resp.status, await resp.json(), dict(resp.headers)


def _error_of(api: str, data: Any) -> tuple[str, str]:
    """(type, message) of an error body, checked to be in the API's own shape."""
    if api == "messages":
        assert set(data) == {"type", "error"} and data["type"] == "error"
        assert set(data["error"]) == {"type", "message"}
    else:
        assert set(data) == {"error"}
        assert set(data["error"]) == {"message", "type", "param", "code"}
    return data["error"]["type"], data["error"]["message"]


async def test_one_provider_failure_each_apis_own_error(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    for api in BODIES:
        anthropic_sim.enqueue(Error(400, "invalid_request_error", "bad thing"))
        status, data, headers = await _post(sc, api)
        assert status == 400 and headers["request-id"]
        kind, message = _error_of(api, data)
        assert kind == "invalid_request_error"
        assert message.startswith("the model provider failed: ") and "bad thing" in message


async def test_a_failure_in_the_stream_ends_it_with_each_apis_own_frame(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    last: dict[str, Any] = {}
    for api in BODIES:
        anthropic_sim.enqueue(Reply(Text("partial answer here"), error_after=3))
        path, body = BODIES[api]
        async with sc.http.post(
            sc.url + path, json=body | {"stream": True}, headers=sc.headers()
        ) as resp:
            assert resp.status == 200
            frames = [frame async for frame in sse_events(resp)]
        if api == "chat":
            assert frames.pop() == "[DONE]"  # still ended as the API ends a stream
        last[api] = frames[-1]
    assert last["messages"]["type"] == "error"
    assert last["messages"]["error"]["type"] == last["chat"]["error"]["type"]
    assert last["chat"]["error"]["type"] in ("overloaded_error", "api_error")
    assert last["messages"]["error"]["message"] == last["chat"]["error"]["message"]
    assert last["chat"]["error"]["message"].startswith("the model provider failed")
    assert last["responses"]["type"] == "response.failed"
    failed = last["responses"]["response"]["error"]
    assert failed == {"code": "server_error", "message": last["chat"]["error"]["message"]}


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"stream": "yes"}, {api: "stream: must be a boolean" for api in BODIES}),
        (
            {"temperature": 3},
            {
                "messages": "temperature: must be a number from 0 to 1",
                "chat": "temperature: must be a number from 0 to 2",
                "responses": "temperature: must be a number from 0 to 2",
            },
        ),
        (
            {"model": 7},
            {
                "messages": "model: Field required (a model name, e.g. from GET /v1/models)",
                "chat": "model: Field required (a model name of at most 256 characters)",
                "responses": "model: Field required (a model name of at most 256 characters)",
            },
        ),
    ],
)
async def test_one_problems_table_each_apis_own_words(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    extra: dict[str, Any],
    words: dict[str, str],
) -> None:
    sc = await sidecar(anthropic_sim)
    for api in BODIES:
        status, data, _ = await _post(sc, api, **extra)
        assert status == 400
        kind, message = _error_of(api, data)
        assert kind == "invalid_request_error" and message == words[api]
        if api != "messages":
            assert data["error"]["param"] == next(iter(extra))
    assert anthropic_sim.requests == []  # refused before any model call


def test_an_apis_own_words_win_over_the_shared_ones() -> None:
    assert problem_words("messages", "max_tokens") == PROBLEMS["messages:max_tokens"]
    assert problem_words("chat", "max_tokens") == PROBLEMS["max_tokens"]
    assert problem_words("responses", "input") == PROBLEMS["input"]
    assert problem_words("chat", "no_such_field") is None
    own = {key.split(":", 1)[0] for key in PROBLEMS if ":" in key}
    assert own <= {"messages", "chat", "responses"}
