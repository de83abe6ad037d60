"""Delegation of real work to coding-agent CLIs (SPEC §7, seed 003): the runner, one
formatter per CLI's JSONL stream, the Delegator the Kernel owns, and the tool.

Public API: ``kernel.delegate.delegator``'s ``Delegator``, ``DEFAULT_CLI`` and
``child_env``; ``kernel.delegate.outcome``'s ``Delegation`` (one run, as channels read
it); ``kernel.delegate.tool`` (the ``delegate_to_cli`` tool);
``kernel.delegate.formats``'s ``Trouble``, ``display_name`` and ``strip_ansi``;
``kernel.delegate.argv``'s ``args_problem`` and ``GEMINI_PROMPT`` (checked at config
load); ``kernel.delegate.adapters``'s ``CliAdapter``, ``register_adapter`` and
``adapter_for`` (one adapter per CLI, a plugin's added through ``Plugins.add_cli``);
``kernel.delegate.instructions``'s ``instructions_for`` and its limits (the
instructions a CLI gets).
"""
