"""Hostile input to every JSON operation: whatever the shape, a 4xx in the error model,
never a 5xx, and the event loop keeps answering."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import re

import pytest

from kernel.gateway.api import json_response, openai_path
from kernel.gateway.server import Gateway
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim

QQ_ON = '[channels.qq]\nenabled = true\napp_id = "1"\nclient_secret = "qq-secret-0123456789"\n'

# Path parameters that name something that exists, so the body is what gets judged.
PATH_VALUES = {
    "chat_id": "chat-default",
    "job_id": "cron-default",
    "provider": "main",
    "name": "console",
    "key": "REGION",
    "session_id": "s1",
    "ask_id": "a1",
}

DEEP = 100_000
MALFORMED: dict[str, bytes] = {
    "deep arrays": b'{"a":' + b"[" * DEEP + b"]" * DEEP + b"}",
    "deep objects": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    "deep top-level array": b"[" * DEEP + b"]" * DEEP,
    "just too deep": b'{"a":' + b"[" * 200 + b"]" * 200 + b"}",
    "5000-digit integer": b'{"a":' + b"7" * 5000 + b"}",
    "5000-digit negative integer": b'{"a":-' + b"7" * 5000 + b"}",
    "integer over 64 bits": b'{"a":' + str(2**64).encode() + b"}",
    "5000-digit float": b'{"a":1.' + b"5" * 5000 + b"}",
    "float overflowing to inf": b'{"a":1e999}',
    "NaN": b'{"a":NaN}',
    "Infinity": b'{"a":Infinity}',
    "-Infinity": b'{"a":[-Infinity]}',
    "non-UTF-8 byte": b'{"a":"\xff"}',
}


def json_operations(gateway: Gateway) -> list[tuple[str, str]]:
    out = []
    for op in gateway.operations:
        if op.body is None or op.body_type != "application/json":
            continue
        path = re.sub(r"\{(\w+)(:[^}]*)?\}", lambda m: PATH_VALUES.get(m[1], "x"), op.path)
        out.append((op.method, path))
    return out


def assert_refusal(status: int, data: object, path: str) -> None:
    assert 400 <= status < 500, (status, data)
    assert isinstance(data, dict)
    if openai_path(path):  # OpenAI's error shape
        assert set(data) == {"error"} and data["error"]["message"] and data["error"]["type"]
    elif path.startswith("/v1/"):
        assert data["type"] == "error" and data["error"]["message"]
    else:
        assert set(data) == {"error"} and set(data["error"]) == {"code", "message", "details"}
        assert data["error"]["code"] == "invalid_request", data


async def test_every_malformed_shape_to_every_json_operation_is_a_4xx(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=QQ_ON)
    operations = json_operations(sc.gateway)
    assert len(operations) >= 19 and ("POST", "/channels/qq/inbound") in operations
    headers = sc.headers(**{"Content-Type": "application/json"})
    for method, path in operations:
        for shape, raw in MALFORMED.items():
            status, data, _ = await sc.call(method, path, data=raw, headers=headers)
            assert_refusal(status, data, path)
            assert status == 400, (method, path, shape, status, data)
    # Nothing was stored, and the loop still answers.
    status, health, _ = await sc.call("GET", "/healthz")
    assert status == 200 and health["status"] == "ok"
    assert anthropic_sim.requests == []


async def test_the_refusals_name_the_problem(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    json_type = {"Content-Type": "application/json"}
    expected = {
        "deep arrays": "nested deeper than 100",
        "just too deep": "nested deeper than 100",
        "5000-digit integer": "out of range",
        "float overflowing to inf": "out of range",
        "NaN": "NaN is not allowed",
        "-Infinity": "-Infinity is not allowed",
    }
    for shape, fragment in expected.items():
        raw = MALFORMED[shape]
        status, data, _ = await sc.call("POST", "/chats", data=raw, headers=json_type)
        assert status == 400 and fragment in data["error"]["message"], (shape, data)
    # 100 levels are fine: the limit is not a refusal of ordinary nesting.
    ok = b'{"name":"deep","meta":' + b"[" * 98 + b"]" * 98 + b"}"
    status, data, _ = await sc.call("POST", "/chats", data=ok, headers=json_type)
    assert status != 500 and "nested" not in json.dumps(data)


async def raw_request(port: int, head: bytes) -> tuple[bytes, object]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    await writer.drain()
    async with asyncio.timeout(30):
        raw = await reader.read()
    writer.close()
    status_line, _, rest = raw.partition(b"\r\n")
    return status_line, json.loads(rest.split(b"\r\n\r\n", 1)[1])


@pytest.mark.parametrize(
    "header", [b"X-API-Key: \xff\xfe", b"Authorization: Bearer \xff", b"X-API-Key: k\x80ey"]
)
async def test_a_non_utf8_key_header_is_a_401_not_a_500(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, header: bytes
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    base = b"Host: 127.0.0.1\r\nConnection: close\r\n" + header + b"\r\n\r\n"
    status_line, data = await raw_request(sc.gateway.port, b"GET /healthz HTTP/1.1\r\n" + base)
    assert status_line.endswith(b" 200 OK"), data
    status_line, data = await raw_request(sc.gateway.port, b"GET /chats HTTP/1.1\r\n" + base)
    assert b" 401 " in status_line
    assert isinstance(data, dict) and data["error"]["code"] == "unauthorized"


def test_a_non_finite_value_is_never_written_as_invalid_json() -> None:
    """A float from config.toml (TOML has nan and inf) cannot make a response invalid."""
    response = json_response({"a": math.nan, "b": [math.inf, 1.5], "c": {"d": -math.inf}})
    assert response.text is not None
    assert json.loads(response.text, parse_constant=lambda name: pytest.fail(name)) == {
        "a": None,
        "b": [None, 1.5],
        "c": {"d": None},
    }


NESTED = "[" * 50_000  # JSON inside a string: the body's own depth limit never sees it


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (
            "/v1/responses",
            {
                "model": "model-a",
                "input": [
                    {"role": "user", "content": "hi"},
                    {
                        "type": "reasoning",
                        "summary": [],
                        "encrypted_content": "kernel.v1:"
                        + base64.b64encode(NESTED.encode()).decode(),
                    },
                ],
            },
            "input.1.encrypted_content",
        ),
        (
            "/v1/responses",
            {
                "model": "model-a",
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": NESTED},
                    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                ],
            },
            "input.1.arguments",
        ),
        (
            "/v1/chat/completions",
            {
                "model": "model-a",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": NESTED},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                ],
            },
            "messages.1.tool_calls.0.function.arguments",
        ),
    ],
)
async def test_json_nested_inside_a_string_is_a_400_naming_the_field(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, path: str, body: dict, param: str
) -> None:
    """Arguments and reasoning items carry JSON inside a string; parsed, its depth is
    limited as a body's is: a 400 in the route's (OpenAI's) shape naming the field."""
    sc = await sidecar(anthropic_sim)
    status, data, _ = await sc.call("POST", path, body)
    assert status == 400, data
    error = data["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    assert error["message"].startswith(param) and "nested deeper than 100" in error["message"]
    assert anthropic_sim.requests == []
    status, health, _ = await sc.call("GET", "/healthz")
    assert status == 200 and health["status"] == "ok"
