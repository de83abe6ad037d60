"""The sidecar's API, one module per area. A new area: a module with its own
``router = Router(...)``, appended to ``ROUTERS`` (order = order in /openapi.json).

Public API: ``ROUTERS``."""

from __future__ import annotations

from kernel.gateway.api import Router
from kernel.gateway.routes import (
    agent,
    approvals,
    artifacts,
    channels,
    chats,
    config_view,
    conversation,
    cron,
    envs,
    export,
    health,
    mcp,
    mcp_endpoint,
    memories,
    messages,
    models,
    modes,
    openai_chat,
    profiles,
    responses,
    routing,
    selfops,
    skills,
    tasks,
    terminal,
    tool_invoke,
    tool_listing,
    trajectory,
    usage,
    workspace,
)

ROUTERS: list[Router] = [
    health.router,
    chats.router,
    agent.router,
    tool_invoke.router,
    terminal.router,  # after chats: the terminal chat starts in the default chat
    modes.router,
    conversation.router,
    messages.router,
    openai_chat.router,
    responses.router,
    models.router,
    envs.router,
    skills.router,
    memories.router,
    profiles.router,
    workspace.router,
    selfops.router,
    channels.router,
    cron.router,
    usage.router,
    routing.router,
    artifacts.router,
    tool_listing.router,
    mcp.router,
    mcp_endpoint.router,
    approvals.router,
    tasks.router,
    config_view.router,
    trajectory.router,
    export.router,
]
