"""/mcp: every MCP server with its transport, state and the tools it offers (servers are
added, removed and restarted through the sidecar's /mcp/servers and ``kernel mcp``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kernel.commands.reply import Reply
from kernel.core.i18n import t

ERROR_WIDTH = 120  # a last error is clipped to this many characters (a phone screen)


class ServerLine(Protocol):
    """One server's status as the MCP manager reports it (kernel.mcp.ServerStatus)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def tools(self) -> int: ...
    @property
    def last_error(self) -> str: ...
    @property
    def skipped(self) -> dict[str, str]: ...


def mcp_listing(servers: Sequence[ServerLine]) -> Reply:
    if not servers:
        return Reply(t("mcp.list_none"))
    lines = [t("mcp.list_header")]
    for server in servers:
        state = t(f"mcp.state.{server.state}")
        if server.state == "failed" and server.last_error:
            error = server.last_error
            error = error if len(error) <= ERROR_WIDTH else error[: ERROR_WIDTH - 1] + "…"
            line = t(
                "mcp.list_line_error", name=server.name, type=server.type, state=state, error=error
            )
        else:
            line = t(
                "mcp.list_line", name=server.name, type=server.type, state=state, tools=server.tools
            )
        if server.skipped:
            names = ", ".join(sorted(server.skipped))
            line += t("mcp.list_skipped", count=len(server.skipped), names=names)
        lines.append(line)
    return Reply("\n".join(lines))
