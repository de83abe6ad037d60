"""The command-line client of the running sidecar: ``kernel chats|models|env|usage|routing``, and
``kernel chat`` when Kernel runs.

Public API (for ``kernel.__main__``): ``kernel.client.commands.register`` and ``run``
(every client verb), ``kernel.client.chat.run_remote_chat``, and
``kernel.client.http.sidecar_from`` / :class:`~kernel.client.http.Sidecar` (blocking) and
:class:`~kernel.client.http.AsyncSidecar` (the TUI's): the one sidecar client, over httpx,
with one error handling and one SSE reader. Inside:
``verbs.py`` holds what the verb modules (``commands``, ``files``, ``cron``,
``usage``, ``routing``) share.
"""
