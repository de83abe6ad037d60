"""Skills (seed 002 "Skills System"): ``skills/<name>/SKILL.md`` beside config.toml."""

from kernel.skills.library import (
    MAX_SKILL_BYTES,
    Skill,
    SkillLibrary,
    skill_refs,
    valid_name,
    wrap_skill,
)

__all__ = ["MAX_SKILL_BYTES", "Skill", "SkillLibrary", "skill_refs", "valid_name", "wrap_skill"]
