"""The sidecar's server: an aiohttp application in Kernel's own event loop.

:class:`Gateway` is started after the store (``start``) and stopped before it (``stop``:
stop listening, give in-flight requests ``gateway.shutdown_timeout`` seconds, then
cancel them, which cancels their turns). Every request gets an id, returned in
``X-Request-Id`` and added to every log line written while it is handled; requests are
logged by method, route template, status and duration only (never the path itself,
bodies, headers or keys).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from kernel.config import GatewayConfig, is_loopback
from kernel.config.sidecar_key import key_path, sidecar_key
from kernel.core.errors import (
    HTTP_STATUS,
    BusyError,
    ChannelError,
    CodedError,
    ConfigError,
    CronError,
    KernelError,
    ProtectedSessionError,
    ProviderError,
    SessionError,
    StartupError,
    http_status,
)
from kernel.core.i18n import t
from kernel.core.logs import request_tag
from kernel.core.tasks import TaskSet
from kernel.gateway import console
from kernel.gateway.api import (
    DEPS,
    MAX_BODY,
    READ_TIMEOUT,
    ROUTERS,
    ApiError,
    Operation,
    Router,
    coded,
    error_response,
    refusal,
    v1_error,
)
from kernel.gateway.apikey import API_KEY, CALLER, GUESSES, authorized
from kernel.gateway.browser import ORIGINS, browser_refusal
from kernel.gateway.connections import ACCEPT_BURST, ConnectionTable, default_limits
from kernel.gateway.console import (
    CONSOLE,
    CSRF_HEADER,
    SAFE_METHODS,
    SESSION,
    SHELL,
    ConsoleSession,
    cookie_of,
    csrf_matches,
    is_console,
)
from kernel.gateway.guesses import KeyGuesses
from kernel.gateway.v1 import V1Error, v1_message

if TYPE_CHECKING:
    from kernel.gateway.deps import GatewayDeps

log = logging.getLogger("kernel.gateway")


class _Short(logging.Filter):
    """aiohttp logs a malformed request with a traceback that quotes the raw bytes,
    headers (and so keys) included: keep only what kind of error it was."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            kind = type(record.exc_info[1]).__name__
            record.msg = f"{record.getMessage()} ({kind})"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


http_log = logging.getLogger("kernel.gateway.http")
http_log.addFilter(_Short())

REQUEST_ID = web.RequestKey("request_id", str)
# Routes whose handler checks its caller itself (auth "signature", "bearer"), not the key.
SIGNED = web.AppKey("signed", frozenset[Any])
PUBLIC_PATHS = frozenset({"/healthz", "/version"})
QUIET_PATHS = PUBLIC_PATHS  # polled by monitors: logged at DEBUG only


def _render(
    request: web.Request, exc: ApiError, headers: dict[str, str] | None = None
) -> web.Response:
    if request.path.startswith("/v1/"):  # the API's own shape, in English
        message = v1_message(request.method, request.path, exc)
        field = exc.details.get("field") if isinstance(exc, V1Error) else None
        return v1_error(request.path, exc.status, message, headers, field)
    response = error_response(exc.status, exc.code, exc.message, exc.details)
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


# The code of each status aiohttp itself answers with (routing, limits).
_HTTP_CODES = {
    HTTP_STATUS[code]: code
    for code in (
        "invalid_request",
        "unauthorized",
        "forbidden",
        "not_found",
        "method_not_allowed",
        "request_timeout",
        "request_too_large",
    )
}


def _from_http(request: web.Request, exc: web.HTTPException) -> ApiError:
    status = exc.status
    code = _HTTP_CODES.get(status, "http_error")
    if status == 404:
        message = t("gw.no_route", method=request.method, path=request.path)
    elif status == 405:
        allowed = sorted(getattr(exc, "allowed_methods", ()) or ())
        message = t("gw.bad_method", method=request.method, allowed=", ".join(allowed) or "-")
        return ApiError(status, code, message, {"allowed": allowed})
    elif status == 413:
        limit = request.app[MAX_BODY]
        message = t("gw.too_large", limit=limit)
        return ApiError(status, code, message, {"max_body_bytes": limit})
    else:
        message = exc.reason
    return ApiError(status, code, message)


