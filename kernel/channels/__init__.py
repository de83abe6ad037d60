"""Outbound channels besides Telegram, each a ``kernel.core.delivery`` plugin.

Public API: ``kernel.channels.console.ConsoleChannel``, ``kernel.channels.webhook.
WebhookChannel``, ``kernel.channels.qq.QQChannel`` and, for QQ events coming in
(``POST /channels/qq/inbound``), ``kernel.channels.qq_inbound``'s ``QQInbound`` and
``InboundError``. The composition root builds them from ``[channels.*]``.
"""
