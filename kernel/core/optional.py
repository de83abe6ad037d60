"""Libraries' optional parts Kernel never uses, kept out of its memory (issue 37).

- python-telegram-bot loads ``cryptography`` (~7.5 MiB resident) for Telegram Passport,
  which Kernel does not use, and treats it as optional (``CRYPTO_INSTALLED``):
  :func:`hidden` while it is imported, the package reads as not installed to it and stays
  importable by whoever needs it later (the QQ channel's Ed25519 signatures).
- httpx loads its command line (``httpx._main``: click, and rich and pygments when
  installed; ~1.3 MiB without rich) on import when it can. The service never runs it:
  :func:`leave_out` marks it absent for the whole process, before anything imports httpx.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

NEVER_USED = ("httpx._main",)


def leave_out(names: tuple[str, ...] = NEVER_USED) -> None:
    """From now on, importing any of ``names`` raises ImportError (unless already done)."""
    for name in names:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


@contextmanager
def hidden(*names: str) -> Iterator[None]:
    """Within the block, ``import <name>`` raises ImportError for each of ``names`` not
    imported yet (a ``None`` in ``sys.modules``, the import system's own "not found")."""
    absent = [name for name in names if name not in sys.modules]
    for name in absent:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in absent:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]
