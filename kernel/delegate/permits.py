"""The file that points Claude Code at Kernel's MCP endpoint for one run.

``--mcp-config`` takes a file (or inline JSON, which would put the run's token in the
process list for every local user to read). The file lives in ``data/run/<stamp>/``
(folder 0700, file 0600, created exclusively: a link planted there is not followed),
holds only the run's own token (never the sidecar's API key), and is removed when the
run ends; a file a killed Kernel left behind is removed by the next run (its token died
with that Kernel: tokens live only in memory).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

SERVER = "kernel"  # the server's name in the file: the tools are mcp__kernel__<tool>
APPROVE_TOOL = "approve"
PROMPT_TOOL = f"mcp__{SERVER}__{APPROVE_TOOL}"
FILE = "mcp.json"
# Claude Code gives up on a tool call that sent nothing for 300 s unless the server's
# "timeout" (ms) says otherwise (docs/cli-wire.md); it must outlast the owner's time to
# answer, so that Kernel's own timeout (a recorded deny) is what ends a prompt.
MARGIN = 60.0


def write(root: Path, stamp: str, url: str, token: str, wait: float) -> Path:
    """Create ``root/stamp/mcp.json`` for one run (``wait``: the seconds the owner has to
    answer a prompt); earlier runs' folders are removed."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    for old in root.iterdir():  # one delegation at a time: anything here is left over
        remove(root, old.name)
    folder = root / stamp
    folder.mkdir(mode=0o700)
    config = {
        "mcpServers": {
            SERVER: {
                "type": "http",
                "url": url,
                "headers": {"Authorization": f"Bearer {token}"},
                "timeout": int((wait + MARGIN) * 1000),
            }
        }
    }
    path = folder / FILE
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(config, file)
    return path


def remove(root: Path, stamp: str) -> None:
    folder = root / stamp
    if folder.is_symlink() or folder.is_file():
        folder.unlink(missing_ok=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)


def flags(path: Path) -> list[str]:
    """Claude Code's flags for the run: the endpoint, and its approve tool as the
    permission prompt. ``--mcp-config`` takes several values; the next flag ends it."""
    return ["--mcp-config", str(path), "--permission-prompt-tool", PROMPT_TOOL]