def _from_kernel(exc: KernelError) -> ApiError:
    if isinstance(exc, CodedError):
        return coded(exc)
    if isinstance(exc, ChannelError):
        return ApiError(http_status(exc.code, 502), exc.code, str(exc), exc.details)
    if isinstance(exc, CronError):
        return ApiError(http_status(exc.code, 400), exc.code, str(exc), exc.details)
    if isinstance(exc, BusyError):
        return refusal("session_busy", t("gw.session_busy"))
    if isinstance(exc, ProtectedSessionError):
        return refusal("default_chat_protected", str(exc))
    if isinstance(exc, SessionError):
        return refusal("not_found", str(exc))
    if isinstance(exc, ConfigError):
        return refusal("invalid_request", str(exc), {"key": exc.key} if exc.key else {})
    if isinstance(exc, ProviderError):
        return refusal("provider_request_failed", t("provider.error", detail=str(exc)))
    return refusal("internal_error", t("gw.internal", kind=type(exc).__name__))


def _route(request: web.Request) -> str:
    """The route's template (``/workspace/files/{path}``), never the path itself: a path
    carries file names and ids, and whatever a client put in it."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "(no route)"


@web.middleware
async def _frame(request: web.Request, handler: Any) -> web.StreamResponse:
    """Request id, the one error shape, and the log line, around every request."""
    request_id = uuid.uuid4().hex[:16]
    request[REQUEST_ID] = request_id
    tag = request_tag.set(f"req={request_id}")
    started = time.perf_counter()
    status = 500
    protocol = request.protocol
    if isinstance(protocol, _Connection):
        protocol.request_started()
    try:
        response: web.StreamResponse = await handler(request)
        status = response.status
        return response
    except ApiError as exc:
        status = exc.status
        return _render(request, exc, exc.headers or None)
    except web.HTTPException as exc:
        api = _from_http(request, exc)
        status = api.status
        allow = exc.headers.get("Allow")
        return _render(request, api, {"Allow": allow} if allow else None)
    except KernelError as exc:
        api = _from_kernel(exc)
        status = api.status
        if status >= 500:
            log.warning("request failed: %s", type(exc).__name__)
        return _render(request, api)
    except asyncio.CancelledError:
        status = 499  # the client went away (or shutdown cancelled the request)
        raise
    except Exception as exc:
        log.exception("request failed")
        api = refusal("internal_error", t("gw.internal", kind=type(exc).__name__))
        return _render(request, api)
    finally:
        if isinstance(protocol, _Connection):
            protocol.request_finished()
        elapsed = (time.perf_counter() - started) * 1000
        level = logging.DEBUG if request.path in QUIET_PATHS else logging.INFO
        log.log(level, "%s %s -> %d in %.1f ms", request.method, _route(request), status, elapsed)
        request_tag.reset(tag)


def _console_session(request: web.Request) -> ConsoleSession | None:
    """The live console sign-in of the request: its cookie and its CSRF token. The
    cookie alone opens only the page's shell; a state-changing request carrying it
    without the token is refused (whatever else authorises it), except the sign-in,
    which replaces it."""
    sessions = request.app.get(CONSOLE)
    if sessions is None:
        return None
    session = sessions.get(request.cookies.get(cookie_of(request)))
    if session is None:
        return None
    if csrf_matches(session, request.headers.get(CSRF_HEADER)):
        request[SESSION] = session
        return session
    signing_in = request.method == "POST" and request.path == "/console/login"
    if request.method not in SAFE_METHODS and not signing_in:
        raise refusal("csrf_failed", t("web.csrf"))
    request[SHELL] = session
    return None


@web.middleware
async def _guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Browser checks, the API key (:func:`authorized`: compared in constant time,
    wrong ones throttled) and the body limit, before any handler."""
    console = _console_session(request)
    blocked = browser_refusal(request, console is not None)
    if blocked is not None:
        raise blocked
    key = request.app[API_KEY]
    signed = request.match_info.route in request.app[SIGNED]
    # The console's pages answer for themselves (sign-in page, or 303 to it).
    public = request.path in PUBLIC_PATHS or signed or is_console(request.path)
    # The key is judged once (a wrong one is a guess: 429 while they are throttled, or
    # on an open route not compared), except where the handler checks its caller itself
    # (a run token is no wrong key).
    right = not signed and authorized(request, refuse=not public)
    if key and not public and console is None and not right:
        raise refusal("unauthorized", t("gw.unauthorized"))
    request[CALLER] = "console" if console is not None else "key" if key and right else "keyless"
    length = request.content_length
    if length is not None and length > request.app[MAX_BODY]:
        raise web.HTTPRequestEntityTooLarge(max_size=request.app[MAX_BODY], actual_size=length)
    response: web.StreamResponse = await handler(request)
    return response


