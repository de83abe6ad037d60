"""The sidecar as an HTTP server: auth, the one error shape, limits and timeouts,
request ids and log lines, refusals at start, graceful shutdown."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from kernel.agent.agent import SessionKey
from kernel.app import Kernel
from kernel.config import is_loopback, load_config
from kernel.core.errors import ConfigError, StartupError
from kernel.core.logs import setup_logging
from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.conftest import SECRET_KEY, write_config
from tests.gateway.conftest import API_KEY, SidecarFactory, message
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply
from tests.waiting import wait_until


def assert_error(data: object, code: str) -> None:
    assert isinstance(data, dict) and set(data) == {"error"}
    error = data["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)


# ---------------------------------------------------------------------- auth


async def test_without_a_key_every_route_is_open(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, data, _ = await sc.call("GET", "/chats")
    assert status == 200 and data["chats"][0]["id"] == "chat-default"


@pytest.mark.parametrize("path", ["/chats", "/models/catalog", "/openapi.json", "/no/such"])
async def test_with_a_key_requests_without_it_are_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, path: str
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong"}):
        status, data, response = await sc.call("GET", path, headers=headers)
        assert status == 401, headers
        assert_error(data, "unauthorized")
        assert "X-API-Key" in data["error"]["message"]  # says how to fix it
        assert response.headers["X-Request-Id"]


async def test_key_accepted_as_header_or_bearer_and_health_stays_open(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    for headers in ({"X-API-Key": API_KEY}, {"Authorization": f"Bearer {API_KEY}"}):
        status, _, _ = await sc.call("GET", "/chats", headers=headers)
        assert status == 200
    for path in ("/healthz", "/version"):
        status, _, _ = await sc.call("GET", path, headers={})
        assert status == 200


async def test_claude_path_refuses_in_anthropic_format(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    body = {"model": "x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    status, data, _ = await sc.call("POST", "/v1/messages", body, headers={"x-api-key": "no"})
    assert status == 401
    assert data["type"] == "error" and data["error"]["type"] == "authentication_error"
    assert anthropic_sim.requests == []


def test_non_loopback_host_without_a_key_is_refused_by_config(tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", gateway={"host": "0.0.0.0"})
    with pytest.raises(ConfigError) as info:
        load_config(path, env={}, require_telegram=False)
    assert info.value.key == "gateway.api_key"
    assert "KERNEL_GATEWAY_API_KEY" in str(info.value)
    # With a key it is accepted (the owner chose to expose it, protected).
    config = load_config(path, env={"KERNEL_GATEWAY_API_KEY": API_KEY}, require_telegram=False)
    assert config.gateway.host == "0.0.0.0"


async def test_gateway_never_binds_non_loopback_without_a_key(
    make_kernel: object, anthropic_sim: AnthropicSim
) -> None:
    kernel: Kernel = await make_kernel(anthropic_sim)  # type: ignore[operator]
    kernel.config.gateway.host = "0.0.0.0"  # e.g. changed after validation
    gateway = Gateway(kernel.gateway_deps(), ROUTERS)
    with pytest.raises(StartupError, match="api_key"):
        await gateway.start()
    assert gateway.port == 0


async def test_port_in_use_is_a_one_line_refusal(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    sc.kernel.config.gateway.port = sc.gateway.port
    second = Gateway(sc.kernel.gateway_deps(), ROUTERS)
    with pytest.raises(StartupError) as info:
        await second.start()
    text = str(info.value)
    assert "\n" not in text and "gateway.port" in text and str(sc.gateway.port) in text


# ---------------------------------------------------------------------- error shapes


async def test_unknown_route_and_wrong_method(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, data, response = await sc.call("GET", "/nowhere")
    assert status == 404
    assert_error(data, "not_found")
    assert "/openapi.json" in data["error"]["message"]
    status, data, response = await sc.call("DELETE", "/healthz")
    assert status == 405
    assert_error(data, "method_not_allowed")
    assert response.headers["Allow"] == "GET"
    assert data["error"]["details"]["allowed"] == ["GET"]
    status, data, _ = await sc.call("GET", "/v1/nowhere")
    assert status == 404 and data["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [(b"{not json", "not valid JSON"), (b"", "missing"), (b"[1, 2]", "JSON object")],
)
async def test_bad_bodies_are_invalid_request(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, raw: bytes, fragment: str
) -> None:
    sc = await sidecar(anthropic_sim)
    json_type = {"Content-Type": "application/json"}
    status, data, _ = await sc.call("POST", "/agent/process", data=raw, headers=json_type)
    assert status == 400
    assert_error(data, "invalid_request")
    assert fragment in data["error"]["message"]
    assert anthropic_sim.requests == []


async def test_web_pages_cannot_drive_the_sidecar(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """A cross-site "simple" POST (text/plain, no preflight), a foreign Origin, and a
    rebound Host are all refused before anything runs (keyless: the Host check applies
    without a key)."""
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})
    body = json.dumps(
        {
            "input": [message("x")],
            "biz_params": {"tool": {"name": "memory_add", "input": {"text": "pwned"}}},
        }
    )
    plain = {"Content-Type": "text/plain"}
    status, data, _ = await sc.call("POST", "/agent/process", data=body, headers=plain)
    assert status == 415 and data["error"]["code"] == "unsupported_media_type"
    evil = {"Content-Type": "application/json", "Origin": "https://evil.example"}
    status, data, _ = await sc.call("POST", "/agent/process", data=body, headers=evil)
    assert status == 403 and data["error"]["code"] == "forbidden_origin"
    rebound = {"Content-Type": "application/json", "Host": "evil.example:8088"}
    status, data, _ = await sc.call("POST", "/agent/process", data=body, headers=rebound)
    assert status == 403 and data["error"]["code"] == "forbidden_host"
    assert await sc.kernel.store.list_memories() == []
    # No page is trusted unless listed, not even one served from this machine (a local dev
    # server, or the sidecar's own origin): tools and SDKs send no Origin at all.
    local = {"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{sc.gateway.port}"}
    status, _, _ = await sc.call("POST", "/agent/process", data=body, headers=local)
    assert status == 403
    no_origin = {"Content-Type": "application/json"}
    status, _, _ = await sc.call("POST", "/agent/process", data=body, headers=no_origin)
    assert status == 200 and [m.text for m in await sc.kernel.store.list_memories()] == ["pwned"]


REBOUND_HOSTS = [
    "127.evil.example",
    "127.evil.example:8088",
    "127.0.0.1.nip.io",
    "localhost.evil",
    "localhost.evil:8088",
    "[::1].evil",
    "[::1]x:8088",
    "[::1",
    "[127.0.0.1]:8088",
    "[::1%25lo]:8088",
    "[::ffff:808:808]",
    "127.0.0.1:80x",
    "evil.example",
]
LOOPBACK_HOSTS = [
    "127.0.0.1",
    "127.0.0.1:8088",
    "127.3.2.1:8088",
    "localhost",
    "LocalHost:8088",
    "[::1]",
    "[::1]:8088",
    "[::ffff:7f00:1]",
    "[::ffff:127.0.0.1]:8088",
]


async def test_dns_rebinding_hosts_are_refused_and_literal_loopback_served(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """Without a key, only a literal loopback Host (or localhost) reaches a route: a name
    that merely starts like one may resolve to this machine from a hostile page."""
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})
    for host in REBOUND_HOSTS:
        status, data, _ = await sc.call("GET", "/envs", headers={"Host": host})
        assert status == 403, host
        assert_error(data, "forbidden_host")
    for host in LOOPBACK_HOSTS:
        status, data, _ = await sc.call("GET", "/envs", headers={"Host": host})
        assert status == 200, host
        assert "envs" in data


def test_one_definition_of_loopback_for_the_bind_and_the_host() -> None:
    for host in ("127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "localhost"):
        assert is_loopback(host), host
    for host in ("127.evil.example", "localhost.evil", "0.0.0.0", "::", "::1%lo", "[::1]"):
        assert not is_loopback(host), host


async def test_an_allowed_origin_and_a_keyed_sidecar_behind_a_proxy(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(
        anthropic_sim,
        api_key=API_KEY,
        gateway={"allowed_origins": ["https://dash.example.com/"]},
    )
    ok = sc.headers(Origin="https://dash.example.com", Host="kernel.example.com")
    status, _, _ = await sc.call("GET", "/chats", headers=ok)
    assert status == 200  # with a key, any Host (a reverse proxy) is fine
    other = sc.headers(Origin="https://other.example.com")
    status, data, _ = await sc.call("GET", "/chats", headers=other)
    assert status == 403 and data["error"]["code"] == "forbidden_origin"


async def test_wrong_field_type_names_the_field(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    body = {"input": [message("hi")], "stream": "yes"}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 400
    assert_error(data, "invalid_request")
    assert data["error"]["details"] == {"field": "stream"}


async def test_oversized_bodies_are_refused_with_413(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"max_body_bytes": 1000})
    big = {"input": [message("x" * 2000)]}
    status, data, _ = await sc.call("POST", "/agent/process", big)
    assert status == 413
    assert_error(data, "request_too_large")
    assert data["error"]["details"] == {"max_body_bytes": 1000}

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: caught while reading
        for _ in range(4):
            yield b" " * 400

    json_type = {"Content-Type": "application/json"}
    async with sc.http.post(
        sc.url + "/agent/process", data=chunks(), headers=json_type
    ) as response:
        assert response.status == 413
        assert_error(await response.json(), "request_too_large")
    assert anthropic_sim.requests == []


async def test_slow_request_headers_are_cut_off(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"read_header_timeout": 0.2})
    reader, writer = await asyncio.open_connection("127.0.0.1", sc.gateway.port)
    writer.write(b"GET /version HTTP/1.1\r\nHost: x\r\n")  # never finishes the head
    await writer.drain()
    async with asyncio.timeout(30):
        assert await reader.read() == b""  # closed by the server
    writer.close()
    # A complete request on a new connection is fine.
    status, data, _ = await sc.call("GET", "/version")
    assert status == 200 and data["name"] == "kernel"


async def test_slow_body_is_refused_with_408(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"read_timeout": 0.2})
    reader, writer = await asyncio.open_connection("127.0.0.1", sc.gateway.port)
    writer.write(
        b"POST /agent/process HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"X-API-Key: {sc.api_key}\r\n".encode()
        + b"Content-Length: 100\r\n\r\n{"
    )
    await writer.drain()
    async with asyncio.timeout(30):
        head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    writer.close()


# ---------------------------------------------------------------------- ids and logs


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Kernel's own logging setup (the redacting formatter) writing to a buffer."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()
    setup_logging(None, [SECRET_KEY, API_KEY], level=logging.INFO, stream=buffer)
    yield buffer
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


async def test_request_ids_on_responses_and_log_lines_without_content(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, log_output: io.StringIO
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    anthropic_sim.enqueue(text_reply("the answer is 42"))
    body = {"input": [message("my secret diary entry")], "session_id": "s-log"}
    status, data, response = await sc.call("POST", "/agent/process", body)
    assert status == 200 and data["reply"] == "the answer is 42"
    request_id = response.headers["X-Request-Id"]
    status, _, failed = await sc.call("GET", "/missing")
    assert status == 404
    assert failed.headers["X-Request-Id"] != request_id

    text = log_output.getvalue()
    lines = [line for line in text.splitlines() if f"req={request_id}" in line]
    assert any("POST /agent/process -> 200" in line for line in lines)
    assert any("kernel.gateway" in line for line in lines)
    assert f"req={failed.headers['X-Request-Id']}" in text
    for forbidden in ("secret diary", "the answer is 42", API_KEY, SECRET_KEY, "X-API-Key:"):
        assert forbidden not in text


async def test_a_forged_newline_in_the_path_stays_on_one_log_line(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, log_output: io.StringIO
) -> None:
    """No key needed to try: the request line logs the route, not the (decoded) path."""
    sc = await sidecar(anthropic_sim)
    forged = "%0A2026-01-01 00:00:00,000 ERROR kernel: FORGED%0D%0Aline"
    ids = []
    for path in (f"/chats/x{forged}", f"/nowhere{forged}", f"/envs/K{forged}"):
        status, data, response = await sc.call("GET", path)
        assert status == 404, data
        ids.append(response.headers["X-Request-Id"])
    text = log_output.getvalue()
    for request_id in ids:
        lines = [line for line in text.splitlines() if f"req={request_id}" in line]
        assert len(lines) == 1, lines
    assert "GET /chats/{chat_id} -> 404" in text and "GET (no route) -> 404" in text
    assert "FORGED" not in text and "nowhere" not in text


async def test_workspace_file_names_never_reach_the_log(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, log_output: io.StringIO, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    sc = await sidecar(anthropic_sim, default_workspace=str(tmp_path / "ws"))
    name = "secret-name.txt"
    octets = {"Content-Type": "application/octet-stream"}
    status, _, _ = await sc.call("PUT", f"/workspace/files/{name}", data=b"hello", headers=octets)
    assert status in (200, 201)
    statuses = []
    for method in ("GET", "DELETE", "GET"):
        async with sc.http.request(method, f"{sc.url}/workspace/files/{name}") as response:
            statuses.append(response.status)
    assert statuses == [200, 200, 404]
    text = log_output.getvalue()
    assert "PUT /workspace/files/{path} -> 20" in text
    assert "secret-name" not in text


# ---------------------------------------------------------------------- shutdown


async def test_shutdown_lets_in_flight_requests_finish(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"shutdown_timeout": 5.0})
    anthropic_sim.enqueue(Reply(Text("slow but complete"), chunk_delay=0.2))
    request = asyncio.create_task(sc.process("hi"))
    await anthropic_sim.wait_for_requests(1)
    await sc.gateway.stop()  # waits for the request above
    status, data = await request
    assert status == 200 and data["reply"] == "slow but complete"
    with pytest.raises(aiohttp.ClientConnectionError):
        await sc.call("GET", "/version")


async def test_shutdown_cancels_what_does_not_finish_in_time(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"shutdown_timeout": 0.3})
    anthropic_sim.enqueue(Reply(Text("never"), stall_after=1))
    request = asyncio.create_task(sc.process("hang", session_id="s-hang"))
    await anthropic_sim.wait_for_requests(1)
    async with asyncio.timeout(30):
        await sc.gateway.stop()
    with pytest.raises(aiohttp.ClientError):
        await request
    key = SessionKey("console", "demo-user", "s-hang")
    opened = await sc.kernel.agent.sessions.open_session(key, create=False)
    assert opened is not None
    await wait_until(lambda: not sc.kernel.agent.sessions.is_busy(opened.conversation))
    stored = await sc.kernel.store.load_messages(opened.row.id)
    assert [m.role for m in stored] == ["user"]  # the question is kept; nothing dangles
    assert json.dumps([m.text for m in stored]) == '["hang"]'


async def test_a_malformed_request_is_logged_without_its_bytes(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, log_output: io.StringIO
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    reader, writer = await asyncio.open_connection("127.0.0.1", sc.gateway.port)
    writer.write(
        b"GET /chats HTTP/1.1\r\nHost: x\r\nX-API-Key: " + API_KEY.encode() + b"\r\n"
        b"X-Bad: \x00\r\n\r\n"
    )
    await writer.drain()
    async with asyncio.timeout(30):
        head = await reader.read()
    writer.close()
    status_line, _, rest = head.partition(b"\r\n")
    assert status_line.endswith(b" 400 Bad Request")
    body = json.loads(rest.split(b"\r\n\r\n", 1)[1])
    assert_error(body, "invalid_request")
    assert b"X-Bad" not in head and API_KEY.encode() not in head
    [request_id] = [
        line.split(b":", 1)[1].strip().decode()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"x-request-id:")
    ]
    text = log_output.getvalue()
    assert "BadHttpMessage" in text and f"req={request_id}" in text
    assert API_KEY not in text and "X-Bad" not in text and "Traceback" not in text
