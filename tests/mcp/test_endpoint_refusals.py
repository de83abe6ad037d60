"""/mcp's refusals before the SDK (tokens, peer, Host, the setting, bodies) and its end
with the sidecar: each asserted on the wire, with the sidecar still answering after."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from kernel.gateway.routes.mcp_endpoint import ENDPOINT
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.gateway.conftest import sidecar as sidecar  # the fixture
from tests.mcp.test_endpoint import BASH, answer_next, client, model, open_grant
from tests.waiting import wait_until

__all__ = ["model"]  # the fixture, shared

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def post(
    sc: Sidecar, body: Any = INITIALIZE, *, token: str | None = None, **headers: str
) -> tuple[int, Any, aiohttp.ClientResponse]:
    """One POST to /mcp (the body as JSON unless bytes); the answer parsed when JSON."""
    sent = {**ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {}), **headers}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with sc.http.post(sc.url + "/mcp", data=data, headers=sent) as response:
        raw = await response.read()
        kind = response.headers.get("Content-Type", "")
        parsed = json.loads(raw) if raw and kind.startswith("application/json") else raw
        return response.status, parsed, response


async def test_wrong_missing_and_expired_tokens_are_refused(
    sidecar: SidecarFactory, model: Any
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    status, data, response = await post(sc, token="not-a-token")
    assert status == 401 and data["error"]["code"] == "unauthorized"
    assert "[gateway] api_key" in data["error"]["message"]
    assert data["error"]["details"] == {"expired": False}
    assert response.headers["X-Request-Id"]
    status, data, _ = await post(sc)
    assert status == 401 and "Bearer" in data["error"]["message"]

    grant = open_grant(sc)
    status, _, _ = await post(sc, token=grant.token)
    assert status == 200
    sc.kernel.approvals.close(grant)  # the delegation ended
    status, data, _ = await post(sc, token=grant.token)
    assert status == 401 and data["error"]["details"] == {"expired": True}
    assert "delegation ended" in data["error"]["message"]
    # The owner's key works as a bearer and as X-API-Key.
    assert (await post(sc, token=API_KEY))[0] == 200
    assert (await post(sc, **{"X-API-Key": API_KEY}))[0] == 200


async def test_an_ipv6_wildcard_sidecar_gives_runs_its_ipv6_loopback(
    sidecar: SidecarFactory, model: Any
) -> None:
    # asyncio binds "::" IPv6 only: 127.0.0.1 would not answer there.
    sc = await sidecar(model, api_key=API_KEY, gateway={"host": "::"})
    url = sc.kernel.approvals.endpoint_url
    assert url == f"http://[::1]:{sc.gateway.port}/mcp"
    grant = open_grant(sc)
    async with aiohttp.ClientSession() as http:
        headers = {**ACCEPT, "Authorization": f"Bearer {grant.token}"}
        async with http.post(url, data=json.dumps(INITIALIZE), headers=headers) as response:
            assert response.status == 200


async def test_the_sdks_server_starts_with_the_first_request_not_with_the_sidecar(
    sidecar: SidecarFactory, model: Any
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    runner = sc.gateway._runner
    assert runner is not None
    host = runner.app[ENDPOINT]
    assert host.endpoint is None  # an owner who never uses /mcp never pays for it
    assert sc.kernel.approvals.endpoint_url is not None  # yet runs may point at it
    assert (await post(sc, token=API_KEY))[0] == 200
    assert host.endpoint is not None and host.endpoint.running
    endpoint = host.endpoint
    await sc.gateway.stop()
    assert host.closed and not endpoint.running


async def test_a_keyless_sidecar_serves_the_local_owner(
    sidecar: SidecarFactory, model: Any
) -> None:
    sc = await sidecar(model, gateway={"auth": "none"})
    assert sc.kernel.approvals.endpoint_url == f"{sc.url}/mcp"
    async with client(sc) as session:
        added = await session.call_tool("memory_add", {"text": "keyless works"})
        assert not added.is_error
    status, data, _ = await post(sc, token="a-guess")
    assert status == 401 and data["error"]["code"] == "unauthorized"


async def test_host_must_name_this_machine_whatever_the_key(
    sidecar: SidecarFactory, model: Any
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    for host in ("evil.example", "127.0.0.1.evil.example", "localhost.evil"):
        status, data, _ = await post(sc, token=API_KEY, Host=host)
        assert status == 403 and data["error"]["code"] == "forbidden_host", host
    port = sc.gateway.port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        assert (await post(sc, token=API_KEY, Host=host))[0] == 200, host
    status, data, _ = await post(sc, token=API_KEY, Origin="http://evil.example")
    assert status == 403 and data["error"]["code"] == "forbidden_origin"


def outside_address() -> str | None:
    """This machine's address on a non-loopback interface, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))  # no packet is sent
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


