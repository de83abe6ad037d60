"""Wire-level simulator of the Anthropic Messages API (`POST /v1/messages`).

    async with AnthropicSim() as sim:
        sim.enqueue(text_reply("hello"))
        client = anthropic.AsyncAnthropic(api_key="k", base_url=sim.base_url, max_retries=0)

Usage is counted and prompt caching emulated as :mod:`tests.sim.caching` documents
(``cache_control`` breakpoints, the 4-breakpoint limit, the 20-block lookback,
``sim.cache.min_tokens``); ``sim.cache_log`` holds what each answered request read from
and wrote to the cache. ``usage`` carries ``input_tokens`` (fresh),
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` in the JSON answer, in
``message_start`` and again (as the current API does) in ``message_delta``.

Thinking as the real API checks it (:func:`thinking_problem`): each thinking block a
reply sends carries a fresh signature the simulator remembers (``sim.signatures``;
:meth:`AnthropicSim.issue_signature` signs one as if an earlier answer had sent it), and
a request with thinking on is refused (400 ``invalid_request_error``, the API's words)
when a thinking block comes back with another signature or other text, when the
assistant message a tool result answers does not start with a thinking block (thinking
``enabled``; adaptive thinking may have skipped it), for a ``budget_tokens`` under 1024
or not under ``max_tokens``, a ``temperature`` other than 1 or any ``top_k``; an
``output_config.effort`` outside the SDK's values is refused whether or not thinking is on.

Run standalone (echoing the last user text when nothing is scripted):

    uv run python -m tests.sim.anthropic_sim --port 8787
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.sim.caching import CacheUse, Counted, PromptCache, cache_control_problem, counted
from tests.sim.script import (
    Error,
    Reply,
    Scripted,
    SimServer,
    Stall,
    Text,
    Thinking,
    ToolUse,
    new_id,
    run_standalone,
    sse_frame,
    without_context,
)

IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
GARBAGE = b'event: content_block_delta\ndata: {"type": "content_block_delta", <<garbage\n\n'

Validator = Callable[[dict[str, Any]], str | None]


class AnthropicSim(SimServer):
    """Fake `api.anthropic.com`; `base_url` is `http://127.0.0.1:PORT` (no `/v1`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cache = PromptCache()
        self.cache_log: list[CacheUse] = []
        self.signatures: dict[str, str] = {}  # signature → the thinking text it signs

    def reset(self) -> None:
        """Also forget the prompt cache, its log and the signatures issued."""
        super().reset()
        self.cache.clear()
        self.cache_log.clear()
        self.signatures.clear()

    def issue_signature(self, thinking: str, signature: str = "") -> str:
        """A signature the simulator accepts back with exactly ``thinking``."""
        signature = signature or new_id("sig_sim_")
        self.signatures[signature] = thinking
        return signature

    def signed(self, reply: Reply) -> Reply:
        """``reply`` with each thinking block signed (a copy: a script may be reused)."""
        if not any(isinstance(block, Thinking) for block in reply.blocks):
            return reply
        out = copy.copy(reply)
        out.blocks = tuple(
            Thinking(b.text, self.issue_signature(b.text, b.signature))
            if isinstance(b, Thinking)
            else b
            for b in reply.blocks
        )
        return out

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/messages", self._messages)]

    def error_response(
        self, status: int, type_: str, message: str, headers: dict[str, str] | None = None
    ) -> web.Response:
        request_id = new_id("req_sim_")
        body = {
            "type": "error",
            "error": {"type": type_, "message": message},
            "request_id": request_id,
        }
        return web.json_response(
            body, status=status, headers={"request-id": request_id, **(headers or {})}
        )

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request)
        if not has_credentials(request):
            return self.error_response(401, "authentication_error", "x-api-key header is required")
        if (fault := self.key_fault(request)) is not None:
            return self.error_response(
                fault.status, fault.type, fault.message, fault.response_headers()
            )
        if not request.headers.get("anthropic-version"):
            return self.invalid("anthropic-version: header is required")
        body = recorded.body
        if not isinstance(body, dict):
            return self.invalid("request body must be a JSON object")
        if problem := (
            validate_request(body)
            or cache_control_problem(body)
            or thinking_problem(body, self.signatures)
        ):
            return self.invalid(problem)
        scripted = self.next_scripted(lambda: last_user_text(body["messages"]), body["messages"])
        if scripted is None:
            return self.no_reply_response()
        return await self._answer(request, body, scripted)

    def invalid(self, message: str) -> web.Response:
        return self.error_response(400, "invalid_request_error", message)

    async def _answer(
        self, request: web.Request, body: dict[str, Any], scripted: Scripted
    ) -> web.StreamResponse:
        if isinstance(scripted, Error):
            return self.error_response(
                scripted.status, scripted.type, scripted.message, scripted.response_headers()
            )
        if isinstance(scripted, Stall):
            return await self.stall(request, scripted.seconds)
        scripted = self.signed(scripted)
        use = self.cache.use(body, len(self.requests) - 1)
        self.cache_log.append(use)
        usage = counted(scripted, use)
        model = str(body["model"])
        message_id = new_id("msg_sim_")
        if not body.get("stream"):
            payload = message_json(scripted, model, message_id, usage)
            return await self.reply_json(request, scripted, payload, GARBAGE)
        error = {
            "type": "error",
            "error": {"type": scripted.error_type, "message": "simulated in-stream error"},
        }
        return await self.reply_sse(
            request,
            scripted,
            stream_frames(scripted, model, message_id, usage),
            garbage=GARBAGE,
            error_frame=sse_frame(error, "error"),
            headers={"request-id": new_id("req_sim_")},
        )


