"""Start-up with servers that never come up, disabled servers, and no servers at all."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

from kernel.agent.agent import UserInput
from kernel.core.events import Completed
from tests.conftest import kernel_env, write_config
from tests.mcp.conftest import MCPKernel, free_port, stdio_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply

REPO = Path(__file__).resolve().parents[2]


async def test_servers_that_never_start_do_not_hold_up_start(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    servers = [
        {"name": "missing", "type": "stdio", "command": "/nonexistent/mcp-server"},
        {"name": "nobody", "type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
        stdio_server("stuck", "--hang", connect_timeout=0.5),
        stdio_server("good"),
        stdio_server("off", enabled=False),
    ]
    # "stuck" never answers initialize: without its connect_timeout start() would not return.
    kernel = await mcp_kernel(model, servers)

    status = {s.name: s for s in kernel.mcp.status()}
    assert status["good"].state == "connected" and status["good"].tools > 0
    assert status["missing"].state == "failed"
    assert status["missing"].last_error == (
        "cannot run '/nonexistent/mcp-server': No such file or directory"
    )
    assert status["nobody"].state == "failed"
    assert "ConnectError" in status["nobody"].last_error
    assert status["stuck"].state in ("connecting", "failed")
    assert "mcp_stuck__echo" not in kernel.tools.names()
    assert (status["off"].state, status["off"].tools) == ("disabled", 0)
    assert not [n for n in kernel.tools.names() if n.startswith(("mcp_missing", "mcp_off"))]

    # The assistant works meanwhile, with the good server's tools.
    model.enqueue(text_reply("fine"))
    turn = kernel.agent.start_turn("test:1", UserInput("hi"))
    events = [e async for e in turn]
    assert isinstance(events[-1], Completed) and events[-1].reply == "fine"
    offered = [t["name"] for t in model.requests[0].body["tools"]]
    assert "mcp_good__echo" in offered and "mcp_stuck__echo" not in offered
    assert (await kernel.tools.call("mcp_good__echo", {"text": "ok"})).content == "ok"

    await asyncio.sleep(0)  # the failed servers keep retrying in the background
    assert kernel.mcp.status_text().startswith("MCP: missing failed (cannot run")


@pytest.mark.slow
async def test_without_servers_the_sdk_is_never_imported(
    model: AnthropicSim, tmp_path: Path
) -> None:
    write_config(tmp_path, model.base_url, "claude", language="en")
    script = textwrap.dedent(
        """
        import asyncio, sys
        from pathlib import Path
        from kernel.app import Kernel
        from kernel.config import load_config

        async def main():
            kernel = Kernel(load_config(Path("config.toml"), env={}, require_telegram=False))
            await kernel.start()
            print(kernel.mcp.status_text())
            await kernel.stop()

        asyncio.run(main())
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types")))
        """
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        cwd=tmp_path,
        env=kernel_env(PYTHONPATH=str(REPO), KERNEL_LANGUAGE="en"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["MCP: none configured", "[]"]