async def test_a_peer_that_is_not_loopback_is_refused(sidecar: SidecarFactory, model: Any) -> None:
    address = outside_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    sc = await sidecar(model, api_key=API_KEY, gateway={"host": "0.0.0.0"})
    url = f"http://{address}:{sc.gateway.port}/mcp"
    headers = {**ACCEPT, "Authorization": f"Bearer {API_KEY}", "Host": "127.0.0.1"}
    async with sc.http.post(url, data=json.dumps(INITIALIZE), headers=headers) as response:
        data = await response.json()
    assert response.status == 403 and data["error"]["code"] == "forbidden"
    assert "loopback" in data["error"]["message"]
    assert (await post(sc, token=API_KEY))[0] == 200  # on loopback it answers


async def test_serve_off_answers_not_found(sidecar: SidecarFactory, model: Any) -> None:
    sc = await sidecar(model, api_key=API_KEY, extra="\n[mcp]\nserve = false\n")
    status, data, _ = await post(sc, token=API_KEY)
    assert status == 404 and data["error"]["code"] == "not_found"
    assert "[mcp]" in data["error"]["message"] and "serve" in data["error"]["message"]
    assert sc.kernel.approvals.endpoint_url is None  # no run may ask
    status, _, _ = await sc.call("GET", "/mcp/servers")  # the admin route stays
    assert status == 200


