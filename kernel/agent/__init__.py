"""The agent core: turns, sessions, context. Knows no channel and no SDK.

Public API: ``kernel.agent.agent``'s :class:`Agent` (the facade every channel talks to:
sessions, provider and model choice, ``run_turn``), ``OpenedSession``, ``SessionKey``,
``UserInput``, ``SelectionError``, ``MODEL_OVERRIDE`` and ``SKILLS_FOLDER``;
``kernel.agent.context.Layer`` (a system-prompt layer); ``kernel.agent.slimming``'s
``summarize_tool_result`` and ``wrap_file``; ``kernel.agent.titles.TitleMaker``.
"""
