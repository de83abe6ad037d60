"""The agent core: turns, sessions, model choice, context. Knows no channel and no SDK.

Public API (what other packages import):

- ``kernel.agent.agent``: :class:`Agent` (the facade: turns, sessions, provider and model
  choice), :class:`UserInput`, :class:`SessionKey`, :class:`OpenedSession`,
  :class:`SelectionError`, ``MODEL_OVERRIDE``, ``SKILLS_FOLDER``.
- ``kernel.agent.context``: :class:`Layer` (a system-prompt layer and its hashes).
- ``kernel.agent.slimming``: ``wrap_file``, ``summarize_tool_result``, ``slim_message``.
- ``kernel.agent.titles``: :class:`TitleMaker`.

Inside the package, one idea a module: ``models`` (provider pool, active and per-session
model), ``sessions`` (conversations, sessions, waiting for a turn), ``prompt`` (the
system layers), ``turn`` (one turn's loop, given its collaborators explicitly), and
``agent`` wiring them.
"""
