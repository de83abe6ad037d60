"""Kernel: a self-hosted, Telegram-first personal AI assistant.

The folders are the layers (checked by import-linter in ``scripts/check``), top to
bottom: the entry points (``__main__``, ``app`` — the composition root — and ``check``);
the adapters (``telegram``, ``gateway``, ``console``, ``client``, ``mcp``, ``channels``,
``voice``, ``providers``); the domain (``cron``, ``selfops``, ``delegate``, ``agent``,
``tools``, ``memory``, ``skills``, ``workspace``, ``retention``, ``store``); then
``runtime``, ``config`` and ``core`` at the bottom. Each package's docstring names what
other packages may import from it.
"""

__version__ = "0.1.0"
