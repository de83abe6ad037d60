"""``/mcp``: Kernel's own MCP server (streamable HTTP, stateless), for the CLIs Kernel
delegates to and any MCP client the owner runs (:mod:`kernel.mcp.endpoint`).

Before a request reaches the SDK it gets the sidecar's framing (request id, log line,
error shape) and these checks: ``[mcp] serve`` (else 404), the peer a literal loopback
address and ``Host`` a loopback name whatever the bind and the key (else 403), and a
caller: ``Authorization: Bearer`` with the sidecar's API key (the owner) or a live run
token (one delegation, :meth:`Approvals.resolve`); no bearer is the local owner only
when no API key is set. A wrong token is a 401 naming the fix (and a guess of the key:
429 with Retry-After while those are throttled, :mod:`kernel.gateway.guesses`), an
expired one a 401 saying its delegation ended. The body is read and checked here as
every JSON body of the sidecar (``gateway.max_body_bytes``, ``gateway.read_timeout``,
415, 400) and handed to the SDK whole. POST only: stateless, there is no server stream
(GET) and no session to end (DELETE), so both are 405 with ``Allow: POST``.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp_asgi.resource import ASGIContext

from kernel.config import is_loopback
from kernel.core.i18n import t
from kernel.gateway.api import ApiError, Router, deps_of, read_bytes, read_json, refusal
from kernel.gateway.apikey import API_KEY, CALLER, authorized, given_key
from kernel.gateway.browser import loopback_host
from kernel.gateway.openapi import JsonRpcMessage

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps
    from kernel.mcp.endpoint import Caller, Endpoint

router = Router("mcp-endpoint", "Kernel's own MCP server (streamable HTTP, stateless)")


class _Host:
    """The endpoint, started on the first request to ``/mcp`` (the SDK's server side
    costs ~0.3 s and ~28 MB to import: not paid by an owner who never uses it) and run
    until the sidecar stops, its session manager entered and left in one task."""

    def __init__(self, deps: GatewayDeps) -> None:
        self.deps = deps
        self.endpoint: Endpoint | None = None
        self.closed = False
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def get(self) -> Endpoint | None:
        """The running endpoint; None once the sidecar is stopping."""
        if self.endpoint is not None or self.closed:
            return None if self.closed else self.endpoint
        async with self._lock:
            if self.endpoint is None and not self.closed:
                # The import is the slow part: off the event loop.
                module = await asyncio.to_thread(importlib.import_module, "kernel.mcp.endpoint")
                cfg = self.deps.config
                endpoint: Endpoint = module.Endpoint(
                    approvals=self.deps.approvals,
                    tools=self.deps.tools,
                    channels=self.deps.channel_registry,
                    notify_per_minute=cfg.mcp.notify_per_minute,
                    delivery_timeout=cfg.cron.delivery_timeout,
                    max_body=cfg.gateway.max_body_bytes,
                )
                ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._task = asyncio.create_task(self._run(endpoint, ready), name="mcp-endpoint")
                await ready
                self.endpoint = endpoint
        return None if self.closed else self.endpoint

    async def _run(self, endpoint: Endpoint, ready: asyncio.Future[None]) -> None:
        try:
            async with endpoint.serving():
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
                return
            raise

    async def close(self) -> None:
        """The sidecar stops: calls in flight end, no new one starts."""
        self.closed = True
        self._stop.set()
        if self._task is not None:
            await asyncio.wait({self._task})


ENDPOINT: web.AppKey[_Host] = web.AppKey("mcp_endpoint")


@asynccontextmanager
async def _serve(deps: GatewayDeps, app: web.Application) -> AsyncIterator[None]:
    """The endpoint's life within the sidecar's (``[mcp] serve``)."""
    if not deps.config.mcp.serve:
        yield
        return
    host = _Host(deps)
    app[ENDPOINT] = host
    try:
        yield
    finally:
        deps.approvals.endpoint_url = None  # no new run may ask from now on
        await host.close()


def _listening(deps: GatewayDeps, app: web.Application, port: int) -> None:
    """Runs that ask the owner may start: the Delegator writes this URL in their
    mcp.json. Reached on loopback: the bind's own address when it is a literal loopback
    one, ::1 for "::" (asyncio binds it IPv6 only), else 127.0.0.1 (0.0.0.0 and "" answer
    there too; any other address is refused at load when a CLI asks the owner)."""
    if app.get(ENDPOINT) is None:
        return
    host = deps.config.gateway.host
    if host == "::":
        host = "::1"
    elif host == "localhost" or not is_loopback(host):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    deps.approvals.endpoint_url = f"http://{shown}:{port}/mcp"


router.services.append(_serve)
router.listening.append(_listening)


class _Bridge(ASGIContext):
    """One request to the SDK's ASGI app: the body already read (so the sidecar's
    limits apply), then a receive that waits until the client goes away, as ASGI's
    ``http.disconnect`` does (aiohttp cancels the handler then)."""

    def __init__(self, app: Any, request: web.Request, body: bytes) -> None:
        super().__init__(app, request, "")
        self._body: bytes | None = body
        self.sent_whole = False  # the answer's last byte is written

    async def on_send_http_response_body(self, payload: dict[str, Any]) -> None:
        await super().on_send_http_response_body(payload)
        if payload.get("body") is not None and not payload.get("more_body", False):
            self.sent_whole = True

    async def on_receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # until cancelled with the request
        return {"type": "http.disconnect"}


_SUMMARY = "Kernel's MCP server (streamable HTTP, stateless; the MCP protocol's answers)"


# Only POST: stateless, the endpoint offers no server stream (GET) and no session to end
# (DELETE); both are answered 405 with Allow: POST, as MCP lets a server do.
@router.post(
    "/mcp",
    summary=_SUMMARY + ": a JSON-RPC message, answered as SSE (or 202 for a notification)",
    body=JsonRpcMessage,
    response=JsonRpcMessage,  # each event's data
    response_type="text/event-stream",
    sse=True,
    auth="bearer",
    errors=(403, 404, 503),
    protocol="jsonrpc",
)
async def post_mcp(request: web.Request) -> web.StreamResponse:
    deps = deps_of(request)
    if not deps.config.mcp.serve:
        raise refusal("not_found", t("mcpserve.off"))
    remote = request.remote or ""
    hosts = request.headers.getall("Host", [])
    if not is_loopback(remote):
        raise refusal("forbidden", t("mcpserve.not_loopback"))
    if len(hosts) != 1 or not loopback_host(hosts[0]):
        raise refusal("forbidden_host", t("mcpserve.foreign_host"))
    caller = _caller(request)
    # Checked as every JSON body of the sidecar is (415, 400: not JSON, too deep, a
    # number out of range…), then handed to the SDK as sent.
    await read_json(request)
    body = await read_bytes(request)  # read once: the same bytes again
    host = request.app.get(ENDPOINT)
    endpoint = await host.get() if host is not None else None
    if endpoint is None or not endpoint.running:  # stopping
        raise refusal("mcp_stopping", t("mcpserve.stopping"))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await endpoint.handle(scope, receive, send, caller)

    bridge = _Bridge(app, request, body)
    try:
        return await bridge.get_response()
    except asyncio.CancelledError:
        # An MCP client closes the connection as soon as it has read its answer (the
        # SSE event), often before the SDK has finished tidying up after it: that
        # request was answered, not abandoned. Any other cancellation stands.
        task = asyncio.current_task()
        if bridge.sent_whole and bridge.response is not None and task and task.uncancel() == 0:
            return bridge.response
        raise


def _caller(request: web.Request) -> Caller:
    """One delegation (a live run token: no guess of the key, looked up first so a flood
    of wrong keys never stops a delegation) or the owner (the API key, judged as on every
    route: :func:`authorized`; no bearer on a keyless sidecar); else 401, and the bearer
    counts as a wrong key (429 while those are throttled)."""
    from kernel.mcp.endpoint import Caller

    key = request.app[API_KEY]
    given = given_key(request)
    if not given:
        if not key:
            return Caller()
        raise _unauthorized(t("mcpserve.no_token"))
    raw = given.encode("utf-8", "surrogateescape")
    grant = deps_of(request).approvals.resolve(raw.decode("utf-8", "replace"))
    if grant is not None and grant != "expired":
        return Caller(grant)
    if key and authorized(request):
        request[CALLER] = "key"
        return Caller()
    if grant == "expired":
        raise _unauthorized(t("mcpserve.expired"), expired=True)
    raise _unauthorized(t("mcpserve.bad_token"))


def _unauthorized(message: str, *, expired: bool = False) -> ApiError:
    return refusal("unauthorized", message, {"expired": expired})
