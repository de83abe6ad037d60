"""The Telegram channel (seed 004): python-telegram-bot inside Kernel's own loop.

Public API: ``kernel.telegram.channel.TelegramChannel`` (what the Kernel starts and
stops), built from ``kernel.telegram.deps.TelegramServices`` (the services it uses,
built in ``kernel/app.py``). Its parts get one frozen ``deps.Deps`` (never the channel)
and the parts they call, handed in: ``mailroom`` (the inbox, and the rows the busy
notices of ``held`` hold) below ``files``, ``inbound`` (messages in; ``busy``) and
``commands`` (``picker``). The rest serves them: ``asks``
(inline-button questions), ``view``/``progress``/``tool_progress`` (how a turn looks),
``render`` and ``split`` (Markdown to Telegram HTML, 4096-unit messages), ``budget``
(one rate budget per chat for every Bot API call), ``outbox``/``calls``/``items`` (the
durable outbox, its one call per row, what goes into it), ``media``, ``voice``, ``outlet``
(Telegram as a delivery target) and ``polling`` (the bot's getUpdates and the watchdog
that keeps it consuming).
"""

from kernel.core.optional import hidden

# Loaded here, before any module of this package uses it, without the optional parts
# the bot never uses (kernel/core/optional.py).
with hidden("cryptography"):
    import telegram  # noqa: F401
