"""A stdio MCP server for the tests, written with the SDK's MCPServer.

Run as ``python stdio_server.py [--names collide] [--refuse-if PATH] [--hang]``:
  --names collide   also expose tools whose names clash once sanitised or truncated
  --refuse-if PATH  exit at once (before speaking MCP) while PATH exists
  --hang            read stdin but never answer (a server stuck before initialize)
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    CallToolResult,
    ImageContent,
    SamplingMessage,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolExecution,
)
from pydantic import BaseModel

FIXTURES = Path(__file__).with_name("fixtures")

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def hang() -> None:
    for _ in sys.stdin:  # never answers; ends when the client closes stdin
        pass


class Weather(BaseModel):
    city: str
    celsius: float


class Pick(BaseModel):
    color: Literal["red", "green", "blue"]
    sure: bool


class TestServer(MCPServer):
    """Lists ``research`` as a tool that runs only as an MCP task (2025-11-25), as
    server-everything 2026.8.31 does with ``simulate-research-query``."""

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        for tool in tools:
            if tool.name == "research":
                tool.execution = ToolExecution(task_support="required")
        return tools


def build(names: str) -> MCPServer:
    server = TestServer("kernel-test", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def weather(city: str) -> Weather:
        """Structured weather for a city."""
        return Weather(city=city, celsius=21.5)

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the given reason."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def picture() -> list[ImageContent | TextContent]:
        """A caption and a tiny PNG."""
        data = base64.b64encode(PNG_1X1).decode()
        return [
            TextContent(type="text", text="a red dot"),
            ImageContent(type="image", data=data, mime_type="image/png"),
        ]

    @server.tool()
    def whereami(variable: str) -> str:
        """The working directory and one environment variable."""
        return f"{os.getcwd()} {os.environ.get(variable, '-')}"

    @server.tool()
    async def nap(seconds: float) -> str:
        """Sleep, then say so."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def die() -> str:
        """Exit the server process mid-call."""
        os._exit(3)

    @server.tool()
    def die_once(marker: str) -> str:
        """Exit mid-call unless the file ``marker`` exists (it is created first)."""
        if not Path(marker).exists():
            Path(marker).touch()
            os._exit(3)
        return f"survived in {os.getpid()}"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add the tool 'extra' and tell the client the tool list changed."""

        def extra(x: int) -> int:
            """Double x."""
            return 2 * x

        server.add_tool(extra, name="extra", description="Double x.")
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool()
    async def steps(count: int, release: str, ctx: Context) -> str:
        """Report progress count times, then wait until the file ``release`` exists."""
        for i in range(1, count + 1):
            await ctx.report_progress(i, count, f"step {i}")
        # A file the test creates: the server is another process, no event can cross.
        while not await anyio.Path(release).exists():  # noqa: ASYNC110
            await anyio.sleep(0.02)
        return f"{count} steps done"

    @server.tool()
    def replay(fixture: str, index: int) -> CallToolResult:
        """Return a result recorded from a real server (tests/mcp/fixtures) verbatim."""
        recorded = json.loads((FIXTURES / fixture).read_text(encoding="utf-8"))
        return CallToolResult.model_validate(recorded["calls"][index]["result"])

    @server.tool()
    def research(topic: str) -> str:
        """Listed as task-only: a client without tasks must not offer it."""
        return f"researched {topic}"

    @server.tool()
    async def summarize(text: str, max_tokens: int, ctx: Context) -> str:
        """Ask the client's model (MCP sampling) to summarise the text."""
        message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sampling is deprecated in 2026-07-28
            result: Any = await ctx.session.create_message(
                messages=[message], max_tokens=max_tokens, system_prompt="Summarise."
            )
        return f"model {result.model} said: {result.content.text}"

    @server.tool()
    async def choose(ctx: Context) -> str:
        """Ask the user (MCP elicitation) to pick a colour and confirm."""
        answer = await ctx.elicit("Pick a colour", Pick)
        if answer.action != "accept":
            return f"no choice ({answer.action})"
        return f"picked {answer.data.color}, sure={answer.data.sure}"

    @server.tool()
    async def name_please(ctx: Context) -> str:
        """Ask the user for free text (declined by Kernel)."""

        class Name(BaseModel):
            name: str

        answer = await ctx.elicit("Your name?", Name)
        return f"answer: {answer.action}"

    if names == "collide":
        for raw in ("a.b", "a_b", "a b", "x" * 70 + "1", "x" * 70 + "2"):

            def named(raw: str = raw) -> str:
                return f"I am {raw}"

            server.add_tool(named, name=raw, description=f"Says its own name ({raw[:8]}).")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--names", default="")
    parser.add_argument("--refuse-if", default="")
    parser.add_argument("--hang", action="store_true")
    args = parser.parse_args()
    if args.refuse_if and Path(args.refuse_if).exists():
        sys.exit(1)
    if args.hang:
        hang()
        return
    server = build(args.names)
    server.run()


if __name__ == "__main__":
    main()
