"""Importing a library without the optional packages it would load only if installed.

python-telegram-bot loads ``cryptography`` (~7.5 MiB resident) for Telegram Passport,
which Kernel does not use, and treats it as optional (``CRYPTO_INSTALLED``); httpx loads
its command line (``httpx._main``: click, rich, pygments) when those are installed. Hidden
while the library is imported, such a package reads as not installed to it, and stays
importable by whoever does need it later (the QQ channel's Ed25519 signatures).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


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
