"""Kernel's answer in the Responses API's shape (``/v1/responses``): the ``response``
object and its output items, and the typed SSE events of a streamed answer, in the API's
order, each with its ``sequence_number``:

``response.created``, ``response.in_progress``; per output item
``response.output_item.added`` … ``response.output_item.done``, with between them a
reasoning item's ``response.reasoning_summary_part.added`` /
``response.reasoning_summary_text.delta`` … ``.done`` / ``response.reasoning_summary_part.done``,
a message's ``response.content_part.added`` / ``response.output_text.delta`` …
``response.output_text.done`` / ``response.content_part.done``, a function call's
``response.function_call_arguments.delta`` / ``.done``; then ``response.completed`` (or
``response.incomplete`` when the output limit cut it), with usage. A provider failure after
the stream began ends it with ``response.failed``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kernel.core.provider import Completion, RawToolCall, ThinkingPart, thinking_blocks
from kernel.gateway.responses_format import Tools, seal
from kernel.gateway.v1 import tool_input


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass(slots=True)
class Shell:
    """What every rendering of one response repeats: its id, model, time and the
    request's echoed settings."""

    id: str
    model: str
    echo: dict[str, Any]
    store: bool
    previous_response_id: str | None
    effort: str | None
    created_at: int = field(default_factory=lambda: int(time.time()))

    def json(
        self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": output,
            "previous_response_id": self.previous_response_id,
            "reasoning": {"effort": self.effort, "summary": None},
            "store": self.store,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "usage": usage,
            **self.echo,
        }


def usage_json(completion: Completion) -> dict[str, Any]:
    """The API's usage, as the provider reported it: ``input_tokens`` counts all input,
    the part read from the provider's cache in ``input_tokens_details.cached_tokens``, the
    part written to it in ``cache_write_tokens`` (the SDK requires both). Thinking is
    counted in ``output_tokens``; no provider of Kernel's reports it apart, so
    ``reasoning_tokens`` is 0."""
    usage = completion.usage
    return {
        "input_tokens": usage.prompt,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read,
            "cache_write_tokens": usage.cache_write,
        },
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt + usage.output,
    }


def status_of(completion: Completion) -> str:
    return "incomplete" if completion.stop_reason in ("max_tokens", "length") else "completed"


def reasoning_item(item_id: str, parts: list[ThinkingPart]) -> dict[str, Any]:
    text = "".join(p.text for p in parts)
    summary = [{"type": "summary_text", "text": text}] if text else []
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": summary,
        "encrypted_content": seal(thinking_blocks(parts)),
    }


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [text_part(text)] if status == "completed" else []
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def call_item(item_id: str, call: RawToolCall, tools: Tools, status: str) -> dict[str, Any]:
    """A tool call as the API's item: ``custom_tool_call`` for a freeform tool,
    ``function_call`` (with its ``namespace`` when it has one) for the rest."""
    arguments = tool_input(call.arguments)
    if call.name in tools.custom:
        text = arguments.get("input")
        return {
            "id": item_id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": call.id,
            "name": call.name,
            "input": text if isinstance(text, str) else json.dumps(arguments),
        }
    item: dict[str, Any] = {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call.id,
        "name": call.name,
        "arguments": json.dumps(arguments) if status == "completed" else "",
    }
    if call.name in tools.namespaces:
        item["namespace"], item["name"] = tools.namespaces[call.name]
    return item


def output_items(completion: Completion, tools: Tools) -> list[dict[str, Any]]:
    """The output of a whole answer: reasoning, the message, then the tool calls."""
    out: list[dict[str, Any]] = []
    if completion.thinking:
        out.append(reasoning_item(new_id("rs"), completion.thinking))
    if completion.text:
        out.append(message_item(new_id("msg"), completion.text))
    for call in completion.tool_calls:
        out.append(call_item(new_id("fc"), call, tools, "completed"))
    return out


Send = Callable[[str, dict[str, Any]], Awaitable[None]]


