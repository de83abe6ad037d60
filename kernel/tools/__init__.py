"""The tools the model may call, and the built-in ones.

Public API: ``kernel.tools.registry``'s ``ToolRegistry``, ``ToolContext``,
``ToolOutcome``, ``ToolReply`` and ``CONTEXT_ARG``; ``kernel.tools.repair.
repair_arguments``; the built-in tool modules ``kernel.tools.ask`` (``ask_user``) and
``kernel.tools.memory`` (the memory tools), registered like any extension's.
"""
