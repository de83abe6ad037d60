"""The agent core: turns, sessions, model choice, context. Knows no channel and no SDK.

Public API (what other packages import):

- ``kernel.agent.agent``: :class:`Agent` (turns: ``start_turn``, ``retry``; and its parts,
  handed out as services: ``agent.sessions`` (:class:`~kernel.agent.sessions.Sessions`:
  conversations, sessions, busy, waiting, cancel), ``agent.selection``
  (:class:`~kernel.agent.models.ModelSelection`: provider and model choice),
  ``agent.control`` (:class:`~kernel.agent.rewind.ConversationControl`: undo, rewind,
  branches), ``agent.scopes`` (:class:`~kernel.agent.scope.Scopes`: personas, projects,
  prompt modes), ``agent.meter`` (spend), ``agent.prompt`` (the system layers)),
  :class:`UserInput`, :class:`SessionKey`, :class:`OpenedSession`, :class:`SelectionError`,
  ``MODEL_OVERRIDE``, ``SKILLS_FOLDER``.
- ``kernel.agent.turn_parts``: :class:`UserInput` (its home: what a turn is given).
- ``kernel.agent.context``: :class:`Layer` (a system-prompt layer and its hashes).
- ``kernel.agent.slimming``: ``wrap_file``, ``summarize_tool_result``, ``slim_message``.
- ``kernel.agent.titles``: :class:`TitleMaker`.

Inside the package, one idea a module: ``models`` (provider pool, active and per-session
model), ``sessions`` (conversations, sessions, waiting for a turn), ``prompt`` (the
system layers), ``turn`` (one turn's loop, given its collaborators explicitly in
``turn_parts``), ``turn_tools`` (a step's tool calls), and ``agent`` wiring them.
"""
