"""MCP client adapter (SPEC §7): configured servers' tools in Kernel's ToolRegistry.

``manager.py`` is what the Kernel owns (no SDK import); ``connection.py`` holds one
server's supervised session and is the only module importing the ``mcp`` SDK;
``naming.py`` makes provider-safe, collision-free tool names; ``results.py`` turns
call results into text for the model.
"""

from kernel.mcp.manager import MCPManager, ServerStatus

__all__ = ["MCPManager", "ServerStatus"]
