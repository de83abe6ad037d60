"""SelfOps (seed 000): the assistant changing its own prompts, skills and model settings
through previews the owner (or the agent) confirms.

Public API: :class:`Mutations` and ``kernel.selfops.mutations.TARGETS``.
"""

from kernel.selfops.mutations import Mutations

__all__ = ["Mutations"]
