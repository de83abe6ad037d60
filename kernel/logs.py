"""Logging: stdout plus a rotating file under ``data/logs``, with secrets masked.

Kernel never logs message text; this filter is the second line of defence for
tokens and keys that might slip into an exception message.
"""

from __future__ import annotations

import logging
import logging.handlers
import re
from contextvars import ContextVar
from pathlib import Path
from typing import TextIO

from kernel.redact import redact_text

# A tag for every line logged while handling one request (the sidecar's request id);
# tasks started meanwhile, e.g. the request's turn, inherit it.
request_tag: ContextVar[str] = ContextVar("request_tag", default="")

_HEADER = re.compile(r"(?i)\b(authorization|x-api-key|cookie|api-key)\b(\s*[:=]\s*)([^\s,;]+)")


class RedactingFormatter(logging.Formatter):
    """Masks secrets in the whole formatted record, tracebacks included (an HTTP
    library's exception text may carry a URL with the bot token in it)."""

    def __init__(self, fmt: str, secrets: list[str]) -> None:
        super().__init__(fmt)
        self.secrets = [s for s in secrets if s]

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        tag = request_tag.get()
        if tag:
            first, newline, rest = text.partition("\n")
            text = f"{first} [{tag}]{newline}{rest}"
        return _HEADER.sub(r"\1\2[REDACTED]", redact_text(text, self.secrets))


def add_secrets(secrets: list[str]) -> None:
    """Mask these too from now on (a key set at runtime, e.g. through the sidecar)."""
    for handler in logging.getLogger().handlers:
        fmt = handler.formatter
        if isinstance(fmt, RedactingFormatter):
            fmt.secrets.extend(s for s in secrets if s and s not in fmt.secrets)


def setup_logging(
    log_dir: Path | None, secrets: list[str], *, level: int = logging.INFO, stream: TextIO
) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    fmt = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", secrets)
    handlers: list[logging.Handler] = [logging.StreamHandler(stream)]
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                log_dir / "kernel.log", maxBytes=10 * 1024 * 1024, backupCount=5, encoding="utf-8"
            )
        )
    for handler in handlers:
        handler.setFormatter(fmt)
        root.addHandler(handler)
    root.setLevel(level)
    # httpx logs every request URL at INFO, and Telegram's URLs contain the bot token.
    for noisy in ("httpx", "httpx2", "httpcore", "anthropic", "openai", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
