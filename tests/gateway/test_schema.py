"""One declaration: every route's body and answer are pydantic models (or types), the
handlers validate with them, /openapi.json is generated from them, and each error code's
HTTP status comes from kernel.core.errors.HTTP_STATUS."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from kernel.core.errors import HTTP_STATUS, ChannelError, CodedError, CronError
from kernel.gateway.api import Operation
from kernel.gateway.console import is_console
from kernel.gateway.openapi import openapi_path
from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import _from_kernel
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim


def operations() -> list[Operation]:
    return [op for router in ROUTERS for op in router.operations]


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    found: dict[str, Any] = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return found


async def test_every_served_route_has_generated_request_and_response_schemas(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, doc, _ = await sc.call("GET", "/openapi.json")
    assert status == 200
    app = sc.gateway.build_app()
    served = [
        (route.method, route.resource.canonical, route.handler)
        for route in app.router.routes()
        if route.resource is not None
        and route.method != "HEAD"
        and not is_console(route.resource.canonical)  # the console's pages: not the API
    ]
    by_handler = {op.handler: op for op in operations()}
    assert len(served) == len(by_handler) >= 50
    for method, path, handler in served:
        op = by_handler[handler]  # every served route is a declared operation
        item = doc["paths"][openapi_path(path)][method.lower()]
        # Declared by models (or types), never by a hand-written schema dictionary.
        assert not isinstance(op.response, dict) and not isinstance(op.body, dict), path
        assert op.response is not None, (method, path)
        ok = item["responses"][str(op.status)]
        schema = resolve(doc, ok["content"][op.response_type]["schema"])
        expected = TypeAdapter(op.response).json_schema()
        assert schema, (method, path)
        if isinstance(op.response, type) and issubclass(op.response, BaseModel):
            # The document says what the model says: the same fields, the same required.
            assert set(schema.get("properties", {})) == set(op.response.model_fields), path
            assert set(schema.get("required", [])) == set(expected.get("required", [])), path
        if op.body is None:
            assert "requestBody" not in item, (method, path)
            continue
        body = item["requestBody"]["content"][op.body_type]["schema"]
        assert resolve(doc, body), (method, path)
        if isinstance(op.body, type) and issubclass(op.body, BaseModel):
            assert set(resolve(doc, body).get("properties", {})) >= set(op.body.model_fields)
    for name, schema in doc["components"]["schemas"].items():
        assert "$defs" not in schema and "title" not in schema, name


async def test_answers_validate_against_their_models(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """What the handlers send is what the models describe (GET routes without ids)."""
    sc = await sidecar(anthropic_sim)
    await sc.call("POST", "/chats", {"name": "one"})
    checked = 0
    for op in operations():
        if op.method != "GET" or "{" in op.path or op.response_type != "application/json":
            continue
        status, data, _ = await sc.call("GET", op.path)
        if status != op.status:
            continue  # e.g. a feature switched off in this configuration
        TypeAdapter(op.response).validate_python(data)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize(
    ("path", "body", "field", "words"),
    [
        ("/chats", {"name": 5}, "name", "must be string"),
        ("/chats", {"name": "x" * 201}, "name", "longer than 200"),
        ("/chats", {"meta": []}, "meta", "must be object"),
        ("/chats", {"channel": "a\nb"}, "channel", "control characters"),
        ("/agent/asks/a1/answer", {"choice": 2.5}, "choice", "must be integer"),
        ("/agent/asks/a1/answer", {"choice": True}, "choice", "must be integer"),
        ("/agent/asks/a1/answer", {"choice": -1}, "choice", "at least 0"),
        ("/agent/asks/a1/answer", {"choice": None}, "choice", "missing"),
        ("/agent/process", {"input": "hi"}, "input", "must be array"),
        ("/agent/process", {"input": [], "stream": "yes"}, "stream", "must be boolean"),
        (
            "/agent/process",
            {"biz_params": {"tool": {"name": "  "}}},
            "biz_params.tool.name",
            "missing",
        ),
        ("/skills", {"name": "s", "description": "d"}, "content", "missing"),
    ],
)
async def test_a_body_the_model_refuses_is_a_400_naming_the_field(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    path: str,
    body: dict[str, Any],
    field: str,
    words: str,
) -> None:
    sc = await sidecar(anthropic_sim)
    status, data, _ = await sc.call("POST", path, body)
    assert status == 400, data
    error = data["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["field"] == field
    assert field in error["message"] and words in error["message"], error


def test_every_coded_refusal_takes_its_status_from_the_one_table() -> None:
    for code, status in HTTP_STATUS.items():
        assert _from_kernel(CodedError(code, "x")).status == status
        assert _from_kernel(ChannelError(code, "x")).status == status
        assert _from_kernel(CronError(code, "x")).status == status
    # Codes not in the table: each error family's own default.
    assert _from_kernel(CodedError("new_code", "x")).status == 400
    assert _from_kernel(ChannelError("new_code", "x")).status == 502
    assert _from_kernel(CronError("invalid_cron_expr", "x")).status == 400


MESSAGE = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/messages", {"max_tokens": 9, "messages": MESSAGE}, "model: Field required (a"),
        (
            "/v1/messages",
            {"model": "m" * 257, "max_tokens": 9, "messages": MESSAGE},
            "model: at most 256 characters",
        ),
        (
            "/v1/messages",
            {"model": "model-a", "max_tokens": 0, "messages": MESSAGE},
            "max_tokens: must be an integer ≥ 1",
        ),
        (
            "/v1/messages",
            {"model": "model-a", "max_tokens": -1, "messages": MESSAGE},
            "max_tokens: Field required (an integer ≥ 1)",
        ),
        (
            "/v1/messages",
            {"model": "model-a", "max_tokens": 9, "messages": []},
            "messages: Field required (a non-empty array of messages)",
        ),
        (
            "/v1/messages",
            {"model": "model-a", "max_tokens": 9, "messages": MESSAGE, "temperature": 1.5},
            "temperature: must be a number from 0 to 1",
        ),
        (
            "/v1/messages",
            {"model": "model-a", "max_tokens": 9, "messages": MESSAGE, "top_k": True},
            "top_k: must be an integer ≥ 1",
        ),
        (
            "/v1/messages",
            {"model": "model-a", "max_tokens": 9, "messages": MESSAGE, "stop_sequences": [""]},
            "stop_sequences: must be an array of non-empty strings",
        ),
        (
            "/v1/messages/count_tokens",
            {"model": "model-a", "messages": MESSAGE, "stream": "no"},
            "stream: must be a boolean",
        ),
        (
            "/v1/chat/completions",
            {"model": "model-a", "messages": MESSAGE, "temperature": 2.5},
            "temperature: must be a number from 0 to 2",
        ),
        (
            "/v1/chat/completions",
            {"model": "model-a", "messages": MESSAGE, "stop": ""},
            "stop: must be a non-empty string or an array of them",
        ),
        (
            "/v1/chat/completions",
            {"model": "model-a", "messages": MESSAGE, "max_tokens": 0},
            "max_tokens: must be an integer ≥ 1",
        ),
    ],
)
async def test_the_model_apis_refuse_in_their_own_words(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    path: str,
    body: dict[str, Any],
    message: str,
) -> None:
    sc = await sidecar(anthropic_sim)
    status, data, _ = await sc.call("POST", path, body)
    assert status == 400, data
    assert data["error"]["message"].startswith(message), data
    assert anthropic_sim.requests == []
