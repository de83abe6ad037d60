"""Dropped servers: a failing call reconnects once and retries once; repeated failure
withdraws the server's tools (with a warning) until it comes back."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kernel.core.i18n import t
from tests.clock import ManualClock
from tests.mcp.conftest import MCPKernel, alive, stdio_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.waiting import wait_until


async def test_a_call_that_loses_the_connection_is_retried_once(
    model: AnthropicSim, mcp_kernel: MCPKernel, tmp_path: Path
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")], settings={"ping_interval": 0})
    first = int((await kernel.tools.call("mcp_test__pid", {})).content)
    marker = tmp_path / "died-once"

    outcome = await kernel.tools.call("mcp_test__die_once", {"marker": str(marker)})

    # The first process exited mid-call; the retry ran in a freshly started one.
    assert outcome.ok, outcome.content
    assert marker.exists() and not alive(first)
    assert outcome.content.startswith("survived in ")
    assert int(outcome.content.rsplit(" ", 1)[1]) != first


async def test_a_call_failing_twice_is_a_clear_error(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    kernel = await mcp_kernel(model, [stdio_server("test")], settings={"ping_interval": 0})

    outcome = await kernel.tools.call("mcp_test__die", {})

    assert not outcome.ok
    assert outcome.content.startswith(
        "error: MCP server 'test', tool 'die' failed after reconnecting"
    )
    # The server is reconnected for the next call.
    echoed = await kernel.tools.call("mcp_test__echo", {"text": "still here"})
    assert echoed.ok and echoed.content == "still here"


@pytest.mark.posix
async def test_repeated_failure_withdraws_tools_until_the_server_returns(
    model: AnthropicSim,
    mcp_kernel: MCPKernel,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    refuse = tmp_path / "refuse"
    server = stdio_server("flaky", "--refuse-if", str(refuse))
    settings = {"reconnect_attempts": 3, "reconnect_base_delay": 0.01, "reconnect_max_delay": 0.05}
    kernel = await mcp_kernel(model, [server], settings=settings)
    names_before = sorted(n for n in kernel.tools.names() if n.startswith("mcp_flaky__"))
    assert "mcp_flaky__echo" in names_before
    pid = int((await kernel.tools.call("mcp_flaky__pid", {})).content)

    caplog.set_level(logging.INFO, logger="kernel.mcp")
    refuse.touch()  # from now on the server exits as soon as it starts
    import os
    import signal

    os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: "mcp_flaky__echo" not in kernel.tools.names())

    status = kernel.mcp.status()[0]
    assert (status.state, status.tools) == ("failed", 0)
    assert "server process ended" in status.last_error
    assert any(
        r.levelno == logging.WARNING and "tools are withdrawn" in r.getMessage()
        for r in caplog.records
    )
    gone = await kernel.tools.call("mcp_flaky__echo", {"text": "x"})
    assert not gone.ok and gone.content.startswith(
        t("tool.unknown", name="mcp_flaky__echo", listing="")
    )

    refuse.unlink()  # the server can start again; the background retry finds it
    await wait_until(lambda: "mcp_flaky__echo" in kernel.tools.names())

    names_after = sorted(n for n in kernel.tools.names() if n.startswith("mcp_flaky__"))
    assert names_after == names_before
    assert (await kernel.tools.call("mcp_flaky__echo", {"text": "back"})).content == "back"
    assert kernel.mcp.status()[0].state == "connected"


def test_reconnect_backoff_doubles_up_to_the_ceiling() -> None:
    from kernel.config import MCPSettings
    from kernel.mcp.connection import reconnect_backoff

    backoff = reconnect_backoff(MCPSettings(reconnect_base_delay=1.0, reconnect_max_delay=10.0))
    delays = [backoff.delay(n) for n in range(7)]
    assert delays == [1.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.posix
async def test_reconnect_waits_double_to_the_cap_on_the_kernels_clock(
    model: AnthropicSim, mcp_kernel: MCPKernel, tmp_path: Path
) -> None:
    """A server that exits as soon as it starts is tried again after 1, 2, 4, 4 s of the
    Kernel's clock (a virtual one here), and its tools come once it starts again."""
    refuse = tmp_path / "refuse"
    refuse.touch()
    clock = ManualClock(datetime(2025, 6, 1, tzinfo=UTC))
    server = stdio_server("flaky", "--refuse-if", str(refuse))
    settings = {"reconnect_attempts": 3, "reconnect_base_delay": 1.0, "reconnect_max_delay": 4.0}
    kernel = await mcp_kernel(model, [server], settings=settings, clock=clock)
    assert "mcp_flaky__echo" not in kernel.tools.names()
    for wait in (1, 2, 4, 4):
        await clock.wait_for_sleeper(wait)
        clock.advance(wait)
    refuse.unlink()  # before the try the last advance woke runs
    await wait_until(lambda: "mcp_flaky__echo" in kernel.tools.names())
    # The reconnect waits, in order (the retention job sleeps on the clock too).
    assert [s for s in clock.slept if s <= 4] == [1, 2, 4, 4]
    assert kernel.mcp.status()[0].state == "connected"
