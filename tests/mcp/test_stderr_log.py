"""A stdio server's stderr: kept in data/logs/mcp-<name>.log, named in its last error."""

from __future__ import annotations

import sys

from tests.mcp.conftest import MCPKernel
from tests.sim.anthropic_sim import AnthropicSim

DIES = "import sys; sys.stderr.write('boom: no token configured\\n'); sys.exit(3)"


async def test_a_dying_server_leaves_its_stderr_in_the_log_and_names_it(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    server = {"name": "dies", "type": "stdio", "command": sys.executable, "args": ["-c", DIES]}
    kernel = await mcp_kernel(model, [server], start=False)
    log = kernel.config.data_dir / "logs" / "mcp-dies.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("old line\n" + "x" * (1024 * 1024 + 1))  # past the limit: started afresh
    await kernel.start()

    [status] = kernel.mcp.status()
    assert status.state == "failed"
    assert status.last_error.endswith(f"the server process ended (its stderr: {log})")
    text = log.read_text()
    assert "boom: no token configured" in text and "old line" not in text
