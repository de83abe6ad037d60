"""One MCP server: a supervisor task that owns its transport and session.

The ``mcp`` SDK is built on anyio, whose cancel scopes must be entered and exited by
the same task; so each server has exactly one task (``_run``) that opens the
transport and the ``ClientSession`` in an ``AsyncExitStack``, keeps them while the
connection lives, and closes them before it opens the next. Tool calls come from
other tasks (the agent's): they only send requests on the live session, and when one
fails at the connection level they ask the supervisor for a fresh session and retry
once.

Connection loss is noticed three ways: the session's read stream ends (a stdio child
exited, an HTTP transport closed), a periodic ping fails, or a call fails at the
connection level. Reconnects back off exponentially; after ``reconnect_attempts``
failures in a row the server's tools are withdrawn (the manager unregisters them),
and they are registered again when a later attempt succeeds.

The supervisor runs in the connection's TaskSet. How a server is reached (stdio or
HTTP) is ``transport.py``'s; what a server asks back (sampling, elicitation) is
``requests.py``'s. These three modules are the only ones that import the SDK;
``kernel.mcp.manager`` imports them only when servers are configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp.types as mtypes
from mcp import ClientSession, MCPError

from kernel import __version__
from kernel.config import MCPServerConfig, MCPSettings
from kernel.core.backoff import Backoff
from kernel.core.clock import Clock, SystemClock, sleep_unless
from kernel.core.errors import ToolError
from kernel.core.redact import redact_text
from kernel.core.tasks import TaskSet
from kernel.mcp.interact import Sampler
from kernel.mcp.requests import ServerRequests
from kernel.mcp.results import render_result
from kernel.mcp.transport import (
    WatchedReadStream,
    first_leaf,
    is_connection_failure,
    is_timeout,
    open_transport,
    stderr_log_path,
)
from kernel.tools.registry import ToolContext, ToolReply

log = logging.getLogger(__name__)

LIST_PAGE_LIMIT = 100  # tools/list pages read before giving up on a paginating server


@dataclass(slots=True)
class RemoteTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    # The server marks it readOnlyHint (issue 38): offered in plan and read_only too.
    read_only: bool = False


# Why a listed tool is not offered to the model. The SDK (2.3.0) has no client side of
# MCP tasks (2025-11-25; gone from the 2026-07-28 protocol), so a tool that only runs as
# a task would fail on every call.
TASK_REQUIRED = "needs MCP task execution, which Kernel does not support"


# Called with the server's tools when they are (re)published, with None to withdraw them.
ToolsListener = Callable[["ServerConnection", list[RemoteTool] | None], None]


class _Lost(Exception):
    """The live connection ended; the text says how."""


def reconnect_backoff(settings: MCPSettings) -> Backoff:
    """The waits before reconnecting: base, doubling per consecutive failure, capped
    (``delay(0)``, after a drop with no failure yet: base)."""
    cap = settings.reconnect_max_delay
    return Backoff(min(settings.reconnect_base_delay, cap), cap)


class ServerConnection:
    def __init__(
        self,
        config: MCPServerConfig,
        settings: MCPSettings,
        listener: ToolsListener,
        *,
        log_dir: Path | None = None,
        shared_env: Callable[[], dict[str, str]] = dict,
        sampler: Sampler | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: what the reconnect waits sleep on (tests drive one)."""
        self.config = config
        self._clock: Clock = clock or SystemClock()
        self._shared_env = shared_env  # the owner's [envs]/`/envs`, read at each (re)start
        self.name = config.name
        self.settings = settings
        self.state = "connecting" if config.enabled else "disabled"
        self.last_error = ""
        self.tools: list[RemoteTool] = []
        self.skipped: dict[str, str] = {}  # listed tools not offered: name → why
        self.server_info = ""  # "name version" as the server introduced itself
        self._listener = listener
        self._log_dir = log_dir
        self._secrets = [*config.headers.values(), *config.env.values()]
        self._requests = ServerRequests(config, settings, sampler, self._clean)
        self._session: ClientSession | None = None
        self._generation = 0  # counts sessions; a call knows which one failed it
        self._lost_generation = -1
        self._lost_reason = ""
        self._refresh = False
        self._reconnect_now = False
        self._stopping = False
        self._serving = False
        self._published = False
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()  # replaced at every session change; waiters re-check
        self._attempted = asyncio.Event()  # start-up need not wait any longer
        self._tried = False  # a connect attempt has ended (either way)
        self._http_status: int | None = None
        self._errlog_path: Path | None = None
        self._tasks = TaskSet(f"mcp server {self.name}")
        self._task: asyncio.Task[None] | None = None  # the supervisor

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if not self.config.enabled:
            self._attempted.set()
            return
        self._task = self._tasks.spawn(self._run(), name=f"mcp-{self.name}")

    async def wait_first_attempt(self) -> None:
        """Until the first connect attempt ends and its outcome is recorded (the state
        is connected or failed), at most ``connect_timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.connect_timeout
        while not (self._tried or self._stopping or not self.config.enabled):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        if not self._attempted.is_set():
            self.last_error = self.last_error or self._timeout_text()
            log.info(
                "mcp server %s: no answer within %.1f s; start-up goes on without it",
                self.name,
                self.config.connect_timeout,
            )

    async def stop(self, grace: float) -> None:
        """Close the session and the server process; cancel the task if it will not end."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if self.config.enabled:
            self.state = "disabled"  # not running any more, whatever happens below
        if task is None:
            return
        if not self._serving:
            task.cancel()  # still connecting or backing off: nothing to finish gracefully
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            log.warning("mcp server %s did not close within %.1f s; cancelling", self.name, grace)
            task.cancel()
            await asyncio.wait({task}, timeout=grace)
        self._task = None

    @property
    def connected(self) -> bool:
        return self._session is not None

    # ------------------------------------------------------------------ the supervisor

    async def _run(self) -> None:
        backoff = reconnect_backoff(self.settings)
        failures = 0
        while not self._stopping:
            was_up = counted = False
            try:
                async with AsyncExitStack() as stack:
                    try:
                        session, tools = await self._open(stack)
                    except Exception as exc:
                        failures += 1
                        counted = True
                        self._connect_failed(exc, failures)  # before the stack unwinds
                        raise
                    except BaseException:
                        # anyio cancelled us because a transport task failed; that error
                        # surfaces when the stack unwinds. Start-up need not wait for it.
                        self._attempted.set()
                        raise
                    was_up = True
                    failures = 0
                    self._up(session, tools)
                    await self._serve(session, self._generation)
            except Exception as exc:  # anyio may wrap it in an exception group
                if not was_up and not counted:
                    failures += 1
                    self._connect_failed(exc, failures)
                elif was_up:
                    leaf = first_leaf(exc)
                    reason = self._clean(str(leaf)) if isinstance(leaf, _Lost) else None
                    self.last_error = reason or self._describe(exc)
                    log.warning(
                        "mcp server %s: connection lost (%s); reconnecting",
                        self.name,
                        self.last_error,
                    )
            finally:
                self._down()
            if self._stopping:
                return
            # After a drop (no failures yet) a short pause keeps a server that dies right
            # after connecting from spinning; a caller waiting to retry cuts it short.
            delay = backoff.delay(failures)
            now, self._reconnect_now = self._reconnect_now, False
            if not now:
                await self._pause(delay)

    async def _open(self, stack: AsyncExitStack) -> tuple[ClientSession, list[RemoteTool]]:
        cfg = self.config
        if self.state != "failed":
            self.state = "connecting"
        self._http_status = None
        if cfg.type == "stdio" and self._log_dir is not None:
            self._errlog_path = stderr_log_path(self._log_dir, self.name)
        read, write = await open_transport(
            stack,
            cfg,
            shared_env=self._shared_env,
            errlog=self._errlog_path,
            on_response=self._on_response,
        )
        generation = self._generation + 1
        watched = WatchedReadStream(read, lambda: self._stream_closed(generation))
        requests = self._requests
        # Sampling and elicitation are declared only when configured: the SDK declares
        # a capability exactly when its callback is given.
        session = ClientSession(
            watched,
            write,
            read_timeout_seconds=cfg.connect_timeout,
            message_handler=self._on_message,
            client_info=mtypes.Implementation(name="kernel", version=__version__),
            sampling_callback=requests.on_sampling if requests.sampler is not None else None,
            elicitation_callback=requests.on_elicitation if self.settings.elicitation else None,
        )
        await stack.enter_async_context(session)
        # The pre-2026 handshake: it works with every server, and keeps one connection
        # over which notifications/tools/list_changed arrive.
        init = await session.initialize()
        self.server_info = f"{init.server_info.name} {init.server_info.version}"
        tools = await self._list_tools(session)
        return session, tools

    async def _serve(self, session: ClientSession, generation: int) -> None:
        """Wait on the live session: for stop, loss, a tool-list change, or ping time."""
        self._serving = True
        try:
            while True:
                self._wake.clear()
                if self._stopping:
                    return
                if self._lost_generation == generation:
                    raise _Lost(self._lost_reason)
                if self._refresh:
                    self._refresh = False
                    await self._refresh_tools(session)
                    continue
                interval = self.settings.ping_interval or None
                try:
                    await asyncio.wait_for(self._wake.wait(), interval)
                except TimeoutError:
                    await self._ping(session)
        finally:
            self._serving = False

    async def _pause(self, delay: float) -> None:
        """Sleep ``delay`` seconds, or less if stopped or asked to reconnect now."""
        if delay <= 0:
            return
        self._wake.clear()
        if self._stopping or self._reconnect_now:
            return
        await sleep_unless(self._clock, delay, self._wake)

    # ------------------------------------------------------------------ state changes

    def _up(self, session: ClientSession, tools: list[RemoteTool]) -> None:
        self._generation += 1
        self._session = session
        self._reconnect_now = False
        was_withdrawn = self.state == "failed" and self._published is False
        self.state = "connected"
        self.last_error = ""
        self.tools = tools
        self._listener(self, tools)
        self._published = True
        self._tried = True
        self._attempted.set()
        self._signal_change()
        if was_withdrawn and self._generation > 1:
            log.warning("mcp server %s is back: %d tools available again", self.name, len(tools))
        else:
            log.info("mcp server %s connected: %d tools", self.name, len(tools))

    def _down(self) -> None:
        if self._session is not None:
            self._session = None
            self._signal_change()
        if self.state == "connected":
            self.state = "connecting"

    def _connect_failed(self, exc: BaseException, failures: int) -> None:
        self.last_error = self._describe(exc)
        first = not self._tried
        self._tried = True
        self._attempted.set()
        self._signal_change()
        if first:
            self.state = "failed"
            log.warning(
                "mcp server %s could not be connected (%s); skipped, retrying in the background",
                self.name,
                self.last_error,
            )
        elif failures >= self.settings.reconnect_attempts and self._published:
            self.state = "failed"
            self._published = False
            self.tools = []
            self._listener(self, None)
            log.warning(
                "mcp server %s: %d reconnects failed (%s); its tools are withdrawn until it "
                "reconnects",
                self.name,
                failures,
                self.last_error,
            )
        else:
            # Past the withdrawal the retries go on quietly, every reconnect_max_delay.
            quiet = failures > self.settings.reconnect_attempts
            log.log(
                logging.DEBUG if quiet else logging.INFO,
                "mcp server %s: reconnect %d failed (%s)",
                self.name,
                failures,
                self.last_error,
            )

    def _stream_closed(self, generation: int) -> None:
        if generation == self._generation and self._session is not None:
            self._mark_lost(generation, "the server closed the connection")

    def _mark_lost(self, generation: int, reason: str) -> None:
        if self._lost_generation != generation:
            self._lost_generation = generation
            self._lost_reason = reason
        self._wake.set()

    def _signal_change(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # ------------------------------------------------------------------ SDK callbacks

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mtypes.ToolListChangedNotification):
            self._refresh = True
            self._wake.set()
        elif isinstance(message, Exception):
            log.debug("mcp server %s: transport error %s", self.name, type(message).__name__)

    async def _on_response(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self._http_status = response.status_code

    # ------------------------------------------------------------------ requests

    async def _list_tools(self, session: ClientSession) -> list[RemoteTool]:
        tools: list[RemoteTool] = []
        skipped: dict[str, str] = {}
        cursor: str | None = None
        for _ in range(LIST_PAGE_LIMIT):
            params = mtypes.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            for tool in page.tools:
                execution = tool.execution
                if execution is not None and execution.task_support == "required":
                    skipped[tool.name] = TASK_REQUIRED
                    continue
                schema = dict(tool.input_schema or {})
                schema.setdefault("type", "object")
                description = tool.description or tool.title or f"{tool.name} (MCP: {self.name})"
                hints = tool.annotations
                read_only = hints is not None and hints.read_only_hint is True
                tools.append(RemoteTool(tool.name, description, schema, read_only))
            cursor = page.next_cursor
            if not cursor:
                break
        if skipped and skipped != self.skipped:
            # Tool names come from the server, not from a user: safe to log.
            log.warning(
                "mcp server %s: %d tools not offered (%s): %s",
                self.name,
                len(skipped),
                TASK_REQUIRED,
                ", ".join(sorted(skipped)),
            )
        self.skipped = skipped
        return tools

    async def _refresh_tools(self, session: ClientSession) -> None:
        try:
            tools = await self._list_tools(session)
        except Exception as exc:
            if is_connection_failure(exc):
                raise
            log.warning("mcp server %s: tools/list failed (%s)", self.name, self._describe(exc))
            return
        self.tools = tools
        self._listener(self, tools)
        log.info("mcp server %s: tool list changed, %d tools", self.name, len(tools))

    async def _ping(self, session: ClientSession) -> None:
        try:
            await session.send_ping()
        except Exception as exc:
            if is_connection_failure(exc) or is_timeout(exc):
                raise _Lost(f"ping failed: {self._describe(exc)}") from None
            # A server without ping support is still alive.

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], context: ToolContext | None = None
    ) -> str | ToolReply:
        """Call ``tool``; the text (and images) for the model, or ToolError naming the
        server. The server's progress notifications go to ``context.progress``; its
        sampling and elicitation requests meanwhile use ``context.ask``."""
        with self._requests.running(context):
            return await self._call(tool, arguments, _progress_reporter(context))

    async def _call(self, tool: str, arguments: dict[str, Any], progress: Any) -> str | ToolReply:
        session, generation = await self._ready_session()
        try:
            result = await session.call_tool(
                tool,
                arguments,
                read_timeout_seconds=self.config.timeout,
                progress_callback=progress,
            )
        except Exception as exc:
            if not is_connection_failure(exc):
                raise ToolError(self._call_error(tool, exc)) from None
            log.warning(
                "mcp server %s: call failed (%s); reconnecting once", self.name, self._describe(exc)
            )
            session, generation = await self._fresh_session(generation)
            try:
                result = await session.call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=self.config.timeout,
                    progress_callback=progress,
                )
            except Exception as again:
                raise ToolError(self._call_error(tool, again, retried=True)) from None
        ok, text, images = render_result(result)
        if not ok:
            raise ToolError(f"MCP server '{self.name}', tool '{tool}' reported an error: {text}")
        return ToolReply(text, images) if images else text

    async def _ready_session(self) -> tuple[ClientSession, int]:
        if self._session is not None:
            return self._session, self._generation
        if not self.config.enabled or self._stopping:
            raise ToolError(f"MCP server '{self.name}' is not running")
        self._reconnect_now = True  # cut a backoff short: a caller is waiting
        self._wake.set()
        return await self._wait_session(self._generation - 1)

    async def _fresh_session(self, failed: int) -> tuple[ClientSession, int]:
        if self._generation == failed and self._session is not None:
            self._reconnect_now = True
            self._mark_lost(failed, "a tool call failed")
        elif self._session is None:
            self._reconnect_now = True  # cut a backoff short: a caller is waiting
            self._wake.set()
        return await self._wait_session(failed)

    async def _wait_session(self, older_than: int) -> tuple[ClientSession, int]:
        """A session newer than generation ``older_than``, within ``connect_timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.connect_timeout
        while self._session is None or self._generation <= older_than:
            remaining = deadline - loop.time()
            if self._stopping:  # removed, restarted or Kernel stopping: no retry here
                raise ToolError(
                    f"MCP server '{self.name}' was stopped (removed, restarted or shutting "
                    "down) during this call; the call did not complete. Do not retry it "
                    "unless the tool is offered again."
                )
            if remaining <= 0:
                detail = f": {self.last_error}" if self.last_error else ""
                raise ToolError(
                    f"MCP server '{self.name}' is not connected{detail}. It is being retried "
                    "in the background; try again later or tell the user."
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return self._session, self._generation

    # ------------------------------------------------------------------ words

    def _call_error(self, tool: str, exc: BaseException, *, retried: bool = False) -> str:
        leaf = first_leaf(exc)
        if is_timeout(leaf):
            return (
                f"MCP server '{self.name}' did not answer tool '{tool}' within "
                f"{self.config.timeout:g} s"
            )
        after = " after reconnecting" if retried else ""
        return f"MCP server '{self.name}', tool '{tool}' failed{after}: {self._describe(exc)}"

    def _describe(self, exc: BaseException) -> str:
        leaf = first_leaf(exc)
        if isinstance(leaf, FileNotFoundError | PermissionError):
            text = f"cannot run {self.config.command!r}: {leaf.strerror or type(leaf).__name__}"
        elif is_timeout(leaf):
            text = self._timeout_text()
        elif isinstance(leaf, MCPError):
            text = leaf.message or f"error {leaf.code}"
            if self._http_status is not None:
                text = f"HTTP {self._http_status}: {text}"
            elif leaf.code == mtypes.CONNECTION_CLOSED and self._errlog_path is not None:
                text = f"{text}: the server process ended (its stderr: {self._errlog_path})"
        elif isinstance(leaf, httpx2.TransportError):
            text = f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__
        else:
            text = f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__
        return self._clean(text)

    def _timeout_text(self) -> str:
        return f"no answer within {self.config.connect_timeout:g} s"

    def _clean(self, text: str) -> str:
        """No secrets, one line, bounded: this text reaches logs, /status and the model."""
        text = " ".join(redact_text(text, self._secrets).split())
        return text if len(text) <= 300 else text[:299] + "…"


def _progress_reporter(context: ToolContext | None) -> Any:
    """The SDK's progress callback for a call, reporting "3/10 message" lines."""
    report = context.progress if context is not None else None
    if report is None:
        return None

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        line = f"{done} {message}" if message else done
        report(" ".join(line.split())[:200])

    return on_progress
