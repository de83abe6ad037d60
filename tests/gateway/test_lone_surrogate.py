"""A lone surrogate (issue 33): ``"\\ud800"`` is valid JSON but not text. Sent to every
text entry point of the sidecar, it is either kept as U+FFFD inside people's words (the
turn runs, the model gets the replacement) or refused 400 naming the field and the fix —
in the /v1 APIs' own English shapes there — never a 5xx."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kernel.gateway.api import openai_path
from tests.channels.test_qq import post, qq_config
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.qq_sim import QQSim, event
from tests.sim.script import text_reply
from tests.webconsole.test_security import sign_in, signed

LONE = "\ud800"
MENDED = "\ufffd"
NAMED = "lone surrogate"  # the catalogue's words (English here), and the /v1 APIs'


@pytest.fixture
async def echo() -> AsyncIterator[AnthropicSim]:
    async with AnthropicSim(fallback="echo") as sim:
        yield sim


@pytest.fixture
async def qq() -> AsyncIterator[QQSim]:
    async with QQSim(token_ttl=120) as sim:
        yield sim


def raw_json(body: Any) -> bytes:
    """``body`` as a client sends it: ``\\ud800`` written as the JSON escape."""
    return json.dumps(body).encode()


async def send(
    sc: Sidecar, method: str, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    base = headers if headers is not None else sc.headers()
    status, data, _ = await sc.call(
        method,
        path,
        data=raw_json(body),
        headers={**base, "Content-Type": "application/json"},
    )
    return status, data


def v1_user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# (method, path, body, the field named): refused 400, the sidecar's error model.
REFUSED: list[tuple[str, str, Any, str]] = [
    ("POST", "/agent/process", {"input": [message("hi")], "session_id": f"s{LONE}"}, "session_id"),
    ("POST", "/agent/process", {"input": [message("hi")], "user_id": LONE}, "user_id"),
    ("POST", "/chats", {"name": f"trip {LONE}"}, "name"),
    ("PATCH", "/chats/chat-default", {"name": f"trip {LONE}"}, "name"),
    ("POST", "/memories", {"text": "tea", "scope": f"chat{LONE}"}, "scope"),
    ("PUT", "/envs", {"envs": {"REGION": f"eu{LONE}"}}, "envs.REGION"),
    ("PUT", "/envs", {"envs": {f"RE{LONE}": "eu"}}, f"envs.RE{MENDED}"),
    ("PUT", "/envs/REGION", {"value": f"eu{LONE}"}, "value"),
    ("POST", "/cron/jobs", {"name": f"daily{LONE}", "schedule": "every 1h", "text": "hi"}, "name"),
    (
        "POST",
        "/agent/self/config-mutations/preview",
        {"target": "file", "operations": [{"kind": "replace", "path": f"SOUL{LONE}.md"}]},
        "operations[0].path",
    ),
    ("POST", "/mcp/servers", {"name": "web", "type": "http", "url": f"http://a/{LONE}"}, "url"),
    ("PUT", "/config/channels/webhook", {"url": f"http://127.0.0.1/{LONE}"}, "url"),
    ("POST", "/agent/personas", {"name": f"tutor{LONE}", "body": "be kind"}, "name"),
]

# /v1: refused in the API's own shape, its message starting with the field.
V1_REFUSED: list[tuple[str, Any, str]] = [
    ("/v1/messages", {"model": f"model-a{LONE}", "max_tokens": 9, "messages": []}, "model"),
    (
        "/v1/messages",
        {
            "model": "model-a",
            "max_tokens": 9,
            "messages": [v1_user("hi")],
            "metadata": {"user_id": LONE},
        },
        "metadata.user_id",
    ),
    ("/v1/messages/count_tokens", {"model": f"m{LONE}", "messages": []}, "model"),
    ("/v1/chat/completions", {"model": f"model-a{LONE}", "messages": []}, "model"),
    ("/v1/responses", {"model": f"model-a{LONE}", "input": "hi"}, "model"),
    ("/v1/responses", {"model": "model-a", "input": "hi", "user": LONE}, "user"),
]


async def test_names_keys_and_values_with_one_are_refused_naming_the_field(
    sidecar: SidecarFactory, echo: AnthropicSim
) -> None:
    sc = await sidecar(echo, api_key=API_KEY)
    for method, path, body, field in REFUSED:
        status, data = await send(sc, method, path, body)
        assert status == 400, (method, path, status, data)
        error = data["error"]
        assert error["code"] == "invalid_request" and error["details"]["field"] == field, data
        assert error["message"].startswith(f"{field} holds a {NAMED}"), data
        assert "both halves" in error["message"]  # the fix
    for path, body, field in V1_REFUSED:
        status, data = await send(sc, "POST", path, body)
        assert status == 400, (path, status, data)
        if openai_path(path):
            assert data["error"]["type"] == "invalid_request_error", data
            assert data["error"]["param"] == field, data
            words = data["error"]["message"]
        else:
            assert data["type"] == "error", data
            assert data["error"]["type"] == "invalid_request_error", data
            words = data["error"]["message"]
        assert words.startswith(f"{field}: holds a {NAMED}"), data
    # Nothing was stored, sent or changed meanwhile.
    assert echo.requests == []
    _, chats, _ = await sc.call("GET", "/chats")
    assert [c["name"] for c in chats["chats"]] == [""] or len(chats["chats"]) == 1
    assert "REGION" not in (await sc.kernel.runtime.overlay()).get("envs", {})
    _, memories, _ = await sc.call("GET", "/memories")
    assert memories["memories"] == []


async def test_people_s_words_with_one_are_kept_with_the_replacement(
    sidecar: SidecarFactory, echo: AnthropicSim
) -> None:
    sc = await sidecar(echo, api_key=API_KEY)
    said = f"hi {LONE} there"
    shown = f"hi {MENDED} there"

    # /agent/process, JSON and SSE: the turn runs; the model got U+FFFD.
    status, data = await send(sc, "POST", "/agent/process", {"input": [message(said)]})
    assert status == 200 and data["reply"] == f"echo: {shown}", data
    body = {"input": [message(said)], "stream": True, "session_id": "sse"}
    async with sc.http.post(
        sc.url + "/agent/process",
        data=raw_json(body),
        headers=sc.headers(**{"Content-Type": "application/json"}),
    ) as response:
        assert response.status == 200
        events = [e async for e in sse_events(response)]
    assert events[-1] == "[DONE]"
    assert events[-2]["type"] == "completed" and events[-2]["reply"] == f"echo: {shown}"

    # /v1/messages (JSON and stream), count_tokens, /v1/chat/completions (JSON and stream).
    v1 = {"model": "model-a", "max_tokens": 64, "messages": [v1_user(said)]}
    status, data = await send(sc, "POST", "/v1/messages", v1 | {"system": f"be {LONE} brief"})
    assert status == 200 and data["content"][0]["text"] == f"echo: {shown}", data
    assert echo.requests[-1].body["system"][0]["text"].endswith(f"be {MENDED} brief")
    text = await streamed_text(sc, "/v1/messages", v1 | {"stream": True})
    assert text == f"echo: {shown}"
    status, data = await send(sc, "POST", "/v1/messages/count_tokens", v1)
    assert status == 200 and data["input_tokens"] > 0
    chat = {"model": "model-a", "messages": [v1_user(said)]}
    status, data = await send(sc, "POST", "/v1/chat/completions", chat)
    assert status == 200 and data["choices"][0]["message"]["content"] == f"echo: {shown}"
    text = await streamed_text(sc, "/v1/chat/completions", chat | {"stream": True})
    assert text == f"echo: {shown}"
    responses = {"model": "model-a", "input": said, "instructions": f"be {LONE} brief"}
    status, data = await send(sc, "POST", "/v1/responses", responses)
    assert status == 200 and data["output"][0]["content"][0]["text"] == f"echo: {shown}", data
    assert echo.requests[-1].body["system"][0]["text"].endswith(f"be {MENDED} brief")

    # A memory's text, a cron job's prompt, a persona's instructions: stored mended.
    status, data = await send(sc, "POST", "/memories", {"text": f"likes {LONE} tea"})
    assert status == 201 and data["text"] == f"likes {MENDED} tea", data
    assert [m.text for m in await sc.kernel.store.list_memories()] == [f"likes {MENDED} tea"]
    job = {"name": "daily", "schedule": "every 1h", "text": f"report {LONE}"}
    status, data = await send(sc, "POST", "/cron/jobs", job)
    assert status == 201 and data["text"] == f"report {MENDED}", data
    _, data, _ = await sc.call("GET", f"/cron/jobs/{data['id']}")
    assert data["text"] == f"report {MENDED}"
    persona = {"name": "tutor", "description": f"kind {LONE}", "body": LONE}
    status, data = await send(sc, "POST", "/agent/personas", persona)
    assert status == 201, data
    _, data, _ = await sc.call("GET", "/agent/personas/tutor")
    assert MENDED in json.dumps(data, ensure_ascii=False), data


async def streamed_text(sc: Sidecar, path: str, body: Any) -> str:
    """The text of a /v1 stream (Anthropic's text deltas or OpenAI's content deltas)."""
    out = []
    async with sc.http.post(
        sc.url + path,
        data=raw_json(body),
        headers=sc.headers(**{"Content-Type": "application/json"}),
    ) as response:
        assert response.status == 200, await response.text()
        async for data in sse_events(response):
            if data == "[DONE]":
                continue
            if data.get("type") == "content_block_delta":
                out.append(data["delta"].get("text", ""))
            for choice in data.get("choices", []):
                out.append(choice["delta"].get("content") or "")
    return "".join(out)


async def test_a_workspace_file_name_with_one_is_refused(
    sidecar: SidecarFactory, echo: AnthropicSim
) -> None:
    """A multipart file name is decoded by aiohttp with surrogate escapes: bytes that are
    not UTF-8 (here a surrogate's own encoding) become lone surrogates, never a file."""
    sc = await sidecar(echo, api_key=API_KEY)
    for name in (b"a\xed\xa0\x80.txt", b"b\xff.txt"):
        disposition = b'form-data; name="file"; filename="' + name + b'"'
        body = b"--XX\r\nContent-Disposition: " + disposition + b"\r\n\r\nhello\r\n--XX--\r\n"
        headers = sc.headers(**{"Content-Type": "multipart/form-data; boundary=XX"})
        status, data, _ = await sc.call("POST", "/workspace/uploads", data=body, headers=headers)
        assert status == 400, data
        assert data["error"]["code"] == "path_invalid"
        assert "lone surrogate" in data["error"]["message"] and "UTF-8" in data["error"]["message"]
    _, listing, _ = await sc.call("GET", "/workspace/files")
    assert listing["entries"] == []


async def test_the_console_s_calls_get_the_same_answers(
    sidecar: SidecarFactory, echo: AnthropicSim
) -> None:
    sc = await sidecar(echo, api_key=API_KEY)
    token, csrf, _ = await sign_in(sc)
    page = signed(sc, token, csrf)
    status, data = await send(sc, "POST", "/agent/process", {"input": [message(LONE)]}, page)
    assert status == 200 and data["reply"] == f"echo: {MENDED}", data
    status, data = await send(sc, "POST", "/chats", {"name": LONE}, page)
    assert status == 400 and data["error"]["details"]["field"] == "name", data
    # A key with one is never compared: refused, naming the field.
    status, data = await send(sc, "POST", "/console/login", {"api_key": LONE}, {})
    assert status == 400 and data["error"]["details"]["field"] == "api_key", data


async def test_a_qq_message_with_one_is_answered(
    sidecar: SidecarFactory, echo: AnthropicSim, qq: QQSim
) -> None:
    sc = await sidecar(echo, api_key=API_KEY, extra=qq_config(qq))
    status, data = await post(sc, event("c2c", f"在 {LONE} 吗", where="u-openid", who="u-openid"))
    assert (status, data) == (200, {"op": 12, "d": 0})
    await qq.wait_until(lambda: len(qq.messages) == 1)
    assert qq.messages[0].body["content"] == f"[Kernel] echo: 在 {MENDED} 吗"
    # A sender's id with one is refused, naming it; no turn runs.
    status, data = await post(sc, event("c2c", "hi", where=f"u{LONE}", who="u"))
    assert status == 400 and "d.author.user_openid holds a lone surrogate" in str(data), data
    assert len(echo.requests) == 1


async def test_a_model_reply_carrying_one_is_answered_not_a_500(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """A model's output may carry one (its JSON may): the answer is still valid UTF-8
    JSON, the surrogate written as the escape it came as; the history keeps U+FFFD."""
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    anthropic_sim.enqueue(text_reply(f"odd {LONE} reply"), text_reply("fine"))

    status, data, response = await sc.call("POST", "/agent/process", {"input": [message("hi")]})
    assert status == 200 and data["reply"] == f"odd {LONE} reply", data
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"

    status, data = await send(sc, "POST", "/agent/process", {"input": [message("again")]})
    assert status == 200 and data["reply"] == "fine"
    history = json.dumps(anthropic_sim.requests[-1].body["messages"], ensure_ascii=False)
    assert f"odd {MENDED} reply" in history

    anthropic_sim.enqueue(text_reply(f"v1 {LONE}"), text_reply(f"v1 {LONE} streamed"))
    v1 = {"model": "model-a", "max_tokens": 64, "messages": [v1_user("hi")]}
    status, data = await send(sc, "POST", "/v1/messages", v1)
    assert status == 200 and data["content"][0]["text"] == f"v1 {LONE}", data
    assert await streamed_text(sc, "/v1/messages", v1 | {"stream": True}) == f"v1 {LONE} streamed"


async def test_a_surrogate_s_own_bytes_are_refused_as_not_utf8(
    sidecar: SidecarFactory, echo: AnthropicSim
) -> None:
    """ED A0 80 (a surrogate encoded as if it were a character) is not UTF-8: the body
    is refused 400 as not UTF-8 — in the /v1 APIs' own shapes there — never a 5xx."""
    sc = await sidecar(echo, api_key=API_KEY)
    raw = b"\xed\xa0\x80"
    bodies = [
        ("PUT", "/envs", b'{"envs": {"RE' + raw + b'": "eu"}}'),
        (
            "POST",
            "/mcp/servers",
            b'{"name": "web", "type": "http", "url": "http://a/' + raw + b'"}',
        ),
        ("POST", "/chats", b'{"name": "trip ' + raw + b'"}'),
    ]
    for method, path, body in bodies:
        status, data, _ = await sc.call(
            method, path, data=body, headers={**sc.headers(), "Content-Type": "application/json"}
        )
        assert status == 400, (path, status, data)
        assert data["error"]["code"] == "invalid_request", data
        assert "not UTF-8" in data["error"]["message"], data
    v1 = b'{"model": "model-a", "max_tokens": 9, "messages": [{"role": "user", "content": "'
    for path in ("/v1/messages", "/v1/chat/completions"):
        body = v1 + raw + b'"}]}'
        status, data, _ = await sc.call(
            "POST", path, data=body, headers={**sc.headers(), "Content-Type": "application/json"}
        )
        assert status == 400, (path, status, data)
        assert data["error"]["type"] == "invalid_request_error", data
        assert data["error"]["message"].endswith("(not UTF-8)"), data
        if path == "/v1/messages":
            assert data["type"] == "error", data
    assert echo.requests == []
    assert "RE\ud800" not in (await sc.kernel.runtime.overlay()).get("envs", {})