# ---- responses --------------------------------------------------------------------------


def stop_reason(reply: Reply) -> str:
    if reply.stop_reason is not None:
        return reply.stop_reason
    return "tool_use" if reply.has_tool_use else "end_turn"


def block_json(block: Text | ToolUse | Thinking) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, Thinking):
        return {"type": "thinking", "thinking": block.text, "signature": block.signature}
    return {
        "type": "tool_use",
        "id": block.call_id("toolu_"),
        "name": block.name,
        "input": block.input,
    }


def usage_json(usage: Counted, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.input,
        "cache_creation_input_tokens": usage.write,
        "cache_read_input_tokens": usage.read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.write - usage.write_1h,
            "ephemeral_1h_input_tokens": usage.write_1h,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def message_json(reply: Reply, model: str, message_id: str, usage: Counted) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block_json(block) for block in reply.blocks],
        "stop_reason": stop_reason(reply),
        "stop_sequence": reply.stop_sequence,
        "usage": usage_json(usage, usage.output),
    }


def stream_frames(reply: Reply, model: str, message_id: str, usage: Counted) -> list[bytes]:
    """The SSE frames of a streamed reply, one per event the SDK yields (pings ride along)."""
    start = message_json(reply, model, message_id, usage) | {
        "content": [],
        "stop_reason": None,
        "usage": usage_json(usage, 1),
    }
    ping = event({"type": "ping"})
    frames = [event({"type": "message_start", "message": start})]
    for index, block in enumerate(reply.blocks):
        block_start, *rest = block_frames(index, block)
        # The real API pings right after the first content_block_start. The SDK drops pings,
        # so the ping rides in the same write and fault counters see only visible events.
        frames.append(block_start + ping if index == 0 else block_start)
        frames.extend(rest)
    if not reply.blocks:
        frames[0] += ping
    frames.append(
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(reply), "stop_sequence": reply.stop_sequence},
                "usage": {
                    "input_tokens": usage.input,
                    "cache_creation_input_tokens": usage.write,
                    "cache_read_input_tokens": usage.read,
                    "output_tokens": usage.output,
                },
            }
        )
    )
    frames.append(event({"type": "message_stop"}))
    return frames


