"""Scripting vocabulary and server scaffolding shared by the model API simulators.

A test scripts what the fake model answers, one item per model request (FIFO):

    sim.enqueue(
        Reply(Text("Let me check."), ToolUse("get_time", {"tz": "UTC"})),
        text_reply("It is noon."),
        Error(429, "rate_limit_error", retry_after=1),
        Stall(),
    )

`SimServer` holds everything both simulators have in common: the aiohttp runner, the
script queue, request recording, stalls and SSE writing with injected faults. The
wire formats live in `anthropic_sim.py` and `openai_sim.py`.

Per-key faults, for key rotation: `sim.fail_key("k1", Error(429, "rate_limit_error"))`
answers every model request made with API key "k1" (`x-api-key` or `Bearer`) with that
error, without consuming the script, until `sim.clear_key("k1")`; `sim.keys_seen` holds
the key of every request received, in order.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from aiohttp import web
from multidict import CIMultiDict

# --------------------------------------------------------------------------------------
# Scripting vocabulary
# --------------------------------------------------------------------------------------

DEFAULT_CHUNKS = 3


def split_evenly(text: str, parts: int = DEFAULT_CHUNKS) -> list[str]:
    """Split `text` into at most `parts` contiguous, roughly equal, non-empty pieces."""
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), parts)
    pieces: list[str] = []
    start = 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


CONTEXT_OPEN = "<context>\n"


def without_context(text: str) -> str:
    """``text`` without the volatile context block Kernel appends to the turn's own
    message (``<context>…</context>``: the time, recalled memories): the echo fallback
    repeats the owner's words, not Kernel's additions."""
    at = text.find(CONTEXT_OPEN)
    return text if at == -1 else text[:at].rstrip()


def new_id(prefix: str) -> str:
    """A random id that looks like the real APIs' ids, e.g. `toolu_0123abcd...`."""
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass
class Text:
    """A text block, streamed as `chunks` (or ~3 roughly equal chunks by default).

    Explicit `chunks` are streamed verbatim even if they do not join to `text` (handy with
    `stall_after`); non-streaming answers always carry `text`.
    """

    text: str
    chunks: list[str] | None = None

    def pieces(self) -> list[str]:
        return list(self.chunks) if self.chunks is not None else split_evenly(self.text)


@dataclass
class ToolUse:
    """A tool call; its JSON arguments are always streamed in at least two fragments."""

    name: str
    input: dict[str, Any]
    id: str | None = None

    def arguments(self) -> str:
        return json.dumps(self.input)

    def argument_fragments(self) -> list[str]:
        # Any JSON object is at least "{}", so this always yields >= 2 fragments.
        return split_evenly(self.arguments(), DEFAULT_CHUNKS)

    def call_id(self, prefix: str) -> str:
        """The scripted id, or a fresh one with the API's prefix (kept stable per block)."""
        if self.id is None:
            self.id = new_id(prefix)
        return self.id


@dataclass
class Thinking:
    """A thinking block (Anthropic: `thinking` with a signature; OpenAI-compatible servers:
    `reasoning_content`), streamed in ~3 pieces. The Anthropic simulator signs each one
    it sends with a fresh signature (or `signature`, when scripted) and accepts the block
    back only with that signature and exactly that text."""

    text: str
    signature: str = ""

    def pieces(self) -> list[str]:
        return split_evenly(self.text)


Block = Text | ToolUse | Thinking


@dataclass(init=False)
class Reply:
    """One model answer made of text and tool-use blocks, with optional stream faults.

    Fault injection counts streamed SSE events as the SDKs yield them (Anthropic `ping`s
    and OpenAI's `[DONE]` are not counted), starting at 0:
    `stall_after=n` sends n events then goes silent for `stall_seconds`;
    `malformed_after=n` sends n events then garbage, then drops the connection;
    `error_after=n` sends n events then an in-stream `error` event and ends the stream.
    For non-streaming requests a fault with any n applies before the JSON body.
    `gate`: the answer waits for this event before anything is sent (a slow model the
    test releases when it wants, instead of a sleep).

    ``usage``, when given, is what the simulator reports instead of its own count
    (:mod:`tests.sim.caching`): ``(input, output)`` or ``(input, output, cache_read,
    cache_write)``, ``input`` being the fresh input as the Messages API counts it (the
    OpenAI simulator reports ``input + cache_read + cache_write`` as ``prompt_tokens``).
    """

    blocks: tuple[Block, ...]
    stop_reason: str | None
    chunk_delay: float
    stall_after: int | None
    stall_seconds: float
    malformed_after: int | None
    error_after: int | None
    error_type: str
    usage: tuple[int, ...] | None
    stop_sequence: str | None
    gate: asyncio.Event | None

    def __init__(
        self,
        *blocks: Block,
        stop_reason: str | None = None,
        chunk_delay: float = 0.0,
        stall_after: int | None = None,
        stall_seconds: float = 3600,
        malformed_after: int | None = None,
        error_after: int | None = None,
        error_type: str = "overloaded_error",
        usage: tuple[int, ...] | None = None,
        stop_sequence: str | None = None,
        gate: asyncio.Event | None = None,
    ) -> None:
        self.blocks = blocks
        self.gate = gate
        self.stop_sequence = stop_sequence
        self.stop_reason = stop_reason
        self.chunk_delay = chunk_delay
        self.stall_after = stall_after
        self.stall_seconds = stall_seconds
        self.malformed_after = malformed_after
        self.error_after = error_after
        self.error_type = error_type
        self.usage = usage

    @property
    def has_tool_use(self) -> bool:
        return any(isinstance(block, ToolUse) for block in self.blocks)

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.blocks if isinstance(block, Text))

    @property
    def tool_uses(self) -> list[ToolUse]:
        return [block for block in self.blocks if isinstance(block, ToolUse)]


