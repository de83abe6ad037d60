"""The Telegram channel (seed 004): python-telegram-bot inside Kernel's own loop.

Public API: ``kernel.telegram.channel.TelegramChannel`` (what the Kernel starts and
stops). The rest serves it: ``inbound`` (messages in), ``commands``, ``asks``
(inline-button questions), ``view``/``progress``/``tool_progress`` (how a turn looks),
``render`` and ``split`` (Markdown to Telegram HTML, 4096-unit messages), ``budget``
(one rate budget per chat for every Bot API call), ``outbox``/``calls`` (the durable
outbox and its one call per row), ``media``, ``voice``, ``outlet``
(Telegram as a delivery target) and ``polling`` (the bot's getUpdates and the watchdog
that keeps it consuming).
"""
