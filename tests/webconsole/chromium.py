"""Debian's chromium as the console's browser tests and ``bench/console.py`` launch it:
where it is (``KERNEL_CHROMIUM``, else the first of chromium, chromium-browser,
google-chrome on PATH) and the flags that keep it off the network (this machine's
closed network refuses its background connections) and out of a sandbox it cannot
have as root."""

from __future__ import annotations

import os
import shutil

CHROMIUM = (
    os.environ.get("KERNEL_CHROMIUM")
    or next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), "")
    or "/usr/bin/chromium"
)
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
