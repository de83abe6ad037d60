"""Kernel's own MCP server (issue 19 point 1): what the sidecar serves at ``/mcp``.

Built with the SDK's server side (:class:`MCPServer`, its streamable HTTP session manager
in stateless mode); the sidecar bridges each request to :meth:`Endpoint.handle` after its
own checks (loopback peer and ``Host``, the API key or a run token), naming the caller in
the ASGI scope (:data:`CALLER`). Tools:

- ``approve``: Claude Code's permission-prompt tool (``--permission-prompt-tool``). The
  owner decides through :meth:`Approvals.decide`; the answer is ONE text content holding
  the JSON Claude Code reads (``{"behavior": "allow", "updatedInput": …}`` or
  ``{"behavior": "deny", "message": …}``).
- ``notify_owner``: a message to the owner's Telegram chat (its durable outbox), at most
  ``[mcp] notify_per_minute``, the caller named.
- ``memory_search``, ``memory_list``, ``memory_add``, ``memory_delete``: the registered
  tools themselves (:meth:`ToolRegistry.call`, their schemas from the registry), in the
  memory scopes of the run's chat (a run token) or global (the owner's own client).

Public API: :class:`Endpoint`, :class:`Caller`, :data:`CALLER`, :data:`TOOLS`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as MCPToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent
from pydantic import ConfigDict, Field

from kernel.core.delivery import ChannelRegistry, Target
from kernel.core.errors import ChannelError
from kernel.core.i18n import t
from kernel.core.window import SlidingWindow
from kernel.delegate.approvals import Approvals, RunGrant
from kernel.delegate.formats import display_name
from kernel.delegate.permission import PermissionRequest
from kernel.tools.registry import ToolContext, ToolRegistry

log = logging.getLogger(__name__)

CALLER = "kernel.mcp.caller"  # the ASGI scope key the sidecar names the caller under
MEMORY_TOOLS = ("memory_search", "memory_list", "memory_add", "memory_delete")
TOOLS = ("approve", "notify_owner", *MEMORY_TOOLS)
NOTIFY_LIMIT = 3500  # characters of one notify_owner text: one Telegram message with its heading
WINDOW = 60.0  # seconds of notify_per_minute
_CONTEXT = "__kernel_mcp_context__"  # the keyword a registry tool's bridge gets its Context as


@dataclass(frozen=True, slots=True)
class Caller:
    """Who called: one delegation (its run grant) or the owner's own MCP client (None)."""

    grant: RunGrant | None = None

    @property
    def label(self) -> str:
        """How the owner sees the caller named: "Claude Code (task …)", "MCP client"."""
        if self.grant is None:
            return t("mcpserve.owner_client")
        cli = display_name(self.grant.cli)
        return t("mcpserve.run_client", cli=cli, task=self.grant.delegation_id)

    def memory_context(self) -> ToolContext:
        """The ToolContext a memory tool runs with: the run's chat's scopes, or global."""
        base = self.grant.context if self.grant is not None else None
        if base is None:
            return ToolContext(conversation="mcp")
        return ToolContext(
            session_id=base.session_id,
            conversation=base.conversation,
            persona=base.persona,
            project=base.project,
            folder=base.folder,
            memory_scopes=base.memory_scopes,
            memory_scope=base.memory_scope,
            depth=base.depth,
            guest_tools=base.guest_tools,
        )


