"""What the sidecar's routes are handed: the services they use, one field each, built by
the composition root (``kernel.app``) and never the whole assistant. A route reads them
with :func:`kernel.gateway.api.deps_of`.

Public API: :class:`GatewayDeps`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from kernel.agent.agent import Agent
from kernel.audit import AuditLog
from kernel.commands.parts import KernelParts
from kernel.config import Config
from kernel.core.delivery import ChannelRegistry
from kernel.core.plugin import ChannelParts
from kernel.core.status import StatusBoard
from kernel.cron.scheduler import CronScheduler
from kernel.delegate.approvals import Approvals
from kernel.mcp import MCPManager
from kernel.memory.memories import Memories
from kernel.runtime import Runtime
from kernel.selfops import Mutations
from kernel.skills import SkillLibrary
from kernel.store.artifacts import ArtifactStore
from kernel.store.responses import ResponseStore
from kernel.store.sessions import SessionTables
from kernel.store.settings import SettingTables
from kernel.tools.registry import ToolRegistry
from kernel.workspace import Workspace
from kernel.workspace.archive import Archives

if TYPE_CHECKING:  # adapters beside the gateway, imported only for their types
    from kernel.channels.qq import QQChannel
    from kernel.channels.qq_inbound import QQInbound
    from kernel.channels.webhook import WebhookChannel


@dataclass(frozen=True, slots=True)
class GatewayDeps:
    """The services the routes use. ``channel_parts``: the channels' parts by name (the
    webhook's and QQ's state, QQ's callback); ``provider_types``: the provider types
    the plugins registered (their names)."""

    config: Config
    agent: Agent
    sessions: SessionTables  # the chats' rows and transcripts
    settings: SettingTables  # /healthz's write probe
    responses: ResponseStore  # /v1/responses kept for previous_response_id
    runtime: Runtime
    workspace: Workspace
    archives: Archives
    mcp: MCPManager
    audit: AuditLog
    tools: ToolRegistry
    status_board: StatusBoard
    cron: CronScheduler
    approvals: Approvals
    artifacts: ArtifactStore
    skills: SkillLibrary
    selfops: Mutations
    memories: Memories
    channel_registry: ChannelRegistry
    channel_parts: Mapping[str, ChannelParts]
    provider_types: Collection[str]
    command_parts: KernelParts  # what the terminal's command set uses

    @property
    def webhook(self) -> WebhookChannel:
        return cast("WebhookChannel", self.channel_parts["webhook"].outlet)

    @property
    def qq(self) -> QQChannel:
        return cast("QQChannel", self.channel_parts["qq"].outlet)

    @property
    def qq_inbound(self) -> QQInbound:
        """What the QQ callback route feeds."""
        return cast("QQInbound", self.channel_parts["qq"].inbound)
