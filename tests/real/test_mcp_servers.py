"""MCP servers from the registries, started by Kernel's MCPManager from config.toml:
``@modelcontextprotocol/server-everything`` and ``server-filesystem`` (npm),
``mcp-server-time`` and ``mcp-server-fetch`` (PyPI). Their tools are listed and called
by the model simulator through a real turn; issue 13's findings are checked: a PNG from
``read_media_file`` reaches the model once as an image and never as base64 text, text
results arrive once, progress notifications become turn events, the task-only tool is
not offered, sampling and elicitation are answered.

Opt-in: ``KERNEL_TEST_REAL_CLIENTS=1`` and the servers from ``scripts/install-real-clients``
(or on PATH). mcp-server-fetch refuses loopback and reads robots.txt by default; it runs
here with ``--allow-private-ips --ignore-robots-txt`` against a page on 127.0.0.1.
Every test prints the versions it ran.
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import subprocess
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.core.events import AskUser, ToolProgress, ToolResult
from tests.mcp.conftest import MCPKernel, mcp_kernel, model  # noqa: F401
from tests.mcp.test_turn import tool_results
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, ToolUse, text_reply

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("KERNEL_TEST_REAL_CLIENTS"),
        reason="real-client suite: set KERNEL_TEST_REAL_CLIENTS=1 (servers from "
        "scripts/install-real-clients)",
    ),
]

BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{64,}")
CONNECT = 120.0  # npx-free, but node and uv start slowly on a loaded machine


def png(width: int, height: int) -> bytes:
    """A real, incompressible RGB PNG (about 3 bytes a pixel)."""
    rows = b"".join(b"\x00" + os.urandom(3 * width) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def npm_version(binary: Path, package: str) -> str:
    """The version in the package.json of the npm package that installed ``binary``."""
    folder = binary.resolve().parent
    while folder != folder.parent:
        manifest = folder / "package.json"
        if manifest.exists():
            data = json.loads(manifest.read_text(encoding="utf-8"))
            if data.get("name") == package:
                return str(data.get("version"))
        folder = folder.parent
    return "unknown"


def pypi_version(binary: Path, distribution: str) -> str:
    python = binary.parent / "python"
    if not python.exists():
        return "unknown"
    code = f"import importlib.metadata as m; print(m.version({distribution!r}))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[str]:
    """A page on 127.0.0.1 for mcp-server-fetch."""

    async def page(request: web.Request) -> web.Response:
        html = "<html><head><title>Loopback</title></head><body><h1>Hello</h1>"
        html += "<p>A <b>loopback</b> page for the fetch server.</p></body></html>"
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/page.html", page)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture
def files(tmp_path: Path) -> Path:
    root = tmp_path / "files"
    root.mkdir()
    (root / "notes.txt").write_text("hello from notes\nsecond line\n", encoding="utf-8")
    (root / "big.png").write_bytes(png(300, 290))  # about 260 KB, as in the issue
    return root


@pytest.fixture
async def real_kernel(
    model: AnthropicSim,  # noqa: F811
    mcp_kernel: MCPKernel,  # noqa: F811
    real_bin: Callable[[str], Path],
    files: Path,
) -> Kernel:
    everything = real_bin("mcp-server-everything")
    filesystem = real_bin("mcp-server-filesystem")
    clock = real_bin("mcp-server-time")
    fetch = real_bin("mcp-server-fetch")
    print(
        "versions:",
        f"server-everything {npm_version(everything, '@modelcontextprotocol/server-everything')},",
        f"server-filesystem {npm_version(filesystem, '@modelcontextprotocol/server-filesystem')},",
        f"mcp-server-time {pypi_version(clock, 'mcp-server-time')},",
        f"mcp-server-fetch {pypi_version(fetch, 'mcp-server-fetch')}",
    )
    timeouts = {"connect_timeout": CONNECT, "timeout": 120.0}
    servers = [
        {"name": "everything", "type": "stdio", "command": str(everything), "args": ["stdio"]},
        {"name": "fs", "type": "stdio", "command": str(filesystem), "args": [str(files)]},
        {
            "name": "time",
            "type": "stdio",
            "command": str(clock),
            "args": ["--local-timezone", "UTC"],
        },
        {
            "name": "fetch",
            "type": "stdio",
            "command": str(fetch),
            "args": ["--ignore-robots-txt", "--allow-private-ips"],
        },
    ]
    kernel = await mcp_kernel(model, [s | timeouts for s in servers], settings={"sampling": "auto"})
    for status in kernel.mcp.status():
        connection = kernel.mcp._connections[status.name]
        print(f"{status.name}: {status.state}, {status.tools} tools ({connection.server_info})")
        assert status.state == "connected", status
    return kernel


async def run(kernel: Kernel, sim: AnthropicSim, *calls: ToolUse) -> list[Any]:
    sim.enqueue(Reply(*calls), text_reply("Done."))
    turn = kernel.agent.start_turn("real:1", UserInput("use the tools"))
    return [e async for e in turn]


async def test_tools_are_listed_and_called(
    real_kernel: Kernel,
    model: AnthropicSim,  # noqa: F811
    files: Path,
    site: str,
) -> None:
    names = set(real_kernel.tools.names())
    for expected in (
        "mcp_everything__echo",
        "mcp_everything__get-structured-content",
        "mcp_fs__read_text_file",
        "mcp_fs__read_media_file",
        "mcp_time__get_current_time",
        "mcp_fetch__fetch",
    ):
        assert expected in names
    # simulate-research-query runs only as an MCP task: not offered, listed as skipped.
    assert "mcp_everything__simulate-research-query" not in names
    [everything] = [s for s in real_kernel.mcp.status() if s.name == "everything"]
    assert "simulate-research-query" in everything.skipped

    events = await run(
        real_kernel,
        model,
        ToolUse("mcp_everything__echo", {"message": "ping-42"}),
        ToolUse("mcp_everything__get-structured-content", {"location": "Chicago"}),
        ToolUse("mcp_fs__read_text_file", {"path": str(files / "notes.txt")}),
        ToolUse("mcp_fs__list_directory", {"path": str(files)}),
        ToolUse("mcp_time__get_current_time", {"timezone": "Asia/Tokyo"}),
        ToolUse("mcp_fetch__fetch", {"url": f"{site}/page.html"}),
    )

    assert [e.ok for e in events if isinstance(e, ToolResult)] == [True] * 6
    results = [text for _, text in tool_results(model, 1)]
    assert results[0] == "Echo: ping-42"
    assert json.loads(results[1])["humidity"] >= 0 and results[1].count("humidity") == 1
    assert results[2] == "hello from notes\nsecond line\n"  # once, not text + {"content": …}
    assert results[3] == "[FILE] big.png\n[FILE] notes.txt"
    assert json.loads(results[4])["timezone"] == "Asia/Tokyo"
    assert results[5].startswith(f"Contents of {site}/page.html:")
    assert "**loopback**" in results[5]


async def test_read_media_file_is_one_image_and_no_base64_text(
    real_kernel: Kernel,
    model: AnthropicSim,  # noqa: F811
    files: Path,
) -> None:
    picture = (files / "big.png").read_bytes()
    events = await run(
        real_kernel, model, ToolUse("mcp_fs__read_media_file", {"path": str(files / "big.png")})
    )

    assert [e.ok for e in events if isinstance(e, ToolResult)] == [True]
    [(_, text)] = tool_results(model, 1)
    assert text.startswith(f"[image image/png, {len(picture) / 1024:.1f} KB]")
    assert BASE64_RUN.search(text) is None
    request = model.requests[1]
    assert request.body is not None
    images = [b for b in request.body["messages"][-1]["content"] if b["type"] == "image"]
    assert [base64.b64decode(b["source"]["data"]) for b in images] == [picture]
    encoded = len(base64.b64encode(picture))
    grown = len(request.raw) - len(model.requests[0].raw)  # the same tools in both
    print(f"PNG {len(picture)} bytes; request {len(request.raw)} bytes, {grown} more")
    assert grown < encoded + 5_000  # the image once (was twice: 456 KB for 264 KB)


async def test_everything_progress_sampling_and_elicitation(
    real_kernel: Kernel,
    model: AnthropicSim,  # noqa: F811
) -> None:
    model.enqueue(
        Reply(
            ToolUse("mcp_everything__trigger-long-running-operation", {"duration": 1, "steps": 3})
        ),
        Reply(
            ToolUse(
                "mcp_everything__trigger-sampling-request", {"prompt": "say hi", "maxTokens": 40}
            )
        ),
        text_reply("hi from the model"),  # the server's sampling request
        Reply(ToolUse("mcp_everything__trigger-elicitation-request", {})),
        text_reply("Done."),
    )
    turn = real_kernel.agent.start_turn("real:1", UserInput("try everything"))
    events = [e async for e in turn]

    progress = [e.text for e in events if isinstance(e, ToolProgress)]
    assert progress == ["1/3", "2/3", "3/3"]
    assert [e.ok for e in events if isinstance(e, ToolResult)] == [True, True, True]
    sampled = model.requests[2].body
    assert sampled is not None and sampled["max_tokens"] == 40
    assert "hi from the model" in tool_results(model, 3)[-1][1]
    # Its form asks for free text, dates and numbers: declined, not guessed.
    assert not any(isinstance(e, AskUser) for e in events)
    assert "declined" in tool_results(model, 4)[-1][1]
