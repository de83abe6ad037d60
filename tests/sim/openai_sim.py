"""Wire-level simulator of the OpenAI API: chat completions, audio and model listing.

    async with OpenAISim() as sim:
        sim.enqueue(text_reply("hello"))
        client = openai.AsyncOpenAI(api_key="k", base_url=sim.base_url, max_retries=0)

Endpoints: `POST /v1/chat/completions`, `POST /v1/audio/transcriptions` (answers from
`sim.transcriptions`: text, or a scripted `Error` or `Stall`; the uploaded files' bytes are kept in
`sim.audio_uploads`), `POST /v1/audio/speech` (answers `sim.speech_audio`, audio bytes or
an `Error`), `GET /v1/models`, and a minimal `POST /v1/responses` (text replies, streamed as
the SSE events codex-cli 0.169.0 reads; scripted `Error`s and `Stall`s apply).

Chat completions refuse a ``reasoning_effort`` outside the SDK's values (400, the API's
words) and answer with `sim.fail_key` errors per key (:mod:`tests.sim.script`). Chat
completions count tokens and emulate automatic prefix caching as
:mod:`tests.sim.caching` documents (``sim.cache``; ``sim.cache_log`` per answered
request): ``usage.prompt_tokens`` includes ``prompt_tokens_details.cached_tokens``, in the
JSON answer and in the ``include_usage`` final chunk. Run standalone (echo fallback):

    uv run python -m tests.sim.openai_sim --port 8788
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from aiohttp import web

from tests.sim.caching import CacheUse, Counted, PrefixCache, counted
from tests.sim.script import (
    Error,
    Fallback,
    Reply,
    Scripted,
    SimServer,
    Stall,
    Text,
    Thinking,
    ToolUse,
    new_id,
    run_standalone,
    split_evenly,
    sse_frame,
    without_context,
)

GARBAGE = b'data: {"id": "chatcmpl-sim", "choices": [<<garbage\n\n'
DEFAULT_TRANSCRIPTION = "simulated transcription"
MODELS = ("gpt-sim", "whisper-sim", "tts-sim")
# About a second of silence: 40 silent MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz,
# 417 bytes each). A single frame is too short for decoders such as ffmpeg to recognise.
SILENT_MP3 = (b"\xff\xfb\x90\x64" + bytes(413)) * 40
DEFAULT_ERROR_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
# openai.types.shared.ReasoningEffort (openai 3.54): what the API takes.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
MESSAGE_ROLES = ("system", "developer", "user", "assistant", "tool", "function")

Problem = tuple[str, str | None]  # (message, param)


class OpenAISim(SimServer):
    """Fake OpenAI-compatible server; `base_url` is `http://127.0.0.1:PORT/v1`."""

    url_suffix = "/v1"

    def __init__(
        self, *, fallback: Fallback = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        super().__init__(fallback=fallback, host=host, port=port)
        self.transcriptions: deque[str | Error | Stall] = deque()
        self.speech_audio: bytes | Error = SILENT_MP3
        self.audio_uploads: list[bytes] = []
        self.transcription_usage: dict[str, Any] | None = None  # see transcription_body
        self.cache = PrefixCache()
        self.cache_log: list[CacheUse] = []

    def reset(self) -> None:
        """Also forget the prompt cache and its log."""
        super().reset()
        self.cache.clear()
        self.cache_log.clear()

    def enqueue_transcription(self, *texts: str | Error | Stall) -> None:
        self.transcriptions.extend(texts)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/chat/completions", self._chat_completions),
            web.post("/v1/responses", self._responses),
            web.post("/v1/audio/transcriptions", self._transcriptions),
            web.post("/v1/audio/speech", self._speech),
            web.get("/v1/models", self._models),
        ]

    def error_response(
        self,
        status: int,
        type_: str,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        code: str | None = None,
        param: str | None = None,
    ) -> web.Response:
        body = {
            "error": {
                "message": message,
                "type": type_,
                "param": param,
                "code": code or DEFAULT_ERROR_CODES.get(status),
            }
        }
        headers = {"x-request-id": new_id("req_"), **(headers or {})}
        return web.json_response(body, status=status, headers=headers)

    def invalid(self, message: str, param: str | None = None) -> web.Response:
        return self.error_response(400, "invalid_request_error", message, param=param)

    def unauthorized(self, request: web.Request) -> web.Response | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return None
        return self.error_response(
            401,
            "invalid_request_error",
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        )

    # ---- chat completions -------------------------------------------------------------

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request)
        if denied := self.unauthorized(request):
            return denied
        if (fault := self.key_fault(request)) is not None:
            return self.error_response(
                fault.status, fault.type, fault.message, fault.response_headers(), code=fault.code
            )
        body = recorded.body
        if not isinstance(body, dict):
            return self.invalid("We could not parse the JSON body of your request.")
        if problem := validate_chat_request(body):
            return self.invalid(*problem)
        if (effort := body.get("reasoning_effort")) not in (None, *REASONING_EFFORTS):
            return self.error_response(
                400,
                "invalid_request_error",
                f"Invalid value: '{effort}'. Supported values are: "
                + ", ".join(f"'{e}'" for e in REASONING_EFFORTS[:-1])
                + f", and '{REASONING_EFFORTS[-1]}'.",
                code="invalid_value",
                param="reasoning_effort",
            )
        scripted = self.next_scripted(lambda: last_user_text(body["messages"]), body["messages"])
        if scripted is None:
            return self.no_reply_response()
        return await self._answer(request, body, scripted)

    async def _answer(
        self, request: web.Request, body: dict[str, Any], scripted: Scripted
    ) -> web.StreamResponse:
        if isinstance(scripted, Error):
            return self.error_response(
                scripted.status,
                scripted.type,
                scripted.message,
                scripted.response_headers(),
                code=scripted.code,
            )
        if isinstance(scripted, Stall):
            return await self.stall(request, scripted.seconds)
        use = self.cache.use(body, len(self.requests) - 1)
        self.cache_log.append(use)
        completion = Completion(scripted, str(body["model"]), counted(scripted, use))
        if not body.get("stream"):
            return await self.reply_json(request, scripted, completion.json(), GARBAGE)
        options = body.get("stream_options") or {}
        error = {
            "error": {
                "message": "simulated in-stream error",
                "type": scripted.error_type,
                "param": None,
                "code": None,
            }
        }
        return await self.reply_sse(
            request,
            scripted,
            completion.frames(include_usage=bool(options.get("include_usage"))),
            garbage=GARBAGE,
            error_frame=sse_frame(error),
        )

    # ---- responses (minimal: what codex exec needs) --------------------------------------

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request)
        if denied := self.unauthorized(request):
            return denied
        body = recorded.body
        if not isinstance(body, dict) or "model" not in body:
            return self.invalid("model: Field required", "model")
        scripted = self.next_scripted(lambda: last_input_text(body.get("input")))
        if scripted is None:
            return self.no_reply_response()
        if isinstance(scripted, Error):
            headers = scripted.response_headers()
            return self.error_response(
                scripted.status, scripted.type, scripted.message, headers, code=scripted.code
            )
        if isinstance(scripted, Stall):
            return await self.stall(request, scripted.seconds)
        frames = response_frames(scripted.text, str(body["model"]))
        return await self.reply_sse(
            request, scripted, frames, garbage=GARBAGE, error_frame=sse_frame({"type": "error"})
        )

    # ---- audio and models -------------------------------------------------------------

    async def _transcriptions(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request, read_body=False)
        if denied := self.unauthorized(request):
            return denied
        if not request.content_type.startswith("multipart/"):
            return self.invalid("Expected multipart/form-data with a 'file' field.")
        form = await request.post()
        recorded.form = {key: describe_form_value(value) for key, value in form.items()}
        for name in ("file", "model"):
            if name not in form:
                return self.invalid(f"Missing required parameter: '{name}'.", name)
        upload = form["file"]
        if isinstance(upload, web.FileField):
            upload.file.seek(0)
            self.audio_uploads.append(upload.file.read())
        text = self.transcriptions.popleft() if self.transcriptions else DEFAULT_TRANSCRIPTION
        if isinstance(text, Error):
            return self.error_response(text.status, text.type, text.message, code=text.code)
        if isinstance(text, Stall):
            return await self.stall(request, text.seconds)
        if form.get("response_format") == "text":
            return web.Response(text=text + "\n", content_type="text/plain")
        return web.json_response(transcription_body(text, self.transcription_usage))

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request)
        if denied := self.unauthorized(request):
            return denied
        body = recorded.body
        if not isinstance(body, dict):
            return self.invalid("We could not parse the JSON body of your request.")
        for name in ("model", "input", "voice"):
            if name not in body:
                return self.invalid(f"Missing required parameter: '{name}'.", name)
        audio = self.speech_audio
        if isinstance(audio, Error):
            return self.error_response(audio.status, audio.type, audio.message, code=audio.code)
        return web.Response(body=audio, content_type="audio/mpeg")

    async def _models(self, request: web.Request) -> web.StreamResponse:
        await self.record(request)
        if denied := self.unauthorized(request):
            return denied
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "sim"} for m in MODELS]
        return web.json_response({"object": "list", "data": data})


def describe_form_value(value: Any) -> Any:
    """Form fields as recorded: strings as-is, uploaded files as name/type/size."""
    if isinstance(value, web.FileField):
        content = value.file.read()
        return {
            "filename": value.filename,
            "content_type": value.content_type,
            "size": len(content),
        }
    return value


# ---- responses --------------------------------------------------------------------------


class Completion:
    """Renders one scripted `Reply` as a `chat.completion` or a chunk stream."""

    def __init__(self, reply: Reply, model: str, counted: Counted) -> None:
        self.reply = reply
        self.counted = counted
        self.model = model
        self.id = new_id("chatcmpl-sim")
        self.created = int(time.time())

    @property
    def finish_reason(self) -> str:
        if self.reply.stop_reason is not None:
            return self.reply.stop_reason
        return "tool_calls" if self.reply.has_tool_use else "stop"

    def usage(self) -> dict[str, Any]:
        used = self.counted
        prompt = used.input + used.read + used.write
        return {
            "prompt_tokens": prompt,
            "completion_tokens": used.output,
            "total_tokens": prompt + used.output,
            "prompt_tokens_details": {"cached_tokens": used.read, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def json(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.reply.text if any_text(self.reply) else None,
            "refusal": None,
        }
        thoughts = [b.text for b in self.reply.blocks if isinstance(b, Thinking)]
        if thoughts:
            message["reasoning_content"] = "".join(thoughts)
        if self.reply.has_tool_use:
            message["tool_calls"] = [tool_call_json(tool) for tool in self.reply.tool_uses]
        choice = {"index": 0, "message": message, "logprobs": None}
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [choice | {"finish_reason": self.finish_reason}],
            "usage": self.usage(),
        }

    def frames(self, *, include_usage: bool) -> list[bytes]:
        first_is_text = bool(self.reply.blocks) and isinstance(self.reply.blocks[0], Text)
        deltas: list[dict[str, Any]] = [
            {"role": "assistant", "content": "" if first_is_text else None, "refusal": None}
        ]
        tools = 0
        for block in self.reply.blocks:
            if isinstance(block, Text):
                deltas.extend({"content": piece} for piece in block.pieces())
            elif isinstance(block, Thinking):
                deltas.extend({"reasoning_content": piece} for piece in block.pieces())
            else:
                deltas.extend(tool_call_deltas(tools, block))
                tools += 1
        chunks = [self.chunk(delta, None, include_usage) for delta in deltas]
        chunks.append(self.chunk({}, self.finish_reason, include_usage))
        if include_usage:
            chunks.append(self.base_chunk() | {"choices": [], "usage": self.usage()})
        return [sse_frame(chunk) for chunk in chunks] + [sse_frame("[DONE]")]

    def base_chunk(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
        }

    def chunk(
        self, delta: dict[str, Any], finish_reason: str | None, include_usage: bool
    ) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk = self.base_chunk() | {"choices": [choice]}
        return (chunk | {"usage": None}) if include_usage else chunk


def any_text(reply: Reply) -> bool:
    return any(isinstance(block, Text) for block in reply.blocks)


def tool_call_json(tool: ToolUse) -> dict[str, Any]:
    return {
        "id": tool.call_id("call_"),
        "type": "function",
        "function": {"name": tool.name, "arguments": tool.arguments()},
    }


def tool_call_deltas(index: int, tool: ToolUse) -> list[dict[str, Any]]:
    """First delta names the call (arguments ""), then the arguments in fragments."""
    opening = {
        "index": index,
        "id": tool.call_id("call_"),
        "type": "function",
        "function": {"name": tool.name, "arguments": ""},
    }
    fragments = [
        {"index": index, "function": {"arguments": piece}} for piece in tool.argument_fragments()
    ]
    return [{"tool_calls": [call]} for call in (opening, *fragments)]


# ---- request validation -----------------------------------------------------------------


def validate_chat_request(body: dict[str, Any]) -> Problem | None:
    """The first problem the real API would reject with a 400, if any."""
    if "model" not in body:
        return "you must provide a model parameter", None
    messages = body.get("messages")
    if messages is None:
        return "Missing required parameter: 'messages'.", "messages"
    if not isinstance(messages, list) or not messages:
        return (
            "Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            "messages",
        )
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in MESSAGE_ROLES:
            return f"Invalid value for 'messages[{index}].role'.", f"messages.[{index}].role"
    return check_tool_messages(messages)


def check_tool_messages(messages: list[dict[str, Any]]) -> Problem | None:
    offered: list[str] = []  # ids of the latest assistant message's tool_calls
    unanswered: list[str] = []
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            call_id = message.get("tool_call_id")
            if not offered:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{index}].role",
                )
            if call_id not in offered:
                return (
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                    "'tool_calls' of previous message.",
                    f"messages.[{index}].tool_call_id",
                )
            unanswered = [pending for pending in unanswered if pending != call_id]
            continue
        if unanswered:
            return missing_tool_responses(unanswered, index)
        offered = [str(call.get("id")) for call in message.get("tool_calls") or []]
        unanswered = list(offered)
    return missing_tool_responses(unanswered, len(messages)) if unanswered else None


def missing_tool_responses(call_ids: list[str], index: int) -> Problem:
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(call_ids),
        f"messages.[{index}].role",
    )


def response_frames(text: str, model: str) -> list[bytes]:
    """The Responses API's SSE for one assistant message (the events codex reads)."""
    rid, mid = new_id("resp_"), new_id("msg_")
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
    item = {"id": mid, "type": "message", "role": "assistant", "status": "in_progress"}
    done_item = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**base, "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
    ]
    events += [
        {
            "type": "response.output_text.delta",
            "item_id": mid,
            "output_index": 0,
            "content_index": 0,
            "delta": piece,
        }
        for piece in split_evenly(text)
    ]
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {
            "type": "response.completed",
            "response": {**base, "status": "completed", "output": [done_item], "usage": usage},
        },
    ]
    return [sse_frame(event, event=str(event["type"])) for event in events]


def last_input_text(items: Any) -> str:
    """Text of the last user item of a Responses ``input``, for the echo fallback."""
    if isinstance(items, str):
        return items
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            parts = item.get("content")
            if isinstance(parts, str):
                return parts
            texts = [str(p.get("text", "")) for p in parts or [] if isinstance(p, dict)]
            return " ".join(texts)
    return ""


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """Text of the last user message (string or text parts), for the echo fallback."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return without_context(content)
        parts = content if isinstance(content, list) else []
        texts = [
            p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
        ]
        return without_context(" ".join(str(text) for text in texts))
    return ""


if __name__ == "__main__":
    run_standalone(OpenAISim, "OpenAI-compatible API simulator")


def transcription_body(text: str, usage: dict[str, Any] | None) -> dict[str, Any]:
    """A transcription's JSON answer. ``usage`` as OpenAI reports it (none when None):
    ``{"type": "tokens", "input_tokens", "output_tokens", "total_tokens",
    "input_token_details": {"text_tokens", "audio_tokens"}}`` for the gpt-4o transcribe
    models, ``{"type": "duration", "seconds"}`` for whisper-1."""
    return {"text": text} if usage is None else {"text": text, "usage": usage}
