"""``kernel tui``: a full-screen terminal client (Textual, the optional ``tui`` extra)
over the running Kernel's sidecar or an in-process Kernel core.

Public API (for ``kernel.__main__``): :func:`textual_missing` (importing this package
never imports Textual), and in ``kernel.tui.run``: ``run_remote(url, api_key)`` and
``run_local(config, make_kernel)``. Inside: ``backend.py`` (the :class:`Backend`
protocol the app sees), ``remote.py`` (HTTP, httpx), ``local.py`` (the Agent in this
process), ``app.py`` (the Textual app), ``screens.py`` (question and audit modals),
``render.py`` (the words of messages, events, plans and audit rows).
"""

from __future__ import annotations

import importlib


def textual_missing() -> bool:
    """True when Textual is not installed (``uv sync --extra tui`` installs it)."""
    try:
        importlib.import_module("textual")
    except ImportError:
        return True
    return False
