"""seed 000's ``shell`` on ``/agent/process``: a command Kernel runs only after the owner
approved it.

The owner is asked in Telegram through :meth:`kernel.delegate.approvals.Approvals.decide`
(as a coding CLI's ``Bash`` prompt is: the command verbatim, Allow once / Deny, the
answer recorded in ``/agent/approvals`` and the audit trail); the sidecar's caller can
neither see nor answer that question. Allowed, the command runs through the system's
shell in the workspace (or ``cwd``, a folder in it, checked by the workspace's own
rules), with the environment a delegated CLI gets, in a process group of its own that
is killed at its timeout or when the request goes away. Its result (seed 000's
``tool_result``) is ``{ok, command, cwd, exit_code, timed_out, output}``: ``ok`` when it
exited 0; its output, stdout and stderr together, cut to its head and tail.

Public API: :func:`run_approved`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel.config.secrets import child_env
from kernel.core.i18n import t
from kernel.core.platform import group_spawn_kwargs, kill_tree
from kernel.delegate.permission import PermissionRequest
from kernel.gateway.tool_failure import ToolFailed
from kernel.workspace import Workspace

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps
    from kernel.tools.registry import ToolContext

log = logging.getLogger(__name__)

KEPT = 32 * 1024  # bytes of output kept from its start, and as many from its end
CHUNK = 64 * 1024
# Why the owner's approval was not had, each in the catalogue (others: "other").
REFUSALS = frozenset({"owner", "timeout", "undelivered", "too_long", "too_many"})


async def run_approved(
    deps: GatewayDeps, context: ToolContext, command: str, cwd: str, seconds: int
) -> dict[str, Any]:
    """Ask the owner, then run ``command``; a refusal is ``tool_invoke_failed`` naming
    why (denied, no answer in time, the owner's chat unreachable)."""
    folder = await asyncio.to_thread(_folder, deps.workspace, cwd)
    shown = cwd or "."
    request = PermissionRequest("Bash", {"command": command, "cwd": shown, "timeout": seconds})
    decision = await deps.approvals.decide(None, request, via="api")
    if not decision.allow:
        why = decision.by if decision.by in REFUSALS else "other"
        words = t(f"gw.shell_refused.{why}")
        raise ToolFailed("tool_invoke_failed", t("gw.shell_refused", why=words), cause=decision.by)
    env = child_env(deps.config.envs)
    log.info("approved shell command starting (%d characters)", len(command))
    exit_code, timed_out, output = await _run(command, folder, env, seconds)
    return {
        "ok": exit_code == 0 and not timed_out,
        "command": command,
        "cwd": shown,
        "exit_code": exit_code,
        "timed_out": timed_out,
        "output": output,
        "text": output or t("gw.shell_no_output", code=exit_code),
    }


def _folder(workspace: Workspace, cwd: str) -> Path:
    """The folder to run in: the workspace, or a folder in it that its own checks let
    through (no link on the way, not a protected path)."""
    if not cwd:
        return workspace.root
    parts = workspace.check(cwd)
    workspace.dirs.close(workspace._open_dir(parts))
    return workspace.root.joinpath(*parts)


async def _run(
    command: str, folder: Path, env: dict[str, str], seconds: int
) -> tuple[int | None, bool, str]:
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=str(folder),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        **group_spawn_kwargs(),
    )
    head, tail, cut = bytearray(), bytearray(), 0
    timed_out = False

    async def read() -> None:
        nonlocal cut
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(CHUNK):
            room = KEPT - len(head)
            head.extend(chunk[:room])
            tail.extend(chunk[room:] if room > 0 else chunk)
            if len(tail) > KEPT:
                cut += len(tail) - KEPT
                del tail[: len(tail) - KEPT]
        await proc.wait()

    try:
        await asyncio.wait_for(read(), seconds)
    except TimeoutError:
        timed_out = True
    finally:
        if proc.returncode is None:  # timed out or the request went away: the group goes
            kill_tree(proc.pid, force=True)
            with contextlib.suppress(ProcessLookupError):
                await asyncio.shield(proc.wait())
    text = head.decode("utf-8", "replace")
    if cut:
        text += "\n" + t("gw.shell_cut", count=cut) + "\n"
    text += tail.decode("utf-8", "replace")
    return (None if timed_out else proc.returncode), timed_out, text