def block_frames(index: int, block: Text | ToolUse | Thinking) -> list[bytes]:
    if isinstance(block, Text):
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in block.pieces()]
    elif isinstance(block, Thinking):
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in block.pieces()]
        deltas.append({"type": "signature_delta", "signature": block.signature})
    else:
        start = {"type": "tool_use", "id": block.call_id("toolu_"), "name": block.name, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in block.argument_fragments()
        ]
    return [
        event({"type": "content_block_start", "index": index, "content_block": start}),
        *(event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas),
        event({"type": "content_block_stop", "index": index}),
    ]


def event(data: dict[str, Any]) -> bytes:
    return sse_frame(data, data["type"])


# ---- request validation -----------------------------------------------------------------


def has_credentials(request: web.Request) -> bool:
    """`x-api-key`, or `Authorization: Bearer` (what recent SDKs send for an api_key)."""
    if request.headers.get("x-api-key"):
        return True
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def validate_request(body: dict[str, Any]) -> str | None:
    """The first problem the real API would report with `invalid_request_error`, if any."""
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return "max_tokens: Input should be a positive integer"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for check in (check_shapes, check_images, check_text, check_tool_pairing):
        if problem := check(messages):
            return problem
    return check_tools_defined(body)


def check_text(messages: list[dict[str, Any]]) -> str | None:
    """Empty text blocks and empty content are rejected by the real API."""
    for index, message in enumerate(messages):
        blocks = content_blocks(message)
        if not blocks:
            return f"messages.{index}: all messages must have non-empty content"
        for position, block in enumerate(blocks):
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                where = f"messages.{index}.content.{position}.text"
                return f"{where}: text content blocks must be non-empty"
        kinds = [b.get("type") for b in blocks]
        if message.get("role") == "user" and "tool_result" in kinds:
            first_other = next((i for i, k in enumerate(kinds) if k != "tool_result"), len(kinds))
            if "tool_result" in kinds[first_other:]:
                return f"messages.{index}: `tool_result` blocks must come first in the user message"
    return None


def check_tools_defined(body: dict[str, Any]) -> str | None:
    """A request holding tool_use/tool_result blocks must define tools."""
    if body.get("tools"):
        return None
    for message in body["messages"]:
        if any(b.get("type") in ("tool_use", "tool_result") for b in content_blocks(message)):
            return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    return None


def content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def check_shapes(messages: list[Any]) -> str | None:
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{index}: Input should be a valid dictionary"
        if message.get("role") not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if not isinstance(message.get("content"), str | list):
            return f"messages.{index}.content: Field required"
    return None


def check_images(messages: list[dict[str, Any]]) -> str | None:
    for index, message in enumerate(messages):
        for position, block in enumerate(content_blocks(message)):
            for image in image_blocks(block):
                if problem := image_problem(image):
                    return f"messages.{index}.content.{position}.image.source: {problem}"
    return None


def image_blocks(block: dict[str, Any]) -> list[dict[str, Any]]:
    """The block if it is an image, plus images nested in a `tool_result`'s content."""
    nested = block.get("content") if block.get("type") == "tool_result" else None
    inner = [b for b in nested if isinstance(b, dict)] if isinstance(nested, list) else []
    return [b for b in (block, *inner) if b.get("type") == "image"]


def image_problem(block: dict[str, Any]) -> str | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return "Field required"
    if source.get("type") == "url":
        return None if isinstance(source.get("url"), str) else "url: Field required"
    if source.get("type") != "base64":
        return "Input tag does not match any of the expected tags: 'base64', 'url'"
    if source.get("media_type") not in IMAGE_MEDIA_TYPES:
        return f"base64.media_type: Input should be one of {', '.join(IMAGE_MEDIA_TYPES)}"
    data = source.get("data")
    if not isinstance(data, str) or not data:
        return "base64.data: Field required"
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "base64.data: Invalid base64 data"
    return None


def tool_use_ids(message: dict[str, Any] | None) -> list[str]:
    if message is None or message.get("role") != "assistant":
        return []
    return [str(b.get("id")) for b in content_blocks(message) if b.get("type") == "tool_use"]