class _Arguments(ArgModelBase):
    """A registry tool's arguments, passed on whole: the registry checks them itself
    against its own schema (the one declaration)."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.__pydantic_extra__ or {})


def _text(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def _new_server(tools: list[Tool]) -> MCPServer[Any]:
    # MCPServer() calls logging.basicConfig, which installs its own root handler unless
    # the root logger has one: Kernel's logging is configured once, elsewhere.
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    try:
        return MCPServer(
            "kernel",
            instructions=(
                "Kernel, the owner's personal assistant: ask the owner to approve a tool "
                "call (approve), tell the owner something (notify_owner), read and write "
                "Kernel's long-term memory (memory_*)."
            ),
            tools=tools,
        )
    finally:
        root.removeHandler(guard)


class Endpoint:
    """The MCP server at ``/mcp``: its tools, and the session manager the sidecar runs
    (:meth:`serving`, entered and left in one task) and hands requests (:meth:`handle`)."""

    def __init__(
        self,
        *,
        approvals: Approvals,
        tools: ToolRegistry,
        channels: ChannelRegistry,
        notify_per_minute: int,
        delivery_timeout: float,
        max_body: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.approvals = approvals
        self.tools = tools
        self.channels = channels
        self.delivery_timeout = delivery_timeout
        self.max_body = max_body
        self._clock = clock
        self._notices = SlidingWindow(notify_per_minute, WINDOW)
        self._manager: StreamableHTTPSessionManager | None = None
        self._requests: set[asyncio.Task[Any]] = set()  # requests being served now
        self.server = _new_server(
            [
                self._registry_tool(spec.name, spec.description, spec.parameters)
                for spec in tools.specs()
                if spec.name in MEMORY_TOOLS
            ]
        )
        self.server.add_tool(
            self.approve,
            name="approve",
            description=(
                "Claude Code's permission prompt (--permission-prompt-tool): asks Kernel's "
                "owner in Telegram whether the tool call may run. Answers one text content: "
                'JSON {"behavior": "allow", "updatedInput": {...}} or {"behavior": "deny", '
                '"message": "..."}.'
            ),
            structured_output=False,
        )
        self.server.add_tool(
            self.notify_owner,
            name="notify_owner",
            description=(
                "Send the owner a short message in their Telegram chat (progress, a "
                f"finished step, a question for later). At most {NOTIFY_LIMIT} characters; "
                f"at most {notify_per_minute} messages a minute."
            ),
            structured_output=False,
        )

    # ------------------------------------------------------------ serving

    @property
    def running(self) -> bool:
        return self._manager is not None

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The session manager's lifetime: calls in flight are cancelled when it ends.
        Enter and leave it in the same task (anyio's task group inside)."""
        self.server.streamable_http_app(
            stateless_http=True,
            # The sidecar checks the peer, Host and Origin itself, before the bridge.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=self.max_body,
        )
        manager = self.server.session_manager
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None
                # Requests of the 2026 protocol (Claude Code's) run in their own handler's
                # task, not the manager's task group: an approve waiting for the owner, a
                # subscriptions/listen stream. They end here too, not at the drain's end.
                for task in list(self._requests):
                    task.cancel()

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any, caller: Caller) -> None:
        """Serve one HTTP request (ASGI) for ``caller``; RuntimeError when not serving."""
        manager = self._manager
        if manager is None:
            raise RuntimeError("the MCP endpoint is not serving")
        scope[CALLER] = caller
        task = asyncio.current_task()
        assert task is not None
        self._requests.add(task)
        try:
            await manager.handle_request(scope, receive, send)
        finally:
            self._requests.discard(task)

    # ------------------------------------------------------------ tools

    async def approve(
        self,
        tool_name: Annotated[str, Field(description="the tool Claude Code wants to run")],
        input: Annotated[  # noqa: A002 - the name Claude Code sends
            dict[str, Any], Field(description="that tool's input, as the model wrote it")
        ],
        ctx: Context,
        tool_use_id: Annotated[str, Field(description="the tool call's id")] = "",
    ) -> CallToolResult:
        caller = _caller_of(ctx)
        if not tool_name.strip():
            raise MCPToolError("tool_name is empty: name the tool that asks for permission")
        request = PermissionRequest(tool_name=tool_name, input=input, tool_use_id=tool_use_id)
        decision = await self.approvals.decide(caller.grant, request)
        return _text(json.dumps(decision.as_claude(request), ensure_ascii=False))

    async def notify_owner(
        self,
        text: Annotated[str, Field(description=f"the message, at most {NOTIFY_LIMIT} characters")],
        ctx: Context,
    ) -> CallToolResult:
        caller = _caller_of(ctx)
        body = text.strip()
        if not body:
            raise MCPToolError("text is empty: write the message for the owner")
        if len(body) > NOTIFY_LIMIT:
            raise MCPToolError(
                f"text is {len(body)} characters, over the limit of {NOTIFY_LIMIT}: shorten it"
            )
        now = self._clock()
        wait = self._notices.wait(now)
        if wait > 0:
            raise MCPToolError(
                f"rate limit: at most {self._notices.limit} messages to the owner a minute; "
                f"retry in {max(1, round(wait + 0.5))} s"
            )
        self._notices.take(now)
        message = t("mcpserve.notice", who=caller.label, text=body)
        try:
            await self.channels.send(
                "telegram", Target(origin="mcp"), message, timeout=self.delivery_timeout
            )
        except ChannelError as exc:
            self._notices.give_back(now)
            log.info("notify_owner: not delivered (%s)", exc.code)
            raise MCPToolError(f"not delivered: {exc}") from None
        log.info("notify_owner: queued for the owner")
        return _text("sent to the owner's Telegram chat")

    def _registry_tool(self, name: str, description: str, parameters: dict[str, Any]) -> Tool:
        async def run(**arguments: Any) -> CallToolResult:
            ctx = arguments.pop(_CONTEXT)
            return await self._call_registry(name, arguments, _caller_of(ctx))

        return Tool(
            fn=run,
            name=name,
            description=description,
            parameters=parameters,
            fn_metadata=FuncMetadata(arg_model=_Arguments),
            is_async=True,
            context_kwarg=_CONTEXT,
        )

    async def _call_registry(
        self, name: str, arguments: dict[str, Any], caller: Caller
    ) -> CallToolResult:
        context = caller.memory_context()
        if context.guest_tools is not None and name not in context.guest_tools:
            return _text(f"{name} is not available to this run", error=True)
        outcome = await self.tools.call(name, arguments, context)
        return _text(outcome.content, error=not outcome.ok)


def _caller_of(ctx: Context) -> Caller:
    request = ctx.request_context.request
    caller = getattr(request, "scope", {}).get(CALLER)
    if not isinstance(caller, Caller):  # only the sidecar's bridge reaches the server
        raise MCPToolError("no caller: Kernel's MCP endpoint is reached through /mcp only")
    return caller
