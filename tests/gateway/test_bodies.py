"""A route's body is declared once: the router validates the request by the route's
``body`` model and hands the value to the handler, and /openapi.json documents that very
model; a handler that would take another model is refused when its route is declared."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from pydantic import BaseModel

from kernel.config import CHANNEL_TYPES, MCPServerConfig
from kernel.config.schema import toml_keys
from kernel.core.i18n import t
from kernel.cron.spec import MAX_BUDGET, JobSpecModel
from kernel.gateway import routes
from kernel.gateway.api import ApiError, Operation, Router
from kernel.gateway.openapi import openapi_path
from kernel.gateway.routes import ROUTERS
from kernel.gateway.routes.channels import settings_model
from kernel.gateway.routes.envs import VALUE_LIMIT
from kernel.gateway.schema import REF_PREFIX, BodyModel, _openapi, json_schema
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim

# Bodies the handler reads itself, and why: bytes or a form, another protocol (MCP's
# JSON-RPC, answered by its SDK), a model API's own codec (its refusals in that API's
# words), a platform's signed payload. Every other body is the router's to validate: a
# model chosen by the path (a channel's fields) or owned by a domain package (a cron
# job's spec, an MCP server's table) is that route's body model too, carrying the
# domain's checks, codes and words.
READ_BY_HANDLER = {
    ("PUT", "/workspace/files/{path}"): "bytes",
    ("POST", "/workspace/import"): "bytes",
    ("POST", "/workspace/uploads"): "multipart form",
    ("POST", "/mcp"): "JSON-RPC, read by the MCP SDK",
    ("POST", "/v1/messages"): "Messages API codec",
    ("POST", "/v1/messages/count_tokens"): "Messages API codec",
    ("POST", "/v1/chat/completions"): "Chat Completions codec",
    ("POST", "/v1/responses"): "Responses API codec",
    ("POST", "/channels/qq/inbound"): "QQ's signed payload, read by the QQ channel",
}
# The route modules that read a body by hand, each for a route listed above.
HAND_READERS = {"read_model": set(), "read_object": set(), "read_json": {"mcp_endpoint"}}


def operations() -> list[Operation]:
    return [op for router in ROUTERS for op in router.operations]


def handed(op: Operation) -> Any:
    """The type the route's function declares for the body it is handed."""
    function = op.handler.__wrapped__  # type: ignore[attr-defined]
    name = list(inspect.signature(function).parameters)[1]
    return inspect.get_annotations(function, eval_str=True)[name]


async def test_the_document_declares_exactly_the_model_each_handler_is_handed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, doc, _ = await sc.call("GET", "/openapi.json")
    assert status == 200
    validated = 0
    for op in operations():
        if op.body is None:
            continue
        where = (op.method, openapi_path(op.path))
        content = doc["paths"][where[1]][op.method.lower()]["requestBody"]["content"]
        components: dict[str, Any] = {}
        assert content[op.body_type]["schema"] == json_schema(op.body, components), where
        for name, schema in components.items():
            assert doc["components"]["schemas"][name] == schema, (where, name)
        if where in READ_BY_HANDLER:
            assert not op.validated, f"{where} is validated by the router now: unlist it"
            continue
        assert op.body_type == "application/json", f"{where}: list it with its reason"
        # Every other JSON body: read and validated by the router, by the model the
        # document names, and handed to a function that declares it takes that model.
        assert op.validated, f"{where} parses its body by hand: take (request, body)"
        assert isinstance(op.body, type) and issubclass(op.body, BodyModel)
        wanted = handed(op)
        options = getattr(wanted, "__args__", (wanted,))
        assert any(issubclass(op.body, kind) for kind in options), (where, wanted)
        validated += 1
    assert validated >= 28


class Declared(BodyModel):
    name: str


class Other(BodyModel):
    name: int


def test_a_handler_taking_another_model_than_its_route_declares_is_refused() -> None:
    async def handler(request: web.Request, body: Other) -> web.Response:
        return web.json_response({})

    router = Router("drift")
    with pytest.raises(TypeError, match="its route's body is"):
        router.post("/drift", summary="x", body=Declared)(handler)
    with pytest.raises(TypeError, match="declare its model"):
        router.post("/drift", summary="x")(handler)

    async def unannotated(request, body):  # type: ignore[no-untyped-def]
        return web.json_response({})

    with pytest.raises(TypeError, match="its route's body is"):
        router.post("/drift", summary="x", body=Declared)(unannotated)
    assert router.operations == []


