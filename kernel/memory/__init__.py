"""Long-term memory (SPEC §6): tokens for search, the memory service, <remember> tags.

Public API: ``kernel.memory.memories``'s ``Memories`` (the service every caller uses)
and ``MAX_REMEMBERED_PER_TURN``; ``kernel.memory.remember``'s ``extract_remember``,
``RememberFilter`` and ``Fact``. ``tokens.py`` is the service's own.
"""
