"""Logging: stdout plus a rotating file under ``data/logs``, with secrets masked.

Three layers keep secrets and the owner's words out of the log (SPEC §10):

1. Kernel's own log calls name events, ids, counts and exception *types*, never message
   text, tool arguments, transcripts, file names or bodies.
2. Libraries are held at levels where they log no payloads: httpx logs every request URL
   at INFO (Telegram's carry the bot token); python-telegram-bot and the model SDKs log
   request parameters at DEBUG. ``general.log_messages = true`` lifts these floors.
3. :class:`RedactingFormatter` masks known secrets and credential shapes in the whole
   formatted record, tracebacks included, and hides quoted values (``'…'``) in messages
   and exception messages, where a library quotes what it was given — a search query, a
   file name, a tool argument. Kernel's own messages quote nothing, so they lose nothing.
"""

from __future__ import annotations

import logging
import logging.handlers
import traceback
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path
from types import TracebackType
from typing import TextIO

from kernel.redact import Redactor, hide_quoted

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
    "httpx2": logging.WARNING,
    "httpcore": logging.WARNING,
    "httpcore2": logging.WARNING,
    "telegram": logging.INFO,  # DEBUG: every Bot API call with its parameters (text)
    "anthropic": logging.WARNING,  # DEBUG: request options with the messages
    "openai": logging.WARNING,
    "mcp": logging.WARNING,  # DEBUG/INFO: JSON-RPC traffic (tool arguments, results)
    "aiohttp.access": logging.WARNING,  # request lines: paths and query strings
    "asyncio": logging.WARNING,
}

# Exceptions whose messages describe code (names, types), not data: kept as they are.
_CODE_SHAPED: tuple[type[BaseException], ...] = (
    AttributeError,
    NameError,
    ImportError,
    TypeError,
    NotImplementedError,
)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]

# A tag for every line logged while handling one request (the sidecar's request id);
# tasks started meanwhile, e.g. the request's turn, inherit it.
request_tag: ContextVar[str] = ContextVar("request_tag", default="")


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
        message = record.getMessage()
        if not self.keep_text:
            message = hide_quoted(message)
        record.message = message
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        # Not cached in record.exc_text: another formatter must not reuse our choice.
        if record.exc_info and record.exc_info[1] is not None:
            text += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:
            text += "\n" + (record.exc_text if self.keep_text else hide_quoted(record.exc_text))
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
    line = f"{name}: {detail}\n" if detail else f"{name}\n"
    return line + "".join(f"{n}\n" for n in notes)


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
        log_dir.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                log_dir / LOG_FILE, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
            )
        )
    for handler in handlers:
        handler.setFormatter(fmt)
        root.addHandler(handler)
    root.setLevel(level)
    for name, floor in LIBRARY_FLOORS.items():
        logging.getLogger(name).setLevel(level if log_messages else max(level, floor))
