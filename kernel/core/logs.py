"""Logging: stdout plus a rotating file under ``data/logs``, with secrets masked.

Three layers keep secrets and the owner's words out of the log (SPEC §10):

1. Kernel's own log calls name events, ids, counts and exception *types*, never message
   text, tool arguments, transcripts, file names or bodies.
2. Libraries are held at levels where they log no payloads: httpx and Telegram's
   requests log every request URL at INFO (Telegram's carry the bot token);
   python-telegram-bot and the model SDKs log request parameters at DEBUG.
   ``general.log_messages = true`` lifts these floors.
3. :class:`RedactingFormatter` masks known secrets and credential shapes in the whole
   formatted record, tracebacks included, and hides quoted values (``'…'``) in messages
   and exception messages, where a library quotes what it was given — a search query, a
   file name, a tool argument. Kernel's own messages quote nothing, so they lose nothing.

Every record is one line: control characters in a message (a newline in a request path
or a file name) are escaped, so no outside input can forge a log line; only the
tracebacks formatted here span lines. :class:`RepeatFilter` lets the first few of a
burst of identical records through and then summarises the rest, so a failure that
repeats in a tight loop (asyncio's "socket.accept() out of system resource" when
descriptors run out) cannot flood the disk and rotate away the history.
"""

from __future__ import annotations

import contextlib
import io
import logging
import logging.handlers
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kernel.core.fileio import os_cause, passes
from kernel.core.redact import Redactor, hide_quoted

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FILE = "kernel.log"
MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 5
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# The lowest level each library may log at unless message logging is switched on.
LIBRARY_FLOORS = {
    "httpx": logging.WARNING,  # "HTTP Request: POST …/bot<token>/…" at INFO
    # Telegram's requests (kernel/telegram/aio_request.py) log the same line, as httpx did.
    "telegram.request.AioRequest": logging.WARNING,
    "httpx2": logging.WARNING,
    "httpcore": logging.WARNING,
    "httpcore2": logging.WARNING,
    "telegram": logging.INFO,  # DEBUG: every Bot API call with its parameters (text)
    "anthropic": logging.WARNING,  # DEBUG: request options with the messages
    "openai": logging.WARNING,
    "mcp": logging.WARNING,  # DEBUG/INFO: JSON-RPC traffic (tool arguments, results)
    "sse_starlette": logging.WARNING,  # DEBUG: every SSE chunk /mcp sends (tool results)
    "aiohttp.access": logging.WARNING,  # request lines: paths and query strings
    "asyncio": logging.WARNING,
    "trafilatura": logging.CRITICAL,  # web_fetch: warnings quote URLs and the page's text
    "htmldate": logging.CRITICAL,
}

# Exceptions whose messages describe code (names, types), not data: kept as they are.
_CODE_SHAPED: tuple[type[BaseException], ...] = (
    AttributeError,
    NameError,
    ImportError,
    TypeError,
    NotImplementedError,
)

# A tag for every line logged while handling one request (the sidecar's request id);
# tasks started meanwhile, e.g. the request's turn, inherit it.
request_tag: ContextVar[str] = ContextVar("request_tag", default="")


# C0 and C1 controls, DEL, and what str.splitlines() also breaks at, as visible escapes.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))} | {
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def escape_controls(text: str) -> str:
    """``text`` on one line: control characters written as escapes (``\\n``, ``\\x1b``)."""
    return text.translate(_CONTROLS)


@dataclass(slots=True)
class _Burst:
    start: float
    count: int
    sample: logging.LogRecord


