"""Tools the model may call.

Public API:

- :mod:`kernel.tools.registry`: ``ToolRegistry`` (``tool`` / ``register`` / ``call``,
  ``specs``, ``disable``, ``require_approval``), ``ToolContext``, ``ToolReply``,
  ``ToolOutcome``, ``CONTEXT_ARG``;
- :mod:`kernel.tools.schema`: a tool's arguments declared once (``Declaration``: the
  pydantic model and the JSON schema offered), ``from_signature``, ``from_json_schema``;
- :mod:`kernel.tools.arguments`: ``check`` (arguments against a declaration, refusals in
  words the model can act on);
- :mod:`kernel.tools.repair`: ``repair_arguments``, ``resolve_tool_name``;
- built-in tools registered like an extension's: :mod:`kernel.tools.memory`,
  :mod:`kernel.tools.ask` (``register``).
"""
