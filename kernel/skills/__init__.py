"""Skills (seed 002 "Skills System"): ``skills/<name>/SKILL.md`` beside config.toml.

Public API: the names below, and ``kernel.skills.library.SKILL_BLOCK``.
"""

from kernel.skills.library import (
    MAX_SKILL_BYTES,
    Skill,
    SkillLibrary,
    skill_refs,
    valid_name,
    wrap_skill,
)

__all__ = ["MAX_SKILL_BYTES", "Skill", "SkillLibrary", "skill_refs", "valid_name", "wrap_skill"]