class RepeatFilter(logging.Filter):
    """Within ``window`` seconds, the first ``burst`` records with the same logger,
    level and message pass; the rest are counted and dropped, and once the window has
    closed one "suppressed K similar records" line says how many (written when any
    record arrives after that, or by :meth:`flush`). One per handler."""

    def __init__(
        self,
        handler: logging.Handler,
        *,
        burst: int = 5,
        window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 1000,
    ) -> None:
        super().__init__()
        self.handler = handler
        self.burst = burst
        self.window = window
        self.clock = clock
        self.max_keys = max_keys
        self._seen: dict[tuple[str, int, str], _Burst] = {}
        self._next_sweep = 0.0
        self._lock = threading.Lock()  # records come from worker threads too

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "repeat_summary", False):
            return True
        try:
            key = (record.name, record.levelno, record.getMessage())
        except Exception:  # a broken record: let the formatter report it
            return True
        now = self.clock()
        with self._lock:
            closed = self._closed(now) if now >= self._next_sweep else []
            burst = self._seen.get(key)
            if burst is not None and now - burst.start >= self.window:
                closed.append((key, self._seen.pop(key)))
                burst = None
            if burst is None:
                if len(self._seen) >= self.max_keys:
                    closed.extend(self._seen.items())
                    self._seen.clear()
                self._seen[key] = _Burst(now, 1, record)
                passed = True
            else:
                burst.count += 1
                passed = burst.count <= self.burst
        self._summarise(closed)
        return passed

    def flush(self) -> None:
        """Summarise the windows that have closed."""
        with self._lock:
            closed = self._closed(self.clock())
        self._summarise(closed)

    def _closed(self, now: float) -> list[tuple[tuple[str, int, str], _Burst]]:
        self._next_sweep = now + self.window
        ended = [(k, b) for k, b in self._seen.items() if now - b.start >= self.window]
        for key, _ in ended:
            del self._seen[key]
        return ended

    def _summarise(self, closed: list[tuple[tuple[str, int, str], _Burst]]) -> None:
        for key, burst in closed:
            suppressed = burst.count - self.burst
            if suppressed <= 0:
                continue
            sample = burst.sample
            summary = logging.LogRecord(
                sample.name,
                sample.levelno,
                sample.pathname,
                sample.lineno,
                "suppressed %d similar records in %.0f s: %s",
                (suppressed, self.window, key[2][:200]),
                None,
            )
            summary.repeat_summary = True
            self.handler.handle(summary)


def add_secrets(secrets: list[str], opaque: Iterable[str] = ()) -> None:
    """Mask these too from now on (a key set at runtime, e.g. through the sidecar);
    ``opaque`` values (header values) are hidden wholly."""
    hidden = list(opaque)
    for handler in logging.getLogger().handlers:
        fmt = handler.formatter
        if isinstance(fmt, RedactingFormatter):
            fmt.redactor = fmt.redactor.with_secrets(secrets, hidden)


class RedactingFormatter(logging.Formatter):
    """Formats a record, then masks secrets in all of it (message and traceback).

    ``keep_text``: do not hide quoted values (``general.log_messages = true``)."""

    def __init__(self, redactor: Redactor, *, keep_text: bool = False, fmt: str = FORMAT) -> None:
        super().__init__(fmt)
        self.redactor = redactor
        self.keep_text = keep_text

    def format(self, record: logging.LogRecord) -> str:
        message = escape_controls(record.getMessage())
        if not self.keep_text:
            message = hide_quoted(message)
        record.message = message
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        # Not cached in record.exc_text: another formatter must not reuse our choice.
        if record.exc_info and record.exc_info[1] is not None:
            text += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:  # not ours: its lines are escaped one by one
            exc_text = record.exc_text if self.keep_text else hide_quoted(record.exc_text)
            text += "\n" + "\n".join(escape_controls(line) for line in exc_text.splitlines())
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        tag = request_tag.get()
        if tag:
            first, newline, rest = text.partition("\n")
            text = f"{first} [{tag}]{newline}{rest}"
        return self.redactor(text)

    def formatException(self, ei: object) -> str:  # noqa: N802 (logging's name)
        exc = ei[1] if isinstance(ei, tuple) and len(ei) == 3 else None
        if not isinstance(exc, BaseException):
            return super().formatException(ei)  # type: ignore[arg-type]
        return format_exception(exc, hide=not self.keep_text)


def format_exception(exc: BaseException, *, hide: bool) -> str:
    """Like ``traceback.format_exception``, with each message in the chain passed through
    :func:`hide_quoted` when ``hide`` (frames show code, messages may show data)."""
    out: list[str] = []
    _format_chain(exc, hide, out, set())
    return "".join(out).rstrip("\n")


