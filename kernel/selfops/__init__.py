"""SelfOps (seed 000): the assistant changing its own prompts, skills and model settings
through previews the owner (or the agent) confirms.

Public API: :class:`Mutations` (preview, then apply) and
``kernel.selfops.mutations.TARGETS``. ``sensitive`` holds what a change
counts as sensitive and how a preview masks it."""

from kernel.selfops.mutations import Mutations

__all__ = ["Mutations"]