class Events:
    """The events of one streamed response: items opened and closed as deltas of
    another kind arrive (reasoning, then text, then the tool calls at the end)."""

    def __init__(
        self,
        send: Send,
        shell: Shell,
        tools: Tools,
        settle: Callable[[dict[str, Any]], None] = lambda response: None,
    ) -> None:
        self.send = send
        self.shell = shell
        self.tools = tools
        self.settle = settle  # sees the whole response before response.completed goes
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.text = ""
        self.thinking = ThinkingPart()

    async def start(self) -> None:
        await self.send("response.created", {"response": self.shell.json("in_progress", [])})
        await self.send("response.in_progress", {"response": self.shell.json("in_progress", [])})

    def _at(self, item: dict[str, Any]) -> dict[str, Any]:
        """Where an event of ``item`` (the next output item) belongs."""
        return {"item_id": item["id"], "output_index": len(self.output)}

    async def _add(self, item: dict[str, Any]) -> None:
        self.open = item
        await self.send(
            "response.output_item.added", {"output_index": len(self.output), "item": item}
        )

    async def text_delta(self, text: str) -> None:
        item = self.open
        if item is None or item["type"] != "message":
            await self.close()
            item = message_item(new_id("msg"), "", "in_progress")
            await self._add(item)
            part = {"content_index": 0, "part": text_part("")}
            await self.send("response.content_part.added", self._at(item) | part)
            self.text = ""
        self.text += text
        delta = {"content_index": 0, "delta": text, "logprobs": []}
        await self.send("response.output_text.delta", self._at(item) | delta)

    async def thinking_delta(self, text: str, signature: str) -> None:
        item = self.open
        if item is None or item["type"] != "reasoning":
            await self.close()
            item = {"id": new_id("rs"), "type": "reasoning", "summary": []}
            await self._add(item)
            part = {"summary_index": 0, "part": {"type": "summary_text", "text": ""}}
            await self.send("response.reasoning_summary_part.added", self._at(item) | part)
            self.thinking = ThinkingPart()
        self.thinking.text += text
        self.thinking.signature += signature
        if text:
            delta = {"summary_index": 0, "delta": text}
            await self.send("response.reasoning_summary_text.delta", self._at(item) | delta)

    async def close(self) -> None:
        item, self.open = self.open, None
        if item is None:
            return
        at = self._at(item)
        if item["type"] == "message":
            done = {"content_index": 0, "text": self.text, "logprobs": []}
            await self.send("response.output_text.done", at | done)
            part = {"content_index": 0, "part": text_part(self.text)}
            await self.send("response.content_part.done", at | part)
            item = message_item(item["id"], self.text)
        else:
            text = self.thinking.text
            summary = {"type": "summary_text", "text": text}
            await self.send(
                "response.reasoning_summary_text.done", at | {"summary_index": 0, "text": text}
            )
            await self.send(
                "response.reasoning_summary_part.done",
                at | {"summary_index": 0, "part": summary},
            )
            item = reasoning_item(item["id"], [self.thinking])
        await self._done(item)

    async def _done(self, item: dict[str, Any]) -> None:
        await self.send(
            "response.output_item.done", {"output_index": len(self.output), "item": item}
        )
        self.output.append(item)

    async def finish(self, completion: Completion) -> dict[str, Any]:
        """The tool calls, then ``response.completed``; returns the whole response."""
        await self.close()
        for part in completion.thinking:
            if part.redacted:  # opaque: it came whole, it goes whole
                item = reasoning_item(new_id("rs"), [part])
                await self._add(item)
                self.open = None
                await self._done(item)
        for call in completion.tool_calls:
            await self._call(call)
        status = status_of(completion)
        response = self.shell.json(status, self.output, usage_json(completion))
        if status == "incomplete":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        self.settle(response)
        await self.send(f"response.{status}", {"response": response})
        return response

    async def _call(self, call: RawToolCall) -> None:
        item = call_item(new_id("fc"), call, self.tools, "in_progress")
        await self._add(item)
        at = self._at(item)
        self.open = None
        done = call_item(item["id"], call, self.tools, "completed")
        if done["type"] == "function_call":
            arguments = done["arguments"]
            await self.send("response.function_call_arguments.delta", at | {"delta": arguments})
            await self.send(
                "response.function_call_arguments.done",
                at | {"name": done["name"], "arguments": arguments},
            )
        else:
            text = done["input"]
            await self.send("response.custom_tool_call_input.delta", at | {"delta": text})
            await self.send("response.custom_tool_call_input.done", at | {"input": text})
        await self._done(done)

    async def fail(self, code: str, message: str) -> None:
        response = self.shell.json("failed", self.output)
        response["error"] = {"code": code, "message": message}
        await self.send("response.failed", {"response": response})