async def chunks(total: int) -> AsyncIterator[bytes]:
    for _ in range(total // 1024):
        yield b" " * 1024


async def test_hostile_bodies_get_clear_refusals(sidecar: SidecarFactory, model: Any) -> None:
    sc = await sidecar(model, api_key=API_KEY, gateway={"max_body_bytes": 64 * 1024})
    status, data, _ = await post(sc, b"x" * (65 * 1024), token=API_KEY)
    assert status == 413 and data["error"]["code"] == "request_too_large"
    # No Content-Length (chunked): still the sidecar's limit.
    headers = {**ACCEPT, "Authorization": f"Bearer {API_KEY}"}
    async with sc.http.post(sc.url + "/mcp", data=chunks(256 * 1024), headers=headers) as response:
        assert response.status == 413
    hostile: list[bytes] = [
        b"{not json",
        b"[]",
        b'{"jsonrpc": "2.0"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": 7}',
        b"[" * 5000 + b"]" * 5000,
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": None}).encode(),
        "\udcff".encode("utf-8", "surrogatepass"),
    ]
    for body in hostile:
        status, _, _ = await post(sc, body, token=API_KEY)
        assert 200 <= status < 500, (body[:40], status)
    status, data, _ = await post(sc, token=API_KEY, **{"Content-Type": "text/plain"})
    assert status == 415 and data["error"]["code"] == "unsupported_media_type"
    status, data, _ = await post(sc, b"[" * 5000 + b"]" * 5000, token=API_KEY)
    assert status == 400 and data["error"]["code"] == "invalid_request"  # before the SDK
    assert (await sc.call("GET", "/healthz"))[0] == 200


async def test_stopping_the_sidecar_ends_calls_in_flight(
    sidecar: SidecarFactory, model: Any
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    grant = open_grant(sc, timeout=3600)
    asks = sc.kernel.agent.asks

    async def ask_and_wait() -> Any:
        async with client(sc, grant.token) as session:
            return await session.call_tool("approve", {"tool_name": "Bash", "input": BASH})

    call = asyncio.create_task(ask_and_wait())
    await wait_until(lambda: bool(asks.waiting()))
    await sc.gateway.stop()  # not after the hour: the call in flight is cancelled
    assert not asks.waiting()  # the question was withdrawn
    assert sc.kernel.approvals.endpoint_url is None
    with pytest.raises(BaseException):  # noqa: B017, PT011 - the connection ended unanswered
        await call


MODERN = "2026-07-28"  # the protocol Claude Code 2.1.332 speaks (docs/cli-wire.md)


def modern(method: str, params: dict[str, Any], name: str = "") -> tuple[bytes, dict[str, str]]:
    """A request as claude sends it: no initialize, the version and method in headers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.332"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    return json.dumps(body).encode(), headers


async def test_stopping_the_sidecar_ends_the_2026_protocols_calls_and_streams(
    sidecar: SidecarFactory, model: Any
) -> None:
    # shutdown_timeout far longer than the wait below: only cancelling them ends these.
    sc = await sidecar(model, api_key=API_KEY, gateway={"shutdown_timeout": 600.0})
    grant = open_grant(sc, timeout=3600)
    asks = sc.kernel.agent.asks
    approve = modern(
        "tools/call",
        {"name": "approve", "arguments": {"tool_name": "Bash", "input": BASH}},
        "approve",
    )
    listen = modern("subscriptions/listen", {})

    async def send(request: tuple[bytes, dict[str, str]]) -> Any:
        body, headers = request
        headers = {**ACCEPT, "Authorization": f"Bearer {grant.token}", **headers}
        async with sc.http.post(sc.url + "/mcp", data=body, headers=headers) as response:
            return response.status, await response.read()

    calls = [asyncio.create_task(send(approve)), asyncio.create_task(send(listen))]
    await wait_until(lambda: bool(asks.waiting()))
    async with asyncio.timeout(40):  # not the 600 s drain: the stop cancels them
        await sc.gateway.stop()
        await asyncio.gather(*calls, return_exceptions=True)  # both connections ended
    assert not asks.waiting()
    [record] = await sc.kernel.approvals.recent(grant.delegation_id)
    assert (record.decision, record.decided_by) == ("deny", "cancelled")


async def test_an_allow_gives_the_cli_the_input_the_owner_saw(
    sidecar: SidecarFactory, model: Any
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    grant = open_grant(sc)
    edit = {"file_path": "/w/a\ud800.py", "old_string": "x", "new_string": "y"}
    body, headers = modern(
        "tools/call",
        {"name": "approve", "arguments": {"tool_name": "Edit", "input": edit}},
        "approve",
    )
    headers = {**ACCEPT, "Authorization": f"Bearer {grant.token}", **headers}

    async def call() -> bytes:
        async with sc.http.post(sc.url + "/mcp", data=body, headers=headers) as response:
            return await response.read()

    answer = asyncio.create_task(call())
    question = await answer_next(sc, 0)  # Allow once
    shown = ascii(question.text)  # ascii(): a failure's report must survive a surrogate
    assert "\\ufffd" in shown and "\\ud800" not in shown
    raw = (await answer).decode()
    frame = next(
        line for line in raw.splitlines() if line.startswith("data:") or line.startswith("{")
    )
    message = json.loads(frame.removeprefix("data:"))
    verdict = json.loads(message["result"]["content"][0]["text"])
    assert verdict["behavior"] == "allow"
    assert ascii(verdict["updatedInput"]["file_path"]) == ascii("/w/a\ufffd.py")  # shown = run


async def test_a_client_going_away_withdraws_its_question(
    sidecar: SidecarFactory, model: Any
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    asks = sc.kernel.agent.asks

    async def ask_and_wait() -> Any:
        async with client(sc, API_KEY) as session:
            return await session.call_tool("approve", {"tool_name": "Bash", "input": BASH})

    sc.kernel.channel_registry.asker = Shown()
    call = asyncio.create_task(ask_and_wait())
    await wait_until(lambda: bool(asks.waiting()))
    call.cancel()  # the client is killed while the owner is asked
    with pytest.raises(asyncio.CancelledError):
        await call
    await wait_until(lambda: not asks.waiting())  # not left to its timeout


class Shown:
    """The registry's asker (Telegram's board in production): keeps what it showed."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    async def show(self, event: Any, label: str) -> None:
        self.events.append(event)

    async def settle(self, tool_call_id: str) -> None:
        return None


async def test_the_owners_client_is_asked_through_the_asker(
    sidecar: SidecarFactory, model: Any
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    shown = Shown()
    sc.kernel.channel_registry.asker = shown
    async with client(sc, API_KEY) as session:
        call = asyncio.create_task(
            session.call_tool("approve", {"tool_name": "Bash", "input": BASH})
        )
        await wait_until(lambda: bool(shown.events))
        assert "git status" in shown.events[0].question
        sc.kernel.agent.asks.answer(shown.events[0].id, 0)
        result = await call
    assert json.loads(result.content[0].text) == {"behavior": "allow", "updatedInput": BASH}
    [record] = await sc.kernel.approvals.recent()
    assert (record.delegation_id, record.decision, record.decided_by) == ("", "allow", "owner")


async def test_openapi_documents_the_endpoint(sidecar: SidecarFactory, model: Any) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    status, document, _ = await sc.call("GET", "/openapi.json")
    assert status == 200
    item = document["paths"]["/mcp"]
    assert set(item) == {"post"}  # stateless: no server stream, no session to end
    post_doc = item["post"]
    assert {"401", "403", "404", "413"} <= set(post_doc["responses"])
    assert "text/event-stream" in post_doc["responses"]["200"]["content"]
    for method in ("GET", "DELETE"):
        status, data, response = await sc.call(method, "/mcp")
        assert status == 405 and response.headers["Allow"] == "POST", data


def _json_schema(schema: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` as JSON Schema says it (a null is also allowed)."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _json_schema(value) for key, value in schema.items() if key != "nullable"}
    return {"anyOf": [{"type": "null"}, out]} if schema.get("nullable") else out


async def test_the_document_says_what_mcp_answers(sidecar: SidecarFactory, model: Any) -> None:
    """Each kind of answer POST /mcp gives — the SDK's stream, its 202, its JSON-RPC
    refusals, Kernel's own refusals before it — is a status, a media type and a body that
    /openapi.json documents for it (issue 33 item 9)."""
    import jsonschema

    sc = await sidecar(model, api_key=API_KEY)
    _, doc, _ = await sc.call("GET", "/openapi.json", headers={"X-API-Key": API_KEY})
    documented = doc["paths"]["/mcp"]["post"]["responses"]
    components = _json_schema(doc["components"])

    def conforms(status: int, kind: str, body: Any) -> None:
        answer = documented.get(str(status))
        assert answer is not None, f"{status} is not documented"
        media = answer.get("content", {})
        assert kind in media, f"{status} {kind}: documented {list(media)}"
        schema = {**_json_schema(media[kind]["schema"]), "components": components}
        if kind == "application/json":
            jsonschema.validate(body, schema)

    key = {"X-API-Key": API_KEY}
    status, data, response = await post(sc, **key)  # initialize: the SDK's stream
    assert status == 200
    conforms(status, response.content_type, None)
    events = [line[6:] for line in data.decode().splitlines() if line.startswith("data: ")]
    message = {"$ref": "#/components/schemas/JsonRpcMessage", "components": components}
    for event in events:
        jsonschema.validate(json.loads(event), message)
    assert events, "no event in the stream"

    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, data, response = await post(sc, notification, **key)
    assert status == 202 and not data
    assert "content" not in documented["202"]

    for body, headers, wanted in (
        ({"jsonrpc": "2.0", "id": 5}, key, 400),  # no JSON-RPC message: the SDK's error
        (INITIALIZE, {**key, "Accept": "application/json"}, 406),  # no event stream
        (b'{"jsonrpc": ', key, 400),  # not JSON: Kernel's own refusal
    ):
        status, data, response = await post(sc, body, **headers)
        assert status == wanted, (body, status, data)
        conforms(status, response.content_type, data)
