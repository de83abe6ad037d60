"""Turning a coding CLI's stdout into progress steps and a final answer (seed 003).

One formatter per CLI for its JSONL stream mode, plus :class:`PlainText` for CLIs run in
text mode (stdout is the answer). A formatter is fed one stdout line at a time and
returns the progress steps that line shows, if any: a line that returns steps is
"displayable", which is what arms the idle timeout. Start-up noise (Claude's
``system/init``, Codex's ``thread.started``, Gemini's ``init`` and the echoed prompt) is
never displayable. ``done`` turns true on the CLI's completion event (``result``,
``turn.completed``, ``turn.failed``, ``turn.finished``); ``failure`` holds the CLI's own
error text when it reported one.

Retries and API errors are *trouble*, not progress: they never return steps (so they arm
no idle timeout and do not count as progress for the no-progress limit); they update
:attr:`Formatter.trouble` (the error, the attempt, the maximum when the CLI says it) and
bump :attr:`Formatter.trouble_seq`. Gemini CLI prints its retries on stderr, which is
fed line by line to :meth:`Formatter.feed_stderr`. Progress clears ``trouble`` (the live
warning); :attr:`Formatter.cause` keeps the last one of the run, the "last known cause"
named when the run ends by a time limit, a kill or an error.

Event shapes, recorded from claude 2.1.197, codex-cli 0.169.0 and gemini-cli 0.61.0
(tests/delegate/standins.py prints the same), the unreachable-API ones again from claude
2.1.332, codex-cli 0.171.0 and gemini-cli 0.61.0 (unchanged; see tests/delegate/
test_ending.py):

- Claude Code ``-p --output-format stream-json --verbose``: ``{"type": "system",
  "subtype": "init", ...}``, ``{"type": "assistant", "message": {"content": [{"type":
  "text", "text": ...}, {"type": "tool_use", "name": ..., "input": {...}}]}}``,
  ``{"type": "user", ...tool_result...}``, then ``{"type": "result", "subtype":
  "success", "is_error": false, "result": "<final text>", ...}``. API trouble:
  ``{"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
  "retry_delay_ms": 590.1, "error_status": null|529, "error": "unknown"|"overloaded"}``;
  when retries run out a synthetic ``assistant`` message (``"model": "<synthetic>"``,
  ``"error": "server_error"``, text ``API Error: Unable to connect to API
  (ConnectionRefused)``) and ``result`` with ``"is_error": true`` (exit 1).
- Codex ``exec --json``: ``thread.started``, ``turn.started``, ``item.started`` /
  ``item.updated`` / ``item.completed`` with ``item.type`` in agent_message, reasoning,
  command_execution, file_change, mcp_tool_call, web_search, todo_list, error; then
  ``turn.completed`` (or ``turn.failed`` with ``error.message``); ``error`` events:
  ``Reconnecting... 1/5 (unexpected status 529 ...)`` while it retries, ``Reconnecting...
  waiting for network (Connection failed: error sending request)`` (forever) when the
  API cannot be reached.
- Gemini CLI ``--output-format stream-json``: ``init``, ``message`` (role user/assistant,
  ``delta`` chunks), ``tool_use`` (``tool_name``, ``parameters``), ``tool_result``,
  ``error``, then ``result`` (``status``, ``stats``). Retries go to stderr: ``Attempt 1
  failed with status 529. Retrying with backoff... <error>`` or ``Attempt 1 failed.
  Retrying with backoff... Error: exception TypeError: fetch failed sending request``.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

STEP_LIMIT = 300  # characters of one progress step
COMPLETION_EVENTS = frozenset({"result", "turn.completed", "turn.failed", "turn.finished"})
DISPLAY_NAMES = {"claude_code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def one_line(text: str, limit: int = STEP_LIMIT) -> str:
    """Collapse whitespace to one line and cut it at ``limit`` characters."""
    flat = " ".join(strip_ansi(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return one_line(line.strip().strip("*").strip())
    return ""


_ARG_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description", "prompt")


def describe_call(name: str, arguments: Any) -> str:
    """``Bash: ls -la`` from a tool name and its arguments (the most telling one)."""
    if isinstance(arguments, dict):
        for key in _ARG_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                return one_line(f"{name}: {value}")
    return one_line(name)


def display_name(cli: str) -> str:
    return DISPLAY_NAMES.get(cli, cli)


@dataclass(slots=True)
class Trouble:
    """The CLI's latest retry or API error: what it said, and how many tries so far."""

    error: str
    attempt: int = 0  # retries reported so far (0: an error without a retry count)
    max_attempts: int | None = None


