"""The one pipeline of the model APIs (``/v1/messages``, ``/v1/chat/completions``,
``/v1/responses``): a request already turned into Kernel's :class:`ChatRequest` is
answered by the provider, under the owner's budget, and its answer (or its failure)
goes out through the API's :class:`Codec` — the thin part each API writes itself: its
error shape, its JSON answer, and its stream's frames.

The provider's first event decides between an HTTP error and a 200: JSON (the whole
completion) or a stream (each delta as it comes; a failure once the stream has begun
ends it with the API's error frame, never a cut).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from kernel.core.errors import BudgetExceededError, ProviderError, http_status
from kernel.core.provider import ChatRequest, Completion, StreamEvent, TextDelta, ThinkingDelta
from kernel.gateway.api import deps_of, json_response, openai_error, sse_frame
from kernel.gateway.v1 import Answerer, provider_failure, refuse_unanswerable

log = logging.getLogger(__name__)

Write = Callable[[bytes], Awaitable[Any]]


class Codec(Protocol):
    """One model API's own part: errors in its shape, its JSON answer, its stream."""

    def error(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        code: str | None = None,
    ) -> web.Response:
        """The API's error response (``code``: Kernel's own stable code, where the shape
        has a place for it)."""
        ...

    def render(self, completion: Completion) -> dict[str, Any]:
        """The whole answer as the API's JSON."""
        ...

    async def start(self, write: Write) -> None:
        """The stream has begun: keep ``write`` and send the head frames."""
        ...

    async def text(self, text: str) -> None: ...

    async def thinking(self, text: str, signature: str) -> None: ...

    async def finish(self, completion: Completion) -> None:
        """The answer is complete: its tool calls, stop reason and usage."""
        ...

    async def fail(self, kind: str, message: str) -> None:
        """The provider failed after the stream began (``kind``: ``overloaded_error``
        when a retry may succeed, else ``api_error``)."""
        ...

    async def end(self) -> None:
        """The last frame after a stream that ran to its end (or failed in a frame)."""
        ...


class StreamCodec:
    """What every codec's stream does alike: keep the writer, write SSE frames; its
    head frames (:meth:`head`) and last frame (:meth:`end`: none by default) its own."""

    _write: Write | None = None

    async def frame(self, data: Any, event: str | None = None) -> None:
        assert self._write is not None, "frame() before start()"
        await self._write(sse_frame(data, event))

    async def start(self, write: Write) -> None:
        self._write = write
        await self.head()

    async def head(self) -> None:
        return None

    async def end(self) -> None:
        return None


class OpenAIErrors:
    """The error shape of OpenAI's APIs (chat completions, responses): the openai SDK
    reads it as its own; ``code`` is also the error's ``type``."""

    def error(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        code: str | None = None,
    ) -> web.Response:
        return openai_error(status, message, headers, code=code)


async def run(
    request: web.Request, served: Answerer, chat: ChatRequest, codec: Codec, *, stream: bool
) -> web.StreamResponse:
    """``chat`` answered by the ``served`` provider (refused with a 400 first when it
    cannot answer it; budget checked and usage counted by the agent's provider call), as
    JSON or as a stream, in ``codec``'s shape."""
    provider_name = served.name
    refuse_unanswerable(provider_name, served.provider, chat)
    deps = deps_of(request)
    async with contextlib.aclosing(deps.agent.stream_request(provider_name, chat)) as events:
        try:
            first = await anext(events)
        except StopAsyncIteration:
            return codec.error(502, f"provider {provider_name} returned nothing: retry later")
        except ProviderError as exc:
            status, message, headers = provider_failure(exc)
            return codec.error(status, message, headers)
        except BudgetExceededError as exc:  # refused before anything was sent
            return budget_refusal(exc, codec)
        if not stream:
            try:
                completion = await finish(first, events)
            except ProviderError as exc:
                status, message, headers = provider_failure(exc)
                return codec.error(status, message, headers)
            return json_response(codec.render(completion))
        return await _stream(request, codec, first, events)


async def finish(first: StreamEvent, events: AsyncIterator[StreamEvent]) -> Completion:
    if isinstance(first, Completion):
        return first
    async for event in events:
        if isinstance(event, Completion):
            return event
    raise ProviderError("stream ended without a result", code="bad_response")


def budget_refusal(exc: BudgetExceededError, codec: Codec) -> web.Response:
    """402 in the API's shape: the owner's spend limit, in English like every /v1 error
    (the code ``budget_exceeded`` where the shape names codes)."""
    d = exc.details
    currency = d.get("currency", "")
    message = (
        f"budget_exceeded: Kernel's {d.get('scope', '')} spend limit would be passed "
        f"(spent {d.get('spent')} {currency} of {d.get('limit')} {currency}; this request "
        f"could cost up to {d.get('worst_case')} {currency}), so it was not sent to the "
        f"model. The owner can raise {_LIMIT_KEYS.get(str(d.get('scope')), '[budget]')} or "
        "wait for the next period"
    )
    status = http_status(BudgetExceededError.CODE, 402)
    return codec.error(status, message, code=BudgetExceededError.CODE)


_LIMIT_KEYS = {
    "day": "[budget] daily",
    "month": "[budget] monthly",
    "job": "the cron job's runtime.budget_daily (or [budget] cron_job_daily)",
}


async def _stream(
    request: web.Request, codec: Codec, first: StreamEvent, events: AsyncIterator[StreamEvent]
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Cache-Control": "no-cache"})
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)
    await codec.start(response.write)
    if await _pump(codec, first, events):
        with contextlib.suppress(ConnectionError):
            await codec.end()
            await response.write_eof()
    return response


async def _pump(codec: Codec, first: StreamEvent, events: AsyncIterator[StreamEvent]) -> bool:
    """Every event through the codec; a failure after the stream began ends it with the
    codec's error frame. False when the client went away."""
    try:
        await _handle(codec, first)
        async for event in events:
            await _handle(codec, event)
    except ProviderError as exc:
        status, message, _ = provider_failure(exc)
        await codec.fail("overloaded_error" if status in (429, 502) else "api_error", message)
    except ConnectionError:
        return False
    except Exception as exc:
        log.exception("stream failed after it began")
        message = f"internal error in Kernel ({type(exc).__name__}): see its log"
        with contextlib.suppress(ConnectionError):
            await codec.fail("api_error", message)
    return True


async def _handle(codec: Codec, event: StreamEvent) -> None:
    if isinstance(event, TextDelta):
        await codec.text(event.text)
    elif isinstance(event, ThinkingDelta):
        await codec.thinking(event.text, event.signature)
    elif isinstance(event, Completion):
        await codec.finish(event)
