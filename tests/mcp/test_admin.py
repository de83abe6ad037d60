"""MCP servers changed while Kernel runs, below the sidecar: runtime.toml's servers merged
by name over config.toml's, /mcp in Telegram and in the terminal, a change while Kernel
stops, and no way for a turn (a guest's included) to change servers."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from kernel.config.mcp import merge_servers
from kernel.console.chat import ConsoleChat
from kernel.core.errors import CodedError
from kernel.core.i18n import t
from kernel.mcp.manager import runtime_names
from tests.mcp.conftest import MCPKernel, alive, mcp_toml, stdio_server
from tests.mcp.test_config import load
from tests.sim.anthropic_sim import AnthropicSim
from tests.waiting import wait_until


def test_merge_by_name_replaces_in_place_and_appends() -> None:
    base = [{"name": "a", "url": "1"}, {"name": "b", "url": "2"}]
    overlay = [{"name": "b", "type": "stdio", "command": "x"}, {"name": "c", "url": "3"}]
    assert merge_servers(base, overlay) == [
        {"name": "a", "url": "1"},
        {"name": "b", "type": "stdio", "command": "x"},  # whole: no url left from config
        {"name": "c", "url": "3"},
    ]
    assert merge_servers(base, "not a list") == "not a list"  # refused by the loader
    assert base == [{"name": "a", "url": "1"}, {"name": "b", "url": "2"}]


def test_runtime_toml_servers_over_config_toml(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    added = {"name": "added", "type": "stdio", "command": "srv2"}
    covering = {"name": "cfg", "type": "stdio", "command": "newer"}
    (tmp_path / "data" / "runtime.toml").write_text(
        tomli_w.dumps({"mcp": {"servers": [added, covering]}})
    )
    config = load(
        tmp_path,
        [{"name": "cfg", "type": "http", "url": "http://127.0.0.1:1/mcp"}, stdio_server("s")],
        settings={"ping_interval": 5.0},
    )
    servers = {s.name: s for s in config.mcp_servers}
    assert list(servers) == ["cfg", "s", "added"]
    assert (servers["cfg"].type, servers["cfg"].command) == ("stdio", "newer")
    assert config.mcp.ping_interval == 5.0  # [mcp] itself still merges key by key


async def test_mcp_in_telegram_lists_state_and_tools(bot: Any, tmp_path: Path) -> None:
    servers = [
        stdio_server("test"),
        {"name": "gone", "type": "stdio", "command": "/nonexistent/server"},
        stdio_server("off", enabled=False),
    ]
    h = await bot(extra=mcp_toml(servers, {"reconnect_max_delay": 0.2}))
    await wait_until(lambda: h.kernel.mcp.status()[0].state == "connected")
    await h.kernel.mcp.add(h.kernel.runtime, stdio_server("late"))
    count = len([n for n in h.kernel.tools.names() if n.startswith("mcp_test__")])

    text = await h.ask("/mcp")

    assert text.splitlines() == [
        "MCP servers:",
        f"• test (stdio): connected, {count} tools",
        "  and 1 listed but not offered: research",
        "• gone (stdio): failed (cannot run '/nonexistent/server': No such file or directory)",
        "• off (stdio): disabled, 0 tools",
        f"• late (stdio): connected, {count} tools",
        "  and 1 listed but not offered: research",
    ]
    assert "/mcp — " in await h.ask("/help mcp")


async def test_mcp_in_the_terminal(model: AnthropicSim, mcp_kernel: MCPKernel) -> None:
    kernel = await mcp_kernel(model, [])
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)

    assert await chat.handle("/mcp")
    await kernel.mcp.add(kernel.runtime, stdio_server("test"))
    assert await chat.handle("/mcp")

    lines = out.getvalue().splitlines()
    assert lines[0] == "No MCP servers: add one with kernel mcp add or POST /mcp/servers"
    assert lines[1] == "MCP servers:" and lines[2].startswith("• test (stdio): connected, ")
    assert err.getvalue() == "" and model.requests == []


async def test_no_change_once_kernel_stops_and_no_child_outlives_it(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [])
    await kernel.mcp.add(kernel.runtime, stdio_server("test"))
    pid = int((await kernel.tools.call("mcp_test__pid", {})).content)

    await kernel.stop()

    assert not alive(pid)
    with pytest.raises(CodedError) as refused:
        await kernel.mcp.add(kernel.runtime, stdio_server("again"))
    assert refused.value.code == "mcp_stopping"
    assert runtime_names(await kernel.runtime.overlay()) == ["test"]  # kept for next time


async def test_no_tool_of_a_turn_changes_servers(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    """Adding a stdio server runs a command: only the owner's API key reaches it (the
    sidecar), never a turn, so never a guest's (QQ, webhook) turn either."""
    kernel = await mcp_kernel(model, [stdio_server("test")])
    names = kernel.tools.names()
    own = [n for n in names if not n.startswith("mcp_")]
    assert not [n for n in own if "mcp" in n.lower() or "server" in n.lower()]


async def test_a_call_cut_short_by_its_servers_removal_says_so(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    import asyncio

    kernel = await mcp_kernel(model, [])
    await kernel.mcp.add(kernel.runtime, stdio_server("late"))
    call = asyncio.create_task(kernel.tools.call("mcp_late__nap", {"seconds": 600}))
    await asyncio.sleep(0.2)  # most likely under way; a loaded machine may not be there yet
    await kernel.mcp.remove(kernel.runtime, "late")
    outcome = await asyncio.wait_for(call, 30)
    assert not outcome.ok
    # Never "retried in the background; try again later": the server is gone.
    assert "try again later" not in outcome.content
    assert "was stopped" in outcome.content or outcome.content.startswith(
        t("tool.unknown", name="mcp_late__nap", listing="")
    )
    assert "mcp_late__nap" not in kernel.tools.names()
