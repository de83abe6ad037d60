"""MCP adapter (SPEC §7): configured servers' tools in Kernel's ToolRegistry, and
Kernel's own MCP server.

Public API: :class:`MCPManager` (what the Kernel owns: start, stop, status, the
sampler it hands servers) and :class:`ServerStatus`; ``kernel.mcp.interact.agent_sampler``
(answers servers' sampling requests with the agent's model);
``kernel.mcp.endpoint.Endpoint`` (Kernel's own MCP server, served by the sidecar at
``/mcp``; imported only when ``[mcp] serve`` is on).

Inside: ``manager.py`` imports no SDK; ``connection.py`` holds one server's supervised
session and its tool calls, ``transport.py`` opens the stdio or HTTP transport,
``requests.py`` answers the server's sampling and elicitation requests (these three
import the ``mcp`` SDK, loaded only when servers are configured); ``interact.py`` holds
the SDK-free values of those requests; ``naming.py`` makes provider-safe,
collision-free tool names; ``results.py`` turns call results into text for the model.
"""

from kernel.mcp.manager import MCPManager, ServerStatus

__all__ = ["MCPManager", "ServerStatus"]
