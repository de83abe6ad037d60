"""End to end: the model (simulator, both wire formats) calls an MCP tool in a turn and
receives its result; /status shows the servers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernel.agent.agent import UserInput
from kernel.core.events import Completed, ToolCall, ToolResult
from kernel.mcp.connection import TASK_REQUIRED
from tests.mcp.conftest import MCPKernel, stdio_server, time_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, ToolUse, text_reply, tool_reply
from tests.waiting import wait_until

Sim = AnthropicSim | OpenAISim


def tool_results(sim: Sim, index: int) -> list[tuple[str, str]]:
    """(tool call id, content) of every tool result in a recorded request."""
    body = sim.requests[index].body
    assert body is not None
    found: list[tuple[str, str]] = []
    for message in body["messages"]:
        if isinstance(sim, OpenAISim):
            if message.get("role") == "tool":
                found.append((message["tool_call_id"], message["content"]))
            continue
        content: Any = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                inner = block["content"]
                text = inner if isinstance(inner, str) else "".join(b["text"] for b in inner)
                found.append((block["tool_use_id"], text))
    return found


def offered(sim: Sim, index: int) -> dict[str, dict[str, Any]]:
    body = sim.requests[index].body
    assert body is not None
    if isinstance(sim, OpenAISim):
        return {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
    return {t["name"]: t["input_schema"] for t in body["tools"]}


async def test_the_model_calls_an_mcp_tool_and_gets_its_result(
    sim: Sim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(sim, [stdio_server("test"), time_server("time")])
    sim.enqueue(
        Reply(
            Text("Checking."),
            ToolUse("mcp_test__echo", {"text": "ping-42"}),
            ToolUse("mcp_time__get_current_time", {"timezone": "Asia/Tokyo"}),
        ),
        text_reply("The server said ping-42."),
    )

    turn = kernel.agent.start_turn("test:1", UserInput("use the tools"))
    events = [e async for e in turn]

    tools = offered(sim, 0)
    assert tools["mcp_test__echo"]["properties"]["text"]["type"] == "string"
    assert "timezone" in tools["mcp_time__get_current_time"]["properties"]
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.name for c in calls] == ["mcp_test__echo", "mcp_time__get_current_time"]
    assert [e.ok for e in events if isinstance(e, ToolResult)] == [True, True]
    results = dict(tool_results(sim, 1))
    assert results[calls[0].id] == "ping-42"
    assert json.loads(results[calls[1].id])["timezone"] == "Asia/Tokyo"
    assert isinstance(events[-1], Completed) and events[-1].reply.endswith("ping-42.")


async def test_a_failing_mcp_tool_reaches_the_model_as_an_error(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])
    model.enqueue(
        Reply(ToolUse("mcp_test__fail", {"reason": "disk full"})),
        text_reply("It failed."),
    )

    turn = kernel.agent.start_turn("test:1", UserInput("try"))
    events = [e async for e in turn]

    assert [e.ok for e in events if isinstance(e, ToolResult)] == [False]
    body = model.requests[1].body
    assert body is not None
    block = body["messages"][-1]["content"][0]
    assert block["type"] == "tool_result" and block["is_error"] is True
    assert block["content"] == (
        "error: MCP server 'test', tool 'fail' reported an error: "
        "Error executing tool fail: refused: disk full"  # the server's own words follow ours
    )


async def test_plan_mode_offers_only_the_mcp_tools_marked_read_only(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")])
    await kernel.agent.modes.set("test:1", "plan", actor="owner", how="command")
    model.enqueue(tool_reply("mcp_test__pid", {}), text_reply("Planned."))

    turn = kernel.agent.start_turn("test:1", UserInput("plan it"))
    events = [e async for e in turn]

    tools = offered(model, 0)
    assert "mcp_test__echo" in tools  # readOnlyHint: it reads
    assert "mcp_test__pid" not in tools and "mcp_test__fail" not in tools
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.ok is False
    [(_, content)] = tool_results(model, 1)
    assert "plan mode" in content and "exit_plan_mode" in content


async def test_status_lists_servers_state_and_tools(
    bot: Any, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.mcp.conftest import mcp_toml

    servers = [
        stdio_server("test"),
        {"name": "gone", "type": "stdio", "command": "/nonexistent/server"},
        stdio_server("off", enabled=False),
    ]
    h = await bot(extra=mcp_toml(servers, {"reconnect_max_delay": 0.2}))
    await wait_until(lambda: h.kernel.mcp.status()[0].state == "connected")

    status = await h.ask("/status full")

    count = len([n for n in h.kernel.tools.names() if n.startswith("mcp_test__")])
    assert count >= 8
    # A tool that runs only as an MCP task is not offered, and /status and the log say so.
    assert "mcp_test__research" not in h.kernel.tools.names()
    lines = status.splitlines()
    index = next(i for i, x in enumerate(lines) if x.startswith("MCP: "))
    assert lines[index] == (
        f"MCP: test connected, {count} tools (and 1 not offered: research; they need MCP "
        "task execution, which Kernel does not support); "
        "gone failed (cannot run '/nonexistent/server': No such file or directory); "
        "off disabled, 0 tools"
    )
    assert lines[index + 1] == (
        "MCP server requests: sampling answered by the active model after your approval "
        "(at most 1024 tokens); elicitation asked with buttons (choices and yes/no only; "
        "others declined)"
    )
    assert "mcp server test: 1 tools not offered (needs MCP task execution" in caplog.text
    assert h.kernel.mcp.status()[0].skipped == {"research": TASK_REQUIRED}


async def test_an_image_from_an_mcp_tool_reaches_the_model(sim: Sim, mcp_kernel: MCPKernel) -> None:
    kernel = await mcp_kernel(sim, [stdio_server("test")])
    sim.enqueue(tool_reply("mcp_test__picture", {}), text_reply("A red dot."))

    turn = kernel.agent.start_turn("test:1", UserInput("show me the picture"))
    events = [e async for e in turn]

    assert isinstance(events[-1], Completed) and events[-1].reply == "A red dot."
    [(_, result)] = tool_results(sim, 1)
    assert "a red dot" in result and "[image image/png" in result
    body = sim.requests[1].body
    assert body is not None
    if isinstance(sim, OpenAISim):  # tool messages carry text: the image follows as user
        last = body["messages"][-1]
        assert last["role"] == "user"
        urls = [p["image_url"]["url"] for p in last["content"] if p["type"] == "image_url"]
    else:  # Anthropic: image blocks after the tool_result blocks of the same message
        blocks = body["messages"][-1]["content"]
        assert blocks[0]["type"] == "tool_result"
        urls = [
            f"data:{b['source']['media_type']};base64,{b['source']['data']}"
            for b in blocks
            if b["type"] == "image"
        ]
    [url] = urls
    assert url.startswith("data:image/png;base64,iVBOR")  # the PNG the server sent
    # History keeps a marker, not the image.
    session = kernel.agent.sessions.current_session("test:1")
    stored = await kernel.store.load_messages(session or 0)
    assert "[image processed]" in str([m.content for m in stored])
