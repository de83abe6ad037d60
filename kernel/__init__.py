"""Kernel: a self-hosted, Telegram-first personal AI assistant."""

__version__ = "0.1.0"