@dataclass
class Error:
    """Answer the request with an HTTP error status and the API's error JSON body."""

    status: int
    type: str = "api_error"
    message: str = "simulated error"
    retry_after: float | None = None
    headers: dict[str, str] | None = None
    code: str | None = None  # OpenAI `error.code`; a per-status default is used when None

    def response_headers(self) -> dict[str, str]:
        headers = dict(self.headers or {})
        if self.retry_after is not None:
            headers["retry-after"] = format_seconds(self.retry_after)
        return headers


@dataclass
class Stall:
    """Accept the request and send nothing at all (not even headers) for `seconds`."""

    seconds: float = 3600


Scripted = Reply | Error | Stall


def text_reply(text: str, **kwargs: Any) -> Reply:
    return Reply(Text(text), **kwargs)


def tool_reply(name: str, input: dict[str, Any], **kwargs: Any) -> Reply:
    return Reply(ToolUse(name, input), **kwargs)


def format_seconds(seconds: float) -> str:
    """`2` -> "2", `2.0` -> "2", `0.25` -> "0.25" (header-friendly, no exponent)."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return f"{seconds:.6f}".rstrip("0").rstrip(".")


# --------------------------------------------------------------------------------------
# Server scaffolding
# --------------------------------------------------------------------------------------

NO_REPLY_MESSAGE = "simulator: no scripted reply queued"
Fallback = Literal["echo"] | None


@dataclass
class RecordedRequest:
    """One HTTP request as the simulator received it (rejected ones included)."""

    method: str
    path: str
    headers: CIMultiDict[str]
    body: Any
    received_at: float
    raw: bytes = b""
    form: dict[str, Any] = field(default_factory=dict)


class SimServer:
    """aiohttp server scaffolding shared by `AnthropicSim` and `OpenAISim`."""

    url_suffix = ""

    def __init__(self, *, fallback: Fallback = None, host: str = "127.0.0.1", port: int = 0):
        self.fallback = fallback
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Scripted] = deque()
        self._keyed: list[tuple[str, deque[Scripted]]] = []  # enqueue_for
        self._refusals: list[tuple[str, Error]] = []
        self._key_faults: dict[str, Error] = {}
        self.keys_seen: list[str] = []
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self._arrived = asyncio.Event()

    # ---- public API -----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._runner is None:
            raise RuntimeError("simulator not started")
        return f"http://{self.host}:{self.port}{self.url_suffix}"

    @property
    def pending(self) -> int:
        """Number of scripted replies not consumed yet."""
        return len(self._queue)

    def enqueue(self, *items: Scripted) -> None:
        for item in items:
            if not isinstance(item, Reply | Error | Stall):
                raise TypeError(f"cannot script {item!r}")
        self._queue.extend(items)

    def enqueue_for(self, marker: str, *items: Scripted) -> None:
        """Replies for the requests whose first message contains ``marker`` (a background
        task's sub-agent, whose requests interleave with the chat's), before the queue."""
        self._keyed.append((marker, deque(items)))

    def refuse_content(self, marker: str, error: Error) -> None:
        """Answer every request whose messages hold ``marker`` with ``error``, as a
        provider refuses content it will not take, however often it is sent; the
        script is not consumed."""
        self._refusals.append((marker, error))

    def fail_key(self, key: str, error: Error) -> None:
        """Answer every model request made with API key ``key`` with ``error`` (the
        script is not consumed) until :meth:`clear_key`."""
        self._key_faults[key] = error

    def clear_key(self, key: str | None = None) -> None:
        """Stop failing ``key`` (every key when None)."""
        if key is None:
            self._key_faults.clear()
        else:
            self._key_faults.pop(key, None)

    def reset(self) -> None:
        """Forget recorded requests, unconsumed scripted replies, content refusals, key
        faults and the keys seen."""
        self.requests.clear()
        self._queue.clear()
        self._keyed.clear()
        self._refusals.clear()
        self._key_faults.clear()
        self.keys_seen.clear()

    async def wait_for_requests(self, count: int) -> list[RecordedRequest]:
        """Wait until at least `count` requests were recorded (bound it with asyncio.timeout)."""
        while len(self.requests) < count:
            self._arrived.clear()
            await self._arrived.wait()
        return self.requests

    async def start(self) -> Self:
        self._stopping = asyncio.Event()
        app = web.Application()
        app.add_routes(self.routes())
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        """Stop quickly: wake every stalled handler, then close all connections."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._stopping.set()
        await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ---- hooks for subclasses ---------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    def error_response(
        self, status: int, type_: str, message: str, headers: dict[str, str] | None = None
    ) -> web.Response:
        raise NotImplementedError

    # ---- helpers for subclasses -------------------------------------------------------

    async def record(self, request: web.Request, *, read_body: bool = True) -> RecordedRequest:
        received_at = time.monotonic()
        raw = await request.read() if read_body else b""
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            headers=CIMultiDict(request.headers),
            body=parse_json(raw),
            received_at=received_at,
            raw=raw,
        )
        self.requests.append(recorded)
        self.keys_seen.append(api_key(request))
        self._arrived.set()
        return recorded

    def key_fault(self, request: web.Request) -> Error | None:
        """The error :meth:`fail_key` set for the request's key, if any."""
        return self._key_faults.get(api_key(request))

    def next_scripted(self, echo: Callable[[], str], messages: Any = None) -> Scripted | None:
        """A content refusal matching ``messages``, else the next scripted reply; when
        the queue is empty apply the fallback."""
        if self._refusals:
            text = json.dumps(messages, ensure_ascii=False)
            for marker, error in self._refusals:
                if marker in text:
                    return error
        if self._keyed and messages:
            first = json.dumps(messages[0], ensure_ascii=False)
            for marker, queue in self._keyed:
                if queue and marker in first:
                    return queue.popleft()
        if self._queue:
            return self._queue.popleft()
        if self.fallback == "echo":
            return text_reply(f"echo: {echo()}")
        return None

    def no_reply_response(self) -> web.Response:
        return self.error_response(500, "api_error", NO_REPLY_MESSAGE)

    async def hold(self, seconds: float) -> bool:
        """Sleep up to `seconds`; return True if woken early because the server stops."""
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            return False
        return True

    async def opened(self, reply: Reply) -> None:
        """Until the reply's gate is set (or the server stops)."""
        if reply.gate is None:
            return
        gate = asyncio.ensure_future(reply.gate.wait())
        stopping = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({gate, stopping}, return_when=asyncio.FIRST_COMPLETED)
        gate.cancel()
        stopping.cancel()

    async def stall(self, request: web.Request, seconds: float) -> web.StreamResponse:
        """Send nothing for `seconds`, then drop the connection."""
        await self.hold(seconds)
        abort(request)
        return web.Response(status=503)

    async def reply_json(
        self, request: web.Request, reply: Reply, payload: dict[str, Any], garbage: bytes
    ) -> web.StreamResponse:
        """Non-streaming answer; stream faults apply before the body is sent."""
        await self.opened(reply)
        if reply.stall_after is not None:
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await self.hold(reply.stall_seconds)
            abort(request)
            return response
        if reply.malformed_after is not None:
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await response.write(garbage)
            abort(request)
            return response
        if reply.chunk_delay:
            await asyncio.sleep(reply.chunk_delay)
        return web.json_response(payload)

    async def reply_sse(
        self,
        request: web.Request,
        reply: Reply,
        frames: Sequence[bytes],
        *,
        garbage: bytes,
        error_frame: bytes,
        headers: dict[str, str] | None = None,
    ) -> web.StreamResponse:
        """Write SSE `frames`, applying the reply's delay and fault injection."""
        await self.opened(reply)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                **(headers or {}),
            }
        )
        await response.prepare(request)
        for index in range(len(frames) + 1):
            if reply.stall_after == index:
                await self.hold(reply.stall_seconds)
                abort(request)
                return response
            if reply.malformed_after == index:
                await response.write(garbage)
                abort(request)
                return response
            if reply.error_after == index:
                await response.write(error_frame)
                break
            if index == len(frames):
                break
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            await response.write(frames[index])
        await response.write_eof()
        return response

    async def _not_found(self, request: web.Request) -> web.Response:
        await self.record(request)
        return self.error_response(
            404, "not_found_error", f"simulator: no route for {request.method} {request.path}"
        )


def api_key(request: web.Request) -> str:
    """The API key a request carries: ``x-api-key``, else a ``Bearer`` token ("" none)."""
    if key := request.headers.get("x-api-key", ""):
        return key
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def abort(request: web.Request) -> None:
    """Drop the connection without finishing the HTTP response."""
    transport = request.transport
    if transport is not None:
        transport.abort()


def parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def sse_frame(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {text}\n\n".encode()


def run_standalone(factory: Callable[..., SimServer], description: str) -> None:
    """`python -m tests.sim.<module> --port N`: serve with `fallback="echo"` until Ctrl-C."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    args = parser.parse_args()

    async def serve() -> None:
        async with factory(fallback="echo", host=args.host, port=args.port) as sim:
            print(sim.base_url, flush=True)
            await asyncio.Event().wait()

    # Ctrl-C stops it even when started with SIGINT ignored (from `nohup` or a script's
    # background job, whose children inherit that), as a test stops it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
