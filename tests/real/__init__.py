"""The opt-in real-client suite: real software installed from the registries today
(Claude Code, Codex, Gemini CLI, MCP servers from npm and PyPI) pointed at the loopback
simulators, one module per area.

    scripts/install-real-clients && KERNEL_TEST_REAL_CLIENTS=1 uv run pytest tests/real -v

Every module here starts with

    pytestmark = [
        pytest.mark.slow,
        pytest.mark.skipif(not os.environ.get("KERNEL_TEST_REAL_CLIENTS"), reason=SKIP_REASON),
    ]

and finds its executables through the ``real_bin`` fixture (``conftest.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

ENV = "KERNEL_TEST_REAL_CLIENTS"
SKIP_REASON = (
    "opt-in real-client suite: run scripts/install-real-clients, then set "
    "KERNEL_TEST_REAL_CLIENTS=1"
)


async def run_client(
    binary: Path, args: list[str], env: dict[str, str], cwd: Path, limit: float
) -> tuple[int, str]:
    """One run of a real client, its stdout and stderr together; ``limit`` is a generous
    bound only so that a hang cannot block CI (killed then, and the timeout raised)."""
    process = await asyncio.create_subprocess_exec(
        str(binary),
        *args,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(limit):
            out, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return process.returncode or 0, out.decode(errors="replace")
