"""Kernel's bottom layer: shared types, errors, the message catalogue, secrets and
the small utilities every other package may use. Imports nothing else of Kernel.

Public API, by module: ``messages`` (Message, the content blocks, ToolSpec, their
JSON form), ``events`` (TurnEvent and its kinds), ``asks`` (Question, Answer,
AskRegistry), ``turns`` (Turn), ``errors`` (the KernelError tree), ``i18n`` (``t``,
the zh/en catalogue), ``provider`` (the Provider interface, ChatRequest, stream
events, ``stream_with_retry``), ``delivery`` (outbound channel plugins and their
registry), ``tasks`` (TaskSet), ``clock`` (``sleep_unless``), ``backoff`` (Backoff,
Retrying), ``ports`` (the narrow interfaces adapters receive), ``fileio``
(``write_atomic``), ``safejson``, ``redact`` and ``logs``.
"""
