"""SQLite persistence: one database file, one writer thread, named migrations.

Public API: ``kernel.store.db``'s ``Store`` (sessions and messages, settings, memories)
with ``SessionRow``, ``MemoryRow`` and ``MEMORY_CATEGORIES``; ``kernel.store.cron``'s
``CronStore`` and ``CronRow``; ``kernel.store.channels``'s ``ChannelStore`` and
``WebhookFailure``; ``kernel.store.migrations.memory_key``. Inside: ``database.py``
(the thread and its transactions), ``sessions.py``, ``settings.py``, ``memories.py``
(the Store's table families), ``migrations.py``.
"""