def _format_chain(exc: BaseException, hide: bool, out: list[str], seen: set[int]) -> None:
    seen.add(id(exc))
    cause = exc.__cause__
    context = None if exc.__suppress_context__ else exc.__context__
    if cause is not None and id(cause) not in seen:
        _format_chain(cause, hide, out, seen)
        out.append("\nThe above exception was the direct cause of the following exception:\n\n")
    elif context is not None and id(context) not in seen:
        _format_chain(context, hide, out, seen)
        out.append("\nDuring handling of the above exception, another exception occurred:\n\n")
    if exc.__traceback__ is not None:
        out.append("Traceback (most recent call last):\n")
        out.extend(traceback.format_tb(exc.__traceback__))
    out.append(_exception_line(exc, hide))
    if isinstance(exc, BaseExceptionGroup):
        for number, sub in enumerate(exc.exceptions, 1):
            inner: list[str] = []
            _format_chain(sub, hide, inner, seen)
            out.append(f"+---------------- {number} ----------------\n")
            out.extend(f"| {line}" for line in "".join(inner).splitlines(keepends=True))
            out.append("\n")


def _exception_line(exc: BaseException, hide: bool) -> str:
    kind = type(exc)
    name = kind.__qualname__
    if kind.__module__ not in ("builtins", "__main__"):
        name = f"{kind.__module__}.{name}"
    try:
        detail = str(exc)
    except Exception:  # a broken __str__ must not lose the log line
        detail = "<unprintable>"
    notes = [str(n) for n in getattr(exc, "__notes__", None) or ()]
    if hide and not isinstance(exc, _CODE_SHAPED):
        detail = hide_quoted(detail)
        notes = [hide_quoted(n) for n in notes]
    detail = escape_controls(detail)
    line = f"{name}: {detail}\n" if detail else f"{name}\n"
    return line + "".join(f"{escape_controls(n)}\n" for n in notes)


class LogFile(logging.handlers.RotatingFileHandler):
    """``kernel.log``, rotated, that a full or read-only disk does not break: a write that
    fails is said once on stderr (stdout keeps every line), and the file is tried again
    at most every ``retry`` seconds, so logging resumes once the disk takes writes."""

    def __init__(
        self, path: Path, *, retry: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(
            path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=True
        )
        self.retry = retry
        self.clock = clock
        self.failed_at: float | None = None  # the last failed write: wait ``retry``
        self.broken = False  # said on stderr; cleared by the next line written

    def emit(self, record: logging.LogRecord) -> None:
        if self.failed_at is not None:
            if self.clock() - self.failed_at < self.retry:
                return
            self.failed_at = None
        super().emit(record)  # a failure lands in handleError, which sets failed_at
        if self.failed_at is None:
            self.broken = False

    def _open(self) -> io.TextIOWrapper:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        problem = sys.exc_info()[1]
        if not isinstance(problem, OSError):
            super().handleError(record)
            return
        if not self.broken:
            self.broken = True
            sys.stderr.write(
                f"kernel: cannot write {self.baseFilename} ({os_cause(problem)}); "
                "logging to stdout only until it can be written\n"
            )
        self.failed_at = self.clock()
        stream, self.stream = self.stream, None
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def setup_logging(
    log_dir: Path | None,
    secrets: Iterable[str],
    *,
    stream: TextIO,
    level: int = logging.INFO,
    log_messages: bool = False,
    header_names: Iterable[str] = (),
    opaque: Iterable[str] = (),
) -> None:
    """Route every logger (Kernel's and the libraries') through one redacting formatter,
    to ``stream`` and, with ``log_dir``, to ``kernel.log`` rotated at 10 MB × 5."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    fmt = RedactingFormatter(Redactor(secrets, header_names, opaque), keep_text=log_messages)
    handlers: list[logging.Handler] = [logging.StreamHandler(stream)]
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if not passes(exc):  # a data dir that is a file: a person must fix it
                raise
            # A full or read-only disk: LogFile creates the folder once it can.
        handlers.append(LogFile(log_dir / LOG_FILE))
    for handler in handlers:
        handler.setFormatter(fmt)
        handler.addFilter(RepeatFilter(handler))
        root.addHandler(handler)
    root.setLevel(level)
    for name, floor in LIBRARY_FLOORS.items():
        logging.getLogger(name).setLevel(level if log_messages else max(level, floor))
