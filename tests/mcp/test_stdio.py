"""A stdio MCP server written with the SDK, reached through Kernel's ToolRegistry."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from kernel.agent.agent import UserInput
from kernel.core.events import Completed, ToolCall
from kernel.core.i18n import t
from tests.mcp.conftest import MCPKernel, alive, stdio_server, time_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, ToolUse
from tests.waiting import wait_until


async def test_tools_are_registered_and_results_converted(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])

    names = kernel.tools.names()
    for tool in ("echo", "weather", "fail", "pid", "picture", "grow"):
        assert f"mcp_test__{tool}" in names
    spec = next(s for s in kernel.tools.specs() if s.name == "mcp_test__echo")
    assert spec.description == "Return the text unchanged."
    assert spec.parameters["properties"]["text"]["type"] == "string"

    echoed = await kernel.tools.call("mcp_test__echo", {"text": "hello 世界"})
    assert echoed.ok and echoed.content == "hello 世界"

    weather = await kernel.tools.call("mcp_test__weather", '{"city": "Paris"}')
    assert weather.ok and json.loads(weather.content) == {"city": "Paris", "celsius": 21.5}

    failed = await kernel.tools.call("mcp_test__fail", {"reason": "no coffee"})
    assert not failed.ok
    assert "MCP server 'test'" in failed.content and "refused: no coffee" in failed.content

    picture = await kernel.tools.call("mcp_test__picture", {})
    assert picture.ok
    assert picture.content.startswith("a red dot\n[image image/png, ")
    assert "[image image/png" in picture.content
    assert [i.media_type for i in picture.images] == ["image/png"]  # for the model

    bad = await kernel.tools.call("mcp_test__echo", {})
    assert not bad.ok and "missing required parameter(s): text" in bad.content


async def test_tool_list_change_is_followed(model: AnthropicSim, mcp_kernel: MCPKernel) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])
    assert "mcp_test__extra" not in kernel.tools.names()

    grown = await kernel.tools.call("mcp_test__grow", {})
    assert grown.ok

    await wait_until(lambda: "mcp_test__extra" in kernel.tools.names())
    doubled = await kernel.tools.call("mcp_test__extra", {"x": 21})
    assert doubled.ok and doubled.content == "42"
    assert kernel.mcp.status()[0].tools == len(
        [n for n in kernel.tools.names() if n.startswith("mcp_test__")]
    )


async def test_disabled_tools_apply_to_mcp_names(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(
        model, [stdio_server("test")], env={"KERNEL_DISABLED_TOOLS": "mcp_test__echo"}
    )
    assert "mcp_test__echo" not in kernel.tools.names()
    assert "mcp_test__echo" not in [s.name for s in kernel.tools.specs()]
    refused = await kernel.tools.call("mcp_test__echo", {"text": "x"})
    assert not refused.ok and refused.content.startswith(
        t("tool.unknown", name="mcp_test__echo", listing="")
    )
    assert "mcp_test__weather" in kernel.tools.names()


async def test_time_server_from_pypi(model: AnthropicSim, mcp_kernel: MCPKernel) -> None:
    kernel = await mcp_kernel(model, [time_server("time")])

    outcome = await kernel.tools.call("mcp_time__get_current_time", {"timezone": "Europe/Paris"})

    assert outcome.ok, outcome.content
    result = json.loads(outcome.content)
    assert result["timezone"] == "Europe/Paris"
    assert result["datetime"][:2] == "20"  # an ISO date of this century
    assert "mcp_time__convert_time" in kernel.tools.names()
    wrong = await kernel.tools.call("mcp_time__get_current_time", {"timezone": "Mars/Base"})
    assert not wrong.ok and "MCP server 'time'" in wrong.content


async def test_shutdown_leaves_no_child_process(model: AnthropicSim, mcp_kernel: MCPKernel) -> None:
    kernel = await mcp_kernel(model, [stdio_server("a"), stdio_server("b")])
    pids = []
    for server in ("a", "b"):
        outcome = await kernel.tools.call(f"mcp_{server}__pid", {})
        pids.append(int(outcome.content))
    assert all(alive(pid) for pid in pids)

    await kernel.stop()

    assert not any(alive(pid) for pid in pids)
    assert not [n for n in kernel.tools.names() if n.startswith("mcp_")]
    assert [(s.name, s.state, s.tools) for s in kernel.mcp.status()] == [
        ("a", "disabled", 0),
        ("b", "disabled", 0),
    ]


@pytest.mark.posix
async def test_killed_server_reconnects_and_the_tool_works_again(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])
    first = int((await kernel.tools.call("mcp_test__pid", {})).content)

    os.kill(first, signal.SIGKILL)
    await wait_until(lambda: not alive(first))
    outcome = await kernel.tools.call("mcp_test__pid", {})

    assert outcome.ok, outcome.content
    second = int(outcome.content)
    assert second != first and alive(second)
    assert (await kernel.tools.call("mcp_test__echo", {"text": "back"})).content == "back"
    assert kernel.mcp.status()[0].state == "connected"


async def test_a_slow_call_times_out_and_the_session_stays_usable(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    # 2 s: the quick calls around the slow one must fit on a loaded machine too
    kernel = await mcp_kernel(model, [stdio_server("test", timeout=2.0)])
    pid = (await kernel.tools.call("mcp_test__pid", {})).content

    slow = await kernel.tools.call("mcp_test__nap", {"seconds": 30})

    assert not slow.ok
    assert slow.content == "error: MCP server 'test' did not answer tool 'nap' within 2 s"
    # No reconnect for a timeout: the same server process answers the next call.
    assert (await kernel.tools.call("mcp_test__pid", {})).content == pid


async def test_cancelling_a_turn_mid_call_leaves_the_session_usable(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])
    pid = (await kernel.tools.call("mcp_test__pid", {})).content
    model.enqueue(Reply(ToolUse("mcp_test__nap", {"seconds": 30})))

    turn = kernel.agent.start_turn("test:1", UserInput("nap"))
    seen = []
    async for event in turn:
        seen.append(event)
        if isinstance(event, ToolCall):
            await asyncio.sleep(0.2)  # the call is in flight at the server
            turn.cancel()

    assert isinstance(seen[-1], Completed) and seen[-1].cancelled
    echoed = await kernel.tools.call("mcp_test__echo", {"text": "after cancel"})
    assert echoed.ok and echoed.content == "after cancel"
    assert (await kernel.tools.call("mcp_test__pid", {})).content == pid
