"""Logging: stdout plus a rotating file under ``data/logs``, with secrets masked.

Kernel never logs message text; this filter is the second line of defence for
tokens and keys that might slip into an exception message.
"""

from __future__ import annotations

import logging
import logging.handlers
import re
from pathlib import Path
from typing import TextIO

from kernel.redact import redact_text

_HEADER = re.compile(r"(?i)\b(authorization|x-api-key|cookie|api-key)\b(\s*[:=]\s*)([^\s,;]+)")


class RedactingFilter(logging.Filter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = _HEADER.sub(r"\1\2[REDACTED]", redact_text(message, self.secrets))
        if clean != message:
            record.msg, record.args = clean, None
        return True


def setup_logging(
    log_dir: Path | None, secrets: list[str], *, level: int = logging.INFO, stream: TextIO
) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler(stream)]
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                log_dir / "kernel.log", maxBytes=10 * 1024 * 1024, backupCount=5, encoding="utf-8"
            )
        )
    redactor = RedactingFilter(secrets)
    for handler in handlers:
        handler.setFormatter(fmt)
        handler.addFilter(redactor)
        root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("httpx", "httpx2", "httpcore", "anthropic", "openai", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
