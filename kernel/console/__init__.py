"""``kernel chat`` in this terminal, with the in-process agent (channel ``console``).

Public API: ``kernel.console.chat.run_chat``; ``kernel.console.sessions``'s
``format_history`` and ``parse_refs`` (session listings and ``#n`` references, shared
with Telegram's commands).
"""
