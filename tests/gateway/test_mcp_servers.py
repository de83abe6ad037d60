"""``/mcp/servers``: MCP servers added, used, removed and restarted while Kernel runs,
kept in data/runtime.toml across a restart; stdio adds only with the API key; bad
definitions refused by field. Real servers: the SDK's streamable HTTP app under uvicorn
and tests/mcp/stdio_server.py."""

from __future__ import annotations

import asyncio
import json
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kernel.mcp.manager import runtime_names
from tests.conftest import free_port
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.mcp.conftest import alive, mcp_toml, stdio_server
from tests.mcp.test_http import KEY, HTTPServer
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply
from tests.waiting import wait_until


@pytest.fixture
async def web() -> AsyncIterator[HTTPServer]:
    server = HTTPServer(free_port())
    await server.start()
    yield server
    await server.stop()


def http_server(name: str, url: str, **keys: Any) -> dict[str, Any]:
    return {"name": name, "type": "http", "url": url, "headers": {"X-Api-Key": KEY}, **keys}


def offered(sim: AnthropicSim, index: int = -1) -> list[str]:
    body = sim.requests[index].body
    assert body is not None
    return [tool["name"] for tool in body.get("tools", [])]


def overlay(sc: Sidecar) -> dict[str, Any]:
    path = sc.kernel.config.runtime_path
    return tomllib.loads(path.read_text()) if path.exists() else {}


async def servers(sc: Sidecar) -> dict[str, dict[str, Any]]:
    status, data, _ = await sc.call("GET", "/mcp/servers")
    assert status == 200
    return {server["name"]: server for server in data["servers"]}


async def test_added_over_http_a_turn_offers_and_calls_its_tool_then_removed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)

    status, data, _ = await sc.call("POST", "/mcp/servers", http_server("web", web.url))

    assert status == 201, data
    assert (data["state"], data["tools"], data["source"]) == ("connected", 1, "runtime")
    assert data["headers"] == {"X-Api-Key": "sesa…cdef"}  # masked, never the value
    assert KEY not in str(await servers(sc))
    kept = overlay(sc)["mcp"]["servers"]
    assert kept == [http_server("web", web.url)]

    anthropic_sim.enqueue(
        tool_reply("mcp_web__greet", {"name": "owner"}), text_reply("It said hello.")
    )
    status, data = await sc.process("greet me through the server")
    assert status == 200 and data["reply"] == "It said hello."
    assert "mcp_web__greet" in offered(anthropic_sim, -2)
    result = anthropic_sim.requests[-1].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "hello owner" in str(result["content"])

    status, data, _ = await sc.call("DELETE", "/mcp/servers/web")

    assert (status, data) == (200, {"deleted": True, "name": "web"})
    assert "web" not in await servers(sc)
    assert "mcp_web__greet" not in sc.kernel.tools.names()
    assert runtime_names(overlay(sc)) == []
    anthropic_sim.enqueue(text_reply("No tools."))
    status, data = await sc.process("anything?")
    assert status == 200 and "mcp_web__greet" not in offered(anthropic_sim)
    status, data, _ = await sc.call("DELETE", "/mcp/servers/web")
    assert (status, data["error"]["code"]) == (404, "mcp_server_not_found")


async def test_a_stdio_server_restarts_with_a_new_process(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    status, data, _ = await sc.call("POST", "/mcp/servers", stdio_server("local"))
    assert status == 201 and data["state"] == "connected" and data["tools"] >= 8
    before = (await sc.kernel.tools.call("mcp_local__pid", {})).content

    status, data, _ = await sc.call("POST", "/mcp/servers/local/restart")

    assert status == 200 and (data["name"], data["state"]) == ("local", "connected")
    after = (await sc.kernel.tools.call("mcp_local__pid", {})).content
    assert after != before
    await wait_until(lambda: not alive(int(before)))
    status, data, _ = await sc.call("POST", "/mcp/servers/nope/restart")
    assert (status, data["error"]["code"]) == (404, "mcp_server_not_found")


async def test_kept_across_a_kernel_restart(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    status, _, _ = await sc.call("POST", "/mcp/servers", http_server("web", web.url))
    assert status == 201
    await sc.stop()

    again = await sidecar(anthropic_sim, api_key=API_KEY, keep_config=True)

    listed = await servers(again)
    assert (listed["web"]["state"], listed["web"]["source"]) == ("connected", "runtime")
    assert "mcp_web__greet" in again.kernel.tools.names()
    assert [s.name for s in again.kernel.config.mcp_servers] == ["web"]


async def test_stdio_refused_without_the_key_http_allowed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})  # keyless, on loopback

    status, data, _ = await sc.call("POST", "/mcp/servers", stdio_server("local"))

    assert status == 403 and data["error"]["code"] == "privilege_required"
    assert 'auth = "none"' in data["error"]["message"]
    assert "local" not in await servers(sc) and overlay(sc) == {}
    status, data, _ = await sc.call("POST", "/mcp/servers", http_server("web", web.url))
    assert status == 201 and data["state"] == "connected"


