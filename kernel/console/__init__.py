"""``kernel chat``: the terminal channel (``console``) on an in-process Kernel.

Public API (``kernel.console.chat``): ``run_chat(config, make_kernel)``, ``ConsoleChat``
(one line in, the turn or the shared command out), ``CONVERSATION``, ``COMMANDS``.
"""