def test_no_route_module_parses_a_json_body_by_hand_but_the_listed_ones() -> None:
    """``read_model`` is the router's: no route calls it, nor reads a JSON body itself
    (but /mcp's JSON-RPC, listed above with its reason)."""
    folder = Path(routes.__file__).parent
    readers: dict[str, set[str]] = {name: set() for name in HAND_READERS}
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            called = node.func if isinstance(node, ast.Call) else None
            name = getattr(called, "id", getattr(called, "attr", None))
            if name in readers:
                readers[name].add(path.stem)
    assert readers == HAND_READERS


class _Case(BaseModel):
    method: str
    path: str
    body: Any
    field: str
    message: str  # a catalogue key, worded with ``words`` in the sidecar's language
    words: dict[str, Any] = {}


def _cases() -> list[_Case]:
    too_many = [f"chat-{n}" for n in range(501)]
    return [
        _Case(
            method="POST",
            path="/chats/batch-delete",
            body={"chat_ids": "chat-3"},
            field="chat_ids",
            message="gw.chat_ids",
        ),
        _Case(
            method="POST",
            path="/chats/batch-delete",
            body={},
            field="chat_ids",
            message="gw.chat_ids",
        ),
        _Case(
            method="POST",
            path="/chats/batch-delete",
            body={"chat_ids": too_many},
            field="chat_ids",
            message="gw.chat_ids",
        ),
        _Case(
            method="PUT",
            path="/envs/9LIVES",
            body={"value": 5},  # the name is refused first, as before
            field="key",
            message="gw.env_name",
            words=dict(key="9LIVES"),
        ),
        _Case(
            method="PUT",
            path="/envs/LIVES",
            body={"value": 5},
            field="LIVES",
            message="gw.env_value",
            words=dict(key="LIVES", limit=VALUE_LIMIT),
        ),
        _Case(
            method="POST",
            path="/skills",
            body={"name": "s", "description": "d"},
            field="content",
            message="gw.field_required",
            words=dict(field="content"),
        ),
        _Case(
            method="PATCH",
            path="/memories/not-a-number",  # a bad body is refused whatever the id
            body={"text": 5},
            field="text",
            message="gw.bad_field",
            words=dict(field="text", expected="string"),
        ),
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c.method} {c.path} {c.field}")
async def test_a_bad_body_is_refused_as_before_naming_the_field_and_the_fix(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, case: _Case
) -> None:
    sc = await sidecar(anthropic_sim)
    status, data, _ = await sc.call(case.method, case.path, case.body)
    assert status == 400, data
    assert data == {
        "error": {
            "code": "invalid_request",
            "message": t(case.message, **case.words),
            "details": {"field": case.field},
        }
    }