class Formatter:
    """Base: feed lines, read steps, ``done``, ``failure``, ``trouble`` and ``answer()``."""

    jsonl = True

    def __init__(self) -> None:
        self.done = False
        self.failure = ""
        self.bad_lines = 0
        self.trouble: Trouble | None = None
        self.cause: Trouble | None = None  # the last trouble of the run, never cleared
        self.trouble_seq = 0  # bumped on every retry or API error

    def report_trouble(
        self, error: str, attempt: int | None = None, limit: int | None = None
    ) -> None:
        previous = self.trouble
        if attempt is None:
            attempt = previous.attempt + 1 if previous else 1
        if limit is None and previous is not None:
            limit = previous.max_attempts
        self.trouble = self.cause = Trouble(one_line(error, limit=500), attempt, limit)
        self.trouble_seq += 1

    def feed_stderr(self, line: str) -> None:
        """A stderr line (most CLIs print only noise there)."""

    def feed(self, line: str) -> list[str]:
        line = line.strip()
        if not line:
            return []
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            # Banners and warnings between events are kept in the saved output only.
            self.bad_lines += 1
            log.debug("non-JSON line on a JSONL stream (%d chars)", len(line))
            return []
        kind = str(event.get("type", ""))
        steps = [s for s in self.event(kind, event) if s]
        if steps:
            self.trouble = None  # progress again: the retries are over
        if kind in COMPLETION_EVENTS:
            self.done = True
        return steps

    def event(self, kind: str, event: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def answer(self) -> str:
        raise NotImplementedError


class PlainText(Formatter):
    """Text mode: every non-empty line is progress; the answer is all of stdout (kept by
    the runner, which bounds it)."""

    jsonl = False

    def feed(self, line: str) -> list[str]:
        step = one_line(line)
        return [step] if step else []

    def event(self, kind: str, event: dict[str, Any]) -> list[str]:  # pragma: no cover
        return []

    def answer(self) -> str:
        return ""


class ClaudeStream(Formatter):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.result: str | None = None

    def event(self, kind: str, event: dict[str, Any]) -> list[str]:
        if kind == "system" and event.get("subtype") == "api_retry":
            status, error = event.get("error_status"), event.get("error") or "error"
            text = f"HTTP {status} {error}" if status else f"no HTTP response ({error})"
            attempt = event.get("attempt")
            limit = event.get("max_retries")
            self.report_trouble(
                text,
                attempt if isinstance(attempt, int) else None,
                limit if isinstance(limit, int) else None,
            )
            return []
        if kind == "assistant":
            message = event.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if event.get("error") or (
                isinstance(message, dict) and message.get("model") == "<synthetic>"
            ):
                # Not the model speaking: Claude Code's own "API Error: ..." after its retries.
                texts = [str(b.get("text", "")) for b in content or [] if isinstance(b, dict)]
                text = " ".join(t for t in texts if t.strip()) or str(event.get("error"))
                self.report_trouble(text, self.trouble.attempt if self.trouble else 0)
                return []
            steps: list[str] = []
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    self.texts.append(str(block["text"]))
                    steps.append(first_line(str(block["text"])))
                elif block.get("type") == "tool_use":
                    steps.append(describe_call(str(block.get("name", "tool")), block.get("input")))
            return steps
        if kind == "result":
            result = event.get("result")
            if event.get("is_error") or event.get("subtype", "success") != "success":
                # The text is Claude Code's error ("API Error: ..."), not an answer.
                self.failure = one_line(str(result or event.get("subtype") or "error"), limit=2000)
            elif isinstance(result, str):
                self.result = result
        return []  # system/init, user tool results, stream events: not progress

    def answer(self) -> str:
        if self.result and self.result.strip():
            return self.result
        return self.texts[-1] if self.texts else ""


_CODEX_RETRY = re.compile(
    r"Reconnecting\.\.\. (?:(\d+)/(\d+) )?(?:waiting for network )?\((.*)\)\Z"
)
_GEMINI_RETRY = re.compile(
    r"Attempt (\d+) failed(?: with status (\d+))?\. Retrying with backoff\.\.\. ?(.*)\Z"
)


class CodexStream(Formatter):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def event(self, kind: str, event: dict[str, Any]) -> list[str]:
        if kind.startswith("item."):
            item = event.get("item")
            return [self._item(kind, item)] if isinstance(item, dict) else []
        if kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self.failure = one_line(str(message or "turn failed"), limit=2000)
            return []  # the end, not progress: the failure is reported with the outcome
        if kind == "error":
            message = str(event.get("message", "error"))
            if retry := _CODEX_RETRY.match(message):
                count, limit, detail = retry.groups()
                self.report_trouble(
                    detail, int(count) if count else None, int(limit) if limit else None
                )
            else:
                self.report_trouble(message, self.trouble.attempt if self.trouble else 0)
            return []
        return []  # thread.started, turn.started, turn.completed

    def _item(self, kind: str, item: dict[str, Any]) -> str:
        itype = item.get("type")
        completed = kind == "item.completed"
        if itype == "agent_message":
            text = str(item.get("text", ""))
            if completed and text.strip():
                self.messages.append(text)
            return first_line(text)
        if itype == "reasoning":
            return first_line(str(item.get("text", "")))
        if itype == "command_execution":
            command = str(item.get("command", ""))
            code = item.get("exit_code")
            suffix = f" (exit {code})" if completed and code is not None else ""
            return one_line(f"$ {command}{suffix}")
        if itype == "file_change":
            changes = item.get("changes")
            paths = [
                str(c.get("path")) for c in changes or [] if isinstance(c, dict) and c.get("path")
            ]
            return one_line("✎ " + ", ".join(paths)) if paths else ""
        if itype == "mcp_tool_call":
            return one_line(f"{item.get('server', 'mcp')}.{item.get('tool', 'tool')}")
        if itype == "web_search":
            return one_line(f"search: {item.get('query', '')}")
        if itype == "todo_list":
            items = [i for i in item.get("items") or [] if isinstance(i, dict)]
            done = sum(1 for i in items if i.get("completed"))
            current = next((str(i.get("text", "")) for i in items if not i.get("completed")), "")
            return one_line(f"[{done}/{len(items)}] {current}")
        if itype == "error":
            return one_line(f"✗ {item.get('message', 'error')}")
        return ""

    def answer(self) -> str:
        return self.messages[-1] if self.messages else ""


class GeminiStream(Formatter):
    def __init__(self) -> None:
        super().__init__()
        self.segments: list[list[str]] = [[]]  # assistant text between tool calls

    def event(self, kind: str, event: dict[str, Any]) -> list[str]:
        if kind == "message" and event.get("role") == "assistant":
            content = str(event.get("content", ""))
            if not event.get("delta") and self.segments[-1]:
                self.segments.append([])  # a whole message replaces, not extends
            self.segments[-1].append(content)
            current = "".join(self.segments[-1]).strip().splitlines()
            return [one_line(current[-1])] if current else []
        if kind == "tool_use":
            self.segments.append([])
            return [describe_call(str(event.get("tool_name", "tool")), event.get("parameters"))]
        if kind == "tool_result" and event.get("status") == "error":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else "tool failed"
            return [one_line(f"✗ {message}")]
        if kind == "error":
            self.report_trouble(
                str(event.get("message", "error")), self.trouble.attempt if self.trouble else 0
            )
            return []
        if kind == "result" and event.get("status", "success") != "success":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else event.get("status")
            self.failure = one_line(str(message or "error"), limit=2000)
        return []  # init, the echoed user message, tool results

    def feed_stderr(self, line: str) -> None:
        retry = _GEMINI_RETRY.match(strip_ansi(line).strip())
        if retry:
            attempt, status, detail = retry.groups()
            detail = detail.removeprefix("_ApiError: ").removeprefix("Error: ")
            text = f"HTTP {status} {detail}" if status else detail
            self.report_trouble(text or "error", int(attempt))

    def answer(self) -> str:
        for segment in reversed(self.segments):
            text = "".join(segment)
            if text.strip():
                return text
        return ""


FORMATTERS: dict[str, type[Formatter]] = {
    "claude_code": ClaudeStream,
    "codex": CodexStream,
    "gemini": GeminiStream,
}


def formatter_for(cli: str, jsonl: bool) -> Formatter:
    if not jsonl:
        return PlainText()
    return FORMATTERS[cli]()