def tool_result_ids(message: dict[str, Any] | None) -> list[str]:
    if message is None or message.get("role") != "user":
        return []
    return [
        str(b.get("tool_use_id")) for b in content_blocks(message) if b.get("type") == "tool_result"
    ]


def check_tool_pairing(messages: list[dict[str, Any]]) -> str | None:
    for index, message in enumerate(messages):
        previous = messages[index - 1] if index > 0 else None
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = set(tool_result_ids(following))
        missing = [tool_id for tool_id in tool_use_ids(message) if tool_id not in answered]
        if missing:
            return (
                f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        offered = set(tool_use_ids(previous))
        for position, block in enumerate(content_blocks(message)):
            if message["role"] != "user" or block.get("type") != "tool_result":
                continue
            if block.get("tool_use_id") not in offered:
                return (
                    f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` block "
                    "must have a corresponding `tool_use` block in the previous message."
                )
    return None


EFFORTS = ("low", "medium", "high", "xhigh", "max")
THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
THINKING_BLOCKS = ("thinking", "redacted_thinking")


def thinking_problem(body: dict[str, Any], signatures: dict[str, str]) -> str | None:
    """What the real API refuses about thinking, in its words (see the module docstring)."""
    config = body.get("output_config")
    if isinstance(config, dict) and config.get("effort") not in (None, *EFFORTS):
        return "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive"):
        return None
    considerations = f"{THINKING_DOCS}#important-considerations-when-using-extended-thinking"
    if thinking["type"] == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if body["max_tokens"] <= budget:
            return (
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult "
                f"our documentation at {THINKING_DOCS}#max-tokens-and-context-window-size"
            )
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return (
            "`temperature` may only be set to 1 when thinking is enabled. Please consult "
            f"our documentation at {considerations}"
        )
    if body.get("top_k") is not None:
        return (
            "`top_k` must be unset when thinking is enabled. Please consult our "
            f"documentation at {considerations}"
        )
    messages = body["messages"]
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        for position, block in enumerate(content_blocks(message)):
            if block.get("type") != "thinking":
                continue
            if signatures.get(str(block.get("signature"))) != block.get("thinking"):
                where = f"messages.{index}.content.{position}"
                return f"{where}: Invalid `signature` in `thinking` block"
    if thinking["type"] == "enabled":
        return unthought_tool_use(messages)
    return None


def unthought_tool_use(messages: list[dict[str, Any]]) -> str | None:
    """With thinking enabled, the assistant message whose tool calls the last message
    answers must start with its thinking block (the tool loop's continuation)."""
    if len(messages) < 2 or not tool_result_ids(messages[-1]):
        return None
    index = len(messages) - 2
    blocks = content_blocks(messages[index])
    if not tool_use_ids(messages[index]) or blocks[0].get("type") in THINKING_BLOCKS:
        return None
    return (
        f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
        f"found `{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` "
        "message must start with a thinking block (preceeding the lastmost set of `tool_use` "
        "and `tool_result` blocks). We recommend you include thinking blocks from previous "
        "turns. To avoid this requirement, disable `thinking`. Please consult our "
        f"documentation at {THINKING_DOCS}"
    )


def system_text(body: dict[str, Any]) -> str:
    """The system prompt of a recorded request as text (a string, or its text blocks)."""
    system = body.get("system") or ""
    if isinstance(system, str):
        return system
    return "".join(str(block.get("text", "")) for block in system if isinstance(block, dict))


def without_cache_control(value: Any) -> Any:
    """``value`` (recorded JSON) with every ``cache_control`` key removed, to compare a
    request's content with what a test expects regardless of cache breakpoints."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(item) for item in value]
    return value


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """Text of the last user message (its text blocks joined), for the echo fallback."""
    for message in reversed(messages):
        if message.get("role") == "user":
            texts = [b.get("text", "") for b in content_blocks(message) if b.get("type") == "text"]
            return without_context(" ".join(str(text) for text in texts))
    return ""


if __name__ == "__main__":
    run_standalone(AnthropicSim, "Anthropic Messages API simulator")