async def test_a_body_not_sent_as_json_is_still_415_and_a_broken_one_400(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    headers = {**sc.headers(), "Content-Type": "text/plain"}
    status, data, _ = await sc.call("POST", "/skills", data=b"{}", headers=headers)
    assert status == 415
    assert data["error"]["code"] == "unsupported_media_type"
    assert data["error"]["message"] == t("gw.json_only", got="text/plain")
    headers = {**sc.headers(), "Content-Type": "application/json"}
    status, data, _ = await sc.call("POST", "/skills", data=b"[1, 2]", headers=headers)
    assert (status, data["error"]["message"]) == (400, t("gw.body_not_object"))
    status, data, _ = await sc.call("POST", "/skills", data=b"{", headers=headers)
    detail = "line 1 column 2: Expecting property name enclosed in double quotes"
    assert (status, data["error"]) == (
        400,
        {"code": "invalid_request", "message": t("gw.bad_json", detail=detail), "details": {}},
    )


def _schema(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    body: dict[str, Any] = doc["paths"][path][method]["requestBody"]["content"]
    return body["application/json"]["schema"]


def _ref(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    options = [schema, *schema.get("anyOf", []), *schema.get("allOf", [])]
    ref = next(s["$ref"] for s in options if "$ref" in s)
    found: dict[str, Any] = doc["components"]["schemas"][ref.removeprefix(REF_PREFIX)]
    return found


async def test_a_jobs_body_is_documented_as_the_cron_package_reads_it(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """The document of a job's body is the cron package's spec (the fields the scheduler
    reads: a job's own daily budget, a QQ target's id), and a body is refused before the
    scheduler sees it in that package's words."""
    sc = await sidecar(anthropic_sim)
    _, doc, _ = await sc.call("GET", "/openapi.json")
    for method, path in (("post", "/cron/jobs"), ("put", "/cron/jobs/{job_id}")):
        job = _schema(doc, method, path)
        assert set(job["properties"]) == set(JobSpecModel.model_fields), path
        runtime = _ref(doc, job["properties"]["runtime"])["properties"]
        assert runtime["budget_daily"]["maximum"] == MAX_BUDGET
        target = _ref(doc, _ref(doc, job["properties"]["dispatch"])["properties"]["target"])
        assert "target_id" in target["properties"]
    assert _schema(doc, "post", "/cron/jobs")["required"] == ["name", "schedule"]
    body = {"name": "n", "schedule": "every 1d", "text": "t", "runtime": {"budget_daily": -1}}
    status, data, _ = await sc.call("POST", "/cron/jobs", body)
    assert (status, data["error"]) == (
        400,
        {
            "code": "invalid_request",
            "message": t("cron.bad_budget", field="runtime.budget_daily"),
            "details": {},
        },
    )
    status, data, _ = await sc.call("PUT", "/cron/jobs/cron-default", {"enabled": None})
    message = t("gw.bad_field", field="enabled", expected="boolean")
    assert (status, data["error"]["message"]) == (400, message)
    status, data, _ = await sc.call("PUT", "/cron/jobs/cron-default", {"schedule": 5})
    assert (status, data["error"]["code"]) == (400, "invalid_cron_schedule")


async def test_an_mcp_servers_body_is_documented_as_its_config_table_takes_only_its_keys(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """Only the keys of ``[[mcp.servers]]`` are taken, and the document says so."""
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    _, doc, _ = await sc.call("GET", "/openapi.json")
    server = _schema(doc, "post", "/mcp/servers")
    assert server["additionalProperties"] is False
    keys = toml_keys(MCPServerConfig)
    assert set(server["properties"]) == set(keys)
    body = {"name": "s", "url": "http://127.0.0.1:1/mcp", "token": "x"}
    status, data, _ = await sc.call("POST", "/mcp/servers", body)
    assert (status, data["error"]) == (
        400,
        {
            "code": "invalid_request",
            "message": t("gw.mcp_field", field="token", fields=", ".join(keys)),
            "details": {"field": "token"},
        },
    )


async def test_a_channels_body_takes_the_fields_of_the_type_its_path_names(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """The document's body holds every type's fields, each of one JSON type whatever
    the channel; the router takes only those of the channel the path names."""
    sc = await sidecar(anthropic_sim)
    _, doc, _ = await sc.call("GET", "/openapi.json")
    settings = _schema(doc, "put", "/config/channels/{name}")
    for name in CHANNEL_TYPES:
        own = settings_model(name).model_json_schema()["properties"]
        for field, schema in own.items():
            assert settings["properties"][field] == _openapi(schema), (name, field)
    fields = ", ".join(settings_model("qq").model_fields)
    message = t("gw.channel_field", field="url", name="qq", fields=fields)
    # The documented model is the one that refuses a webhook's field for QQ, as the
    # router reads it (the path's parameters its context), before the handler runs.
    op = next(o for o in operations() if (o.method, o.path[:17]) == ("PUT", "/config/channels/"))
    with pytest.raises(ApiError, match="url"):
        op.body.model_validate({"url": "http://x"}, context={"name": "qq"})
    status, data, _ = await sc.call("PUT", "/config/channels/qq", {"url": "http://x"})
    assert (status, data["error"]) == (
        400,
        {"code": "invalid_request", "message": message, "details": {}},
    )
    status, data, _ = await sc.call("PUT", "/config/channels/qq", {})
    message = t("gw.nothing_to_change", fields=fields)
    assert (status, data["error"]["message"]) == (400, message)
    status, data, _ = await sc.call("PUT", "/config/channels/pigeon", {"enabled": True})
    assert (status, data["error"]["code"]) == (400, "channel_not_supported")
