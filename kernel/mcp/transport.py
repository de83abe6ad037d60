"""How Kernel reaches one MCP server, and how a failed connection looks.

:func:`open_transport` starts a stdio child (its stderr to ``data/logs/mcp-<name>.log``)
or opens a streamable HTTP connection; :class:`WatchedReadStream` reports when the
server goes away. :func:`is_connection_failure` and :func:`is_timeout` tell a broken
connection (worth a reconnect) from a server that answered "no".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TextIO, cast

import anyio
import httpx2
import mcp.types as mtypes
from mcp import MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from kernel.config import MCPServerConfig

ERRLOG_LIMIT = 1024 * 1024  # a stdio server's stderr log is started afresh past this size


async def open_transport(
    stack: AsyncExitStack,
    config: MCPServerConfig,
    *,
    shared_env: Callable[[], dict[str, str]],
    errlog: Path | None,
    on_response: Callable[[httpx2.Response], Awaitable[None]],
) -> tuple[Any, Any]:
    """The (read, write) streams of a new connection, closed with ``stack``.

    stdio: the child's environment is ``shared_env()`` (read now) plus the server's own
    ``env``; its stderr goes to ``errlog`` (or nowhere). HTTP: ``on_response`` sees every
    response (e.g. to name an HTTP error status)."""
    if config.type == "stdio":
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            # The SDK adds a safe default environment (PATH, HOME…) to this.
            env={**shared_env(), **config.env} or None,
            cwd=config.cwd,
        )
        sink = stack.enter_context(_stderr_log(errlog))
        return await stack.enter_async_context(stdio_client(params, errlog=sink))
    client = httpx2.AsyncClient(
        headers=config.headers,
        timeout=httpx2.Timeout(config.connect_timeout, read=max(300.0, config.timeout + 30)),
        event_hooks={"response": [on_response]},
    )
    await stack.enter_async_context(client)
    return await stack.enter_async_context(streamable_http_client(config.url, http_client=client))


def stderr_log_path(log_dir: Path, name: str) -> Path:
    """Where a stdio server's stderr goes: ``<log_dir>/mcp-<name>.log``."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    return log_dir / f"mcp-{safe}.log"


@contextlib.contextmanager
def _stderr_log(path: Path | None) -> Iterator[TextIO]:
    if path is None:
        with open(os.devnull, "w", encoding="utf-8") as sink:
            yield sink
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "w" if path.exists() and path.stat().st_size > ERRLOG_LIMIT else "a"
    handle = cast(TextIO, open(path, mode, encoding="utf-8"))  # noqa: SIM115  # closed below
    try:
        yield handle
    finally:
        handle.close()


class WatchedReadStream:
    """The session's read stream, reporting when it ends (the server went away)."""

    def __init__(self, inner: Any, on_closed: Callable[[], None]) -> None:
        self._inner = inner
        self._on_closed = on_closed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # e.g. ``last_context`` of context-aware streams

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_closed()
            raise

    def __aiter__(self) -> WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._on_closed()
        await self._inner.aclose()

    async def __aenter__(self) -> WatchedReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def first_leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def leaves_of(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves_of(inner)]
    return [exc]


def is_timeout(exc: BaseException) -> bool:
    leaf = first_leaf(exc)
    if isinstance(leaf, MCPError):
        return leaf.code == mtypes.REQUEST_TIMEOUT
    return isinstance(leaf, TimeoutError | httpx2.TimeoutException)


def is_connection_failure(exc: BaseException) -> bool:
    """Did the connection fail (worth a reconnect), rather than the server answer "no"?"""
    for leaf in leaves_of(exc):
        if isinstance(leaf, MCPError):
            if leaf.code == mtypes.CONNECTION_CLOSED:
                return True
            # Streamable HTTP: our session is gone (server restarted) or the HTTP layer
            # failed without a JSON-RPC answer (a proxy's 502, a dropped connection).
            if leaf.code == mtypes.INVALID_REQUEST and "session" in leaf.message.lower():
                return True  # "Session terminated", "Session not found", "Missing session ID"
            if leaf.code == mtypes.INTERNAL_ERROR and "error response" in leaf.message:
                return True
        elif isinstance(
            leaf,
            httpx2.TransportError
            | anyio.ClosedResourceError
            | anyio.BrokenResourceError
            | anyio.EndOfStream
            | ConnectionError,
        ):
            return True
    return False