async def _add_request_id(request: web.Request, response: web.StreamResponse) -> None:
    request_id = request.get(REQUEST_ID)
    if request_id:
        response.headers["X-Request-Id"] = request_id
        if request.path.startswith("/v1/"):
            response.headers["request-id"] = request_id  # where the anthropic SDK looks


class _Connection(RequestHandler):
    """One client connection, counted in the :class:`ConnectionTable` (refused at once
    when there is no room). aiohttp has no read-header timeout: a connection whose
    request head is not complete within ``gateway.read_header_timeout`` of its first
    byte (or, for the first request, of the connection itself) is closed."""

    def __init__(
        self, *args: Any, head_timeout: float, table: ConnectionTable, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._head_timeout = head_timeout
        self._head_timer: asyncio.TimerHandle | None = None
        self._in_request = False
        self._table = table
        self._admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "-"
        evicted = self._table.evicted
        if not self._table.admit(self, address):
            # Before aiohttp sets anything up: no task, no parser, one close.
            transport.abort() if isinstance(transport, asyncio.Transport) else transport.close()
            log.warning("connection refused: gateway.max_connections reached, none idle")
            return
        if self._table.evicted != evicted:
            log.info("closed idle connections: near gateway.max_connections")
        self._admitted = True
        super().connection_made(transport)
        self._start_head_timer()

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        if not self._in_request:
            self._table.reading(self)
            if self._head_timer is None:
                self._start_head_timer()
        super().data_received(data)

    def _start_head_timer(self) -> None:
        self._head_timer = self._loop.call_later(self._head_timeout, self._head_expired)

    def request_started(self) -> None:
        self._in_request = True
        self._cancel_head_timer()
        self._table.busy(self)

    def request_finished(self) -> None:
        self._in_request = False
        self._table.idle(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self._admitted:
            return
        self._table.release(self)
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request aiohttp could not parse: our error shape, without echoing its bytes,
        with a request id like every other response."""
        request_id = uuid.uuid4().hex[:16]
        tag = request_tag.set(f"req={request_id}")
        try:
            super().handle_error(request, status, exc, message)  # logs it (shortened)
        finally:
            request_tag.reset(tag)
        code = "invalid_request" if status < 500 else "internal_error"
        text = t("gw.malformed") if status < 500 else t("gw.internal", kind=type(exc).__name__)
        response = error_response(status, code, text)
        response.headers["X-Request-Id"] = request_id
        response.force_close()
        return response

    def _head_expired(self) -> None:
        self._head_timer = None
        if not self._in_request:
            log.info("closing a connection: request headers not received in time")
            self.force_close()


def _auth_shown(cfg: GatewayConfig, data_dir: Path) -> str:
    """How callers authenticate, for the start's log line (never the key)."""
    if cfg.auth == "none":
        return "auth none: no key"
    return "api key from the config" if cfg.api_key else f"api key in {key_path(data_dir)}"


class _Site(web.TCPSite):
    """A TCP site whose connections are :class:`_Connection`s."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, **handler: Any) -> None:
        super().__init__(runner, host, port)
        self._handler_kwargs = handler
        self.table: ConnectionTable = handler["table"]

    async def start(self) -> None:
        await web.BaseSite.start(self)
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None

        def connection() -> _Connection:
            return _Connection(server, loop=loop, **self._handler_kwargs)

        self._server = await loop.create_server(
            connection, self._host, self._port, reuse_address=True, backlog=ACCEPT_BURST
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


class Gateway:
    """The sidecar for one Kernel, serving ``routers`` (the composition root hands it
    :data:`kernel.gateway.routes.ROUTERS`). ``start()`` binds, ``stop()`` drains and
    closes."""

    def __init__(self, deps: GatewayDeps, routers: Sequence[Router]) -> None:
        self.deps = deps
        self.cfg = deps.config.gateway
        self.routers = list(routers)
        self._runner: web.AppRunner | None = None
        self._site: _Site | None = None
        self._services = TaskSet("gateway")
        self._stopping = asyncio.Event()
        self.port = 0
        # The key in effect (kernel.config.sidecar_key), known once the app is built.
        self.api_key = self.cfg.api_key

    @property
    def url(self) -> str:
        host = self.cfg.client_host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def operations(self) -> list[Operation]:
        return [op for router in self.routers for op in router.operations]

    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[_frame, _guard], client_max_size=self.cfg.max_body_bytes)
        app[DEPS] = self.deps
        app[ROUTERS] = self.routers
        app[READ_TIMEOUT] = self.cfg.read_timeout
        app[MAX_BODY] = self.cfg.max_body_bytes
        app[API_KEY] = self.api_key = self._key()
        app[GUESSES] = KeyGuesses(self.cfg.max_key_guesses_per_client, self.cfg.max_key_guesses)
        app[ORIGINS] = list(self.cfg.allowed_origins)
        signed = set()
        for op in self.operations:
            route = app.router.add_route(op.method, op.path, op.handler)
            if op.auth != "key":
                signed.add(route)
        app[SIGNED] = frozenset(signed)
        if self.cfg.console:
            console.install(app, self.cfg.console_session_hours)
        app.on_response_prepare.append(_add_request_id)
        app.on_response_prepare.append(console.security_headers)
        app.on_shutdown.append(self._end_services)  # after the sites stop, before draining
        return app

    def _key(self) -> str:
        """The key in effect: the configured one, else the data directory's (made on
        the first start); "" only with ``auth = "none"``."""
        try:
            return sidecar_key(self.cfg, self.deps.config.data_dir, create=True)
        except ConfigError as exc:
            raise StartupError(str(exc)) from None

    async def _start_services(self, app: web.Application) -> None:
        """Each router's services, each in a task of its own (see ``Router.services``)."""
        for router in self.routers:
            for service in router.services:
                ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._services.spawn(
                    self._run_service(service(self.deps, app), ready),
                    name=f"gateway-{router.tag}-service",
                )
                await ready  # its failure to start fails the start

    async def _run_service(
        self, service: AbstractAsyncContextManager[None], ready: asyncio.Future[None]
    ) -> None:
        try:
            async with service:
                ready.set_result(None)
                await self._stopping.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
                return
            raise

    async def _end_services(self, _app: web.Application | None = None) -> None:
        self._stopping.set()
        await self._services.wait(self.cfg.shutdown_timeout)
        await self._services.close()

    async def start(self) -> None:
        cfg = self.cfg
        if not cfg.api_key and not is_loopback(cfg.host):
            # config.py refuses this too; the server never binds so whatever built it.
            raise StartupError(t("config.gateway_no_key", host=cfg.host))
        if cfg.auth == "none":
            log.warning("%s", t("config.warn_keyless"))
        for router in self.routers:
            for hook in router.startup:
                await hook(self.deps)
        app = self.build_app()
        self._stopping = asyncio.Event()
        try:
            await self._start_services(app)
        except BaseException:
            await self._end_services()
            raise
        runner = web.AppRunner(
            app,
            handler_cancellation=True,  # a client that goes away cancels its turn
            shutdown_timeout=cfg.shutdown_timeout,
            access_log=None,
        )
        await runner.setup()
        total, per_client = default_limits(cfg.max_connections, cfg.max_connections_per_client)
        site = _Site(
            runner,
            cfg.host,
            cfg.port,
            table=ConnectionTable(total, per_client),
            head_timeout=cfg.read_header_timeout,
            keepalive_timeout=cfg.idle_timeout,
            access_log=None,
            logger=http_log,
        )
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            await self._end_services()
            detail = exc.strerror or type(exc).__name__
            raise StartupError(
                t("gw.bind_failed", host=cfg.host, port=cfg.port, detail=detail)
            ) from None
        self._runner, self._site = runner, site
        self.port = site.port
        for router in self.routers:
            for listener in router.listening:
                listener(self.deps, app, self.port)
        log.info(
            "gateway listening on %s (%s, at most %d connections, %d per client)",
            self.url,
            _auth_shown(cfg, self.deps.config.data_dir),
            total,
            per_client,
        )

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        await runner.cleanup()
        await self._end_services()  # when the app's shutdown did not run (never set up)
        log.info("gateway stopped")
