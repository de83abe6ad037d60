"""The tools the model may call, and the built-in ones.

Public API: ``kernel.tools.registry``'s ``ToolRegistry``, ``ToolContext``,
``ToolOutcome``, ``ToolReply`` and ``CONTEXT_ARG``; ``kernel.tools.repair.
repair_arguments``; ``kernel.tools.schema``'s ``Declaration``, ``from_signature`` and
``from_json_schema`` (a tool's arguments declared once: the pydantic model that checks
them and the JSON schema offered) with ``kernel.tools.arguments.check``; the built-in
tool modules ``kernel.tools.ask`` (``ask_user``), ``kernel.tools.memory`` (the memory
tools) and ``kernel.tools.todo`` (``todo_write``, the visible plan), registered like any
extension's.
"""
