"""``kernel mcp list|add|remove|restart`` against a live sidecar (the handler in a thread,
and the real command as a process), and /mcp in remote ``kernel chat``."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import AsyncIterator

import pytest

from kernel.client.chat import run_remote_chat
from kernel.client.http import Sidecar as Client
from kernel.client.http import SidecarError
from kernel.core.errors import ConfigError
from tests.conftest import free_port
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.gateway.test_cli import kernel as run_kernel
from tests.mcp.conftest import SERVER_SCRIPT
from tests.mcp.test_http import KEY, HTTPServer
from tests.sim.anthropic_sim import AnthropicSim


@pytest.fixture
async def web() -> AsyncIterator[HTTPServer]:
    server = HTTPServer(free_port())
    await server.start()
    yield server
    await server.stop()


async def run(sc: Sidecar, *argv: str, key: str = API_KEY) -> str:
    """The verb's handler, off the loop the sidecar answers on (its client blocks)."""
    from kernel.__main__ import _parser

    args = _parser().parse_args(["mcp", *argv])
    out = io.StringIO()
    code = await asyncio.to_thread(args.client, Client(sc.url, key), args, out)
    assert code == 0
    return out.getvalue()


async def test_add_list_restart_remove(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)

    out = await run(sc, "add", "web", "--url", web.url, "--header", f"X-Api-Key={KEY}")
    lines = out.splitlines()
    assert lines[0].split() == [
        "NAME", "TYPE", "STATE", "TOOLS", "NOT", "OFFERED", "SOURCE", "LAST", "ERROR"
    ]  # fmt: skip
    assert lines[1].split() == ["web", "http", "connected", "1", "-", "runtime", "-"]

    out = await run(
        sc,
        "add",
        "local",
        "--command",
        sys.executable,
        f"--arg={SERVER_SCRIPT}",
        "--env",
        "MODE=test",
        "--connect-timeout",
        "20",
        "--json",
    )
    added = json.loads(out)
    assert (added["state"], added["type"], added["args"]) == (
        "connected",
        "stdio",
        [str(SERVER_SCRIPT)],
    )
    assert added["env"] == {"MODE": "****"} and added["connect_timeout"] == 20.0

    rows = {line.split()[0]: line.split() for line in (await run(sc, "list")).splitlines()[1:]}
    assert rows["web"][2:4] == ["connected", "1"] and rows["local"][2] == "connected"
    listed = json.loads(await run(sc, "list", "--json"))["servers"]
    assert [s["name"] for s in listed] == ["web", "local"]
    assert KEY not in json.dumps(listed)

    pid = (await sc.kernel.tools.call("mcp_local__pid", {})).content
    out = await run(sc, "restart", "local")
    assert out.splitlines()[1].split()[:3] == ["local", "stdio", "connected"]
    assert (await sc.kernel.tools.call("mcp_local__pid", {})).content != pid

    assert await run(sc, "remove", "web") == (
        "removed the MCP server web: session closed, tools withdrawn\n"
    )
    assert json.loads(await run(sc, "remove", "local", "--json")) == {
        "deleted": True,
        "name": "local",
    }
    assert (await run(sc, "list")).splitlines()[1:] == []
    assert sc.kernel.tools.names() == [
        n for n in sc.kernel.tools.names() if not n.startswith("mcp_")
    ]


async def test_refusals_carry_the_sidecar_code(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"auth": "none"})  # keyless: no stdio add
    with pytest.raises(SidecarError) as refused:
        await run(sc, "add", "local", "--command", sys.executable, key="")
    assert refused.value.code == "privilege_required"
    assert 'auth = "none"' in str(refused.value)
    with pytest.raises(SidecarError) as missing:
        await run(sc, "restart", "nope", key="")
    assert missing.value.code == "mcp_server_not_found"
    with pytest.raises(ConfigError):
        await run(sc, "add", "web", "--url", "http://127.0.0.1:1/mcp", "--header", "novalue")


async def test_mcp_in_remote_chat(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    await run(sc, "add", "web", "--url", web.url, "--header", f"X-Api-Key={KEY}")
    out, err = io.StringIO(), io.StringIO()

    code = await asyncio.to_thread(
        run_remote_chat, Client(sc.url, API_KEY), io.StringIO("/mcp\n"), out, err
    )

    assert (code, err.getvalue()) == (0, "")
    assert out.getvalue() == "MCP servers:\n• web (http): connected, 1 tools\n"
    assert anthropic_sim.requests == []  # no model turn


@pytest.mark.slow  # the real `kernel` command as a process
async def test_the_real_command(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, web: HTTPServer
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    code, out, err = await run_kernel(
        sc, "mcp", "add", "web", "--url", web.url, "--header", f"X-Api-Key={KEY}", "--json"
    )
    assert (code, err) == (0, "") and json.loads(out)["state"] == "connected"
    code, out, err = await run_kernel(sc, "mcp", "remove", "cfg")
    assert code == 1 and "mcp_server_not_found" in err