async def test_the_key_is_needed_when_one_is_set(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    for headers in ({}, {"X-API-Key": "wrong"}):
        status, data, _ = await sc.call(
            "POST", "/mcp/servers", stdio_server("local"), headers=headers
        )
        assert (status, data["error"]["code"]) == (401, "unauthorized")
    assert overlay(sc) == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "s", "type": "http", "urll": "http://x"}, "urll"),
        ({"type": "http", "url": "http://127.0.0.1:1/mcp"}, "name"),
        ({"name": "a/b", "url": "http://127.0.0.1:1/mcp"}, "name"),
        ({"name": "s", "type": "ftp", "url": "http://127.0.0.1:1/mcp"}, "type"),
        ({"name": "s", "type": "http"}, "url"),
        ({"name": "s", "url": "ftp://host/mcp"}, "url"),
        ({"name": "s", "type": "stdio"}, "command"),
        ({"name": "s", "url": "http://127.0.0.1:1/mcp", "connect_timeout": 0}, "connect_timeout"),
        ({"name": "s", "url": "http://127.0.0.1:1/mcp", "timeout": "5"}, "timeout"),
        ({"name": "s", "url": "http://127.0.0.1:1/mcp", "enabled": "yes"}, "enabled"),
        ({"name": "s", "url": "http://127.0.0.1:1/mcp", "headers": {"X": 1}}, "headers"),
        (
            {"name": "s", "url": "http://127.0.0.1:1/mcp", "headers": {"X": "a\r\nB: c"}},
            "headers.X",
        ),
        (
            {"name": "s", "url": "http://127.0.0.1:1/mcp", "headers": {"A": "Bearer ${NOT_SET}"}},
            "headers.A",
        ),
        ({"name": "s", "type": "stdio", "command": "srv", "args": ["-v", 1]}, "args[1]"),
        ({"name": "s", "type": "stdio", "command": "srv", "env": {"K": "${NOT_SET}"}}, "env.K"),
        ({"name": "s", "type": "stdio", "command": "s\0rv"}, "command"),
    ],
)
async def test_bad_definitions_are_refused_with_the_field_named(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, body: dict[str, Any], field: str
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)

    status, data, _ = await sc.call("POST", "/mcp/servers", body)

    assert status == 400, data
    assert data["error"]["code"] == "invalid_request"
    assert data["error"]["details"]["field"] == field, data
    assert field.split(".")[0].split("[")[0] in data["error"]["message"]
    assert overlay(sc) == {} and sc.kernel.mcp.status() == []


async def test_names_collide_and_config_servers_stay(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    extra = mcp_toml([http_server("cfg", web.url)])
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=extra)
    assert (await servers(sc))["cfg"]["source"] == "config"

    for name in ("cfg", "web", "web"):
        status, data, _ = await sc.call("POST", "/mcp/servers", http_server(name, web.url))
    assert (status, data["error"]["code"]) == (409, "mcp_server_exists")
    assert "'web'" in data["error"]["message"]
    assert runtime_names(overlay(sc)) == ["web"]

    # A server of config.toml is not removed here (as DELETE /envs/{key}); restarted, yes.
    status, data, _ = await sc.call("DELETE", "/mcp/servers/cfg")
    assert (status, data["error"]["code"]) == (409, "mcp_server_in_config")
    assert "config.toml" in data["error"]["message"]
    status, data, _ = await sc.call("POST", "/mcp/servers/cfg/restart")
    assert status == 200 and data["state"] == "connected" and data["source"] == "config"
    assert "mcp_cfg__greet" in sc.kernel.tools.names()


async def test_concurrent_changes_of_one_name_are_serialised(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    body = http_server("web", web.url)

    adds = await asyncio.gather(*(sc.call("POST", "/mcp/servers", body) for _ in range(4)))

    assert sorted(status for status, _, _ in adds) == [201, 409, 409, 409]
    assert runtime_names(overlay(sc)) == ["web"]

    # Add, remove, add, remove, … sent at once: each sees the one before it finished.
    calls = [
        sc.call("DELETE", "/mcp/servers/web")
        if i % 2 == 0
        else sc.call("POST", "/mcp/servers", body)
        for i in range(6)
    ]
    results = [status for status, _, _ in await asyncio.gather(*calls)]
    listed = "web" in await servers(sc)
    assert listed == ("web" in runtime_names(overlay(sc)))
    assert listed == ("mcp_web__greet" in sc.kernel.tools.names())
    assert all(status in (200, 201, 404, 409) for status in results)


async def test_a_server_that_cannot_start_is_added_failed_and_can_be_removed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    body = {"name": "gone", "type": "stdio", "command": str(tmp_path / "no-such-server")}

    status, data, _ = await sc.call("POST", "/mcp/servers", body)

    assert status == 201 and data["state"] == "failed" and data["tools"] == 0
    assert "No such file" in data["last_error"]
    status, _, _ = await sc.call("DELETE", "/mcp/servers/gone")
    assert status == 200 and sc.kernel.mcp.status() == []


async def test_an_unreachable_http_server_answers_within_its_connect_timeout(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens

    status, data, _ = await sc.call("POST", "/mcp/servers", {"name": "down", "url": url})

    assert status == 201 and data["state"] == "failed" and data["last_error"]
    assert (await servers(sc))["down"]["state"] in ("failed", "connecting")


async def test_without_the_key_a_server_may_not_reference_kernels_environment(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})  # keyless, on loopback
    sc.kernel.config.source_env["ANTHROPIC_API_KEY"] = "sk-ant-SECRET-0123456789"
    leak = http_server("evil", web.url, headers={"X-Leak": "${ANTHROPIC_API_KEY}"})
    status, data, _ = await sc.call("POST", "/mcp/servers", leak)
    assert status == 403 and data["error"]["code"] == "privilege_required"
    assert 'auth = "none"' in data["error"]["message"]
    assert data["error"]["details"]["fields"] == ["mcp.servers.evil.headers"]
    assert "evil" not in await servers(sc) and overlay(sc) == {}


async def test_an_address_shows_no_credentials(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim)
    port = web.url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    url = f"http://user:pw-SECRET@127.0.0.1:{port}/mcp?token=tok-SECRET-0123456789"
    status, _, _ = await sc.call("POST", "/mcp/servers", http_server("creds", url))
    assert status == 201
    shown = json.dumps(await servers(sc))
    assert "pw-SECRET" not in shown and "tok-SECRET" not in shown
    assert f"***@127.0.0.1:{port}" in shown
