"""``[prompts]`` (further system layers from files) and ``[features]`` (seed 000's flags,
each with the environment variable the seed names)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from kernel.config.schema import Env, Label, Section

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _flag(value: object) -> object:
    """A flag may come as text (the environment): true/false, 1/0, yes/no, on/off."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError("not a flag")
    return value


Flag = Annotated[bool, BeforeValidator(_flag), Label("bool")]


class PromptsConfig(Section):
    """``[prompts]``: system layers read from files after ``SOUL.md`` and
    ``prompts/AGENTS.md``, in this order."""

    layers: list[str] = Field(
        default_factory=list,
        description="further layer files, relative to config.toml's folder; a missing or "
        "empty one is skipped with a warning",
    )


class FeaturesConfig(Section):
    """``[features]``: what ``GET /runtime-config`` reports and what it switches."""

    # Off unless asked, as seed 000 says (issue 38): templates and the layer listing
    # are tools for an owner who writes prompts, not part of every chat.
    prompt_templates: Annotated[Flag, Env("NEXTAI_ENABLE_PROMPT_TEMPLATES")] = Field(
        False, description="/prompts:<name> KEY=VALUE expands prompts/<name>.md"
    )
    prompt_context_introspect: Annotated[Flag, Env("NEXTAI_ENABLE_PROMPT_CONTEXT_INTROSPECT")] = (
        Field(False, description="GET /agent/system-layers answers")
    )
    environment_context: Annotated[Flag, Env("NEXTAI_ENABLE_ENVIRONMENT_CONTEXT")] = Field(
        False,
        description="a system layer saying the working folder, the OS, the shell and the "
        "date (nothing secret)",
    )
    codex_mode_v2: Annotated[Flag, Env("NEXTAI_ENABLE_CODEX_MODE_V2")] = Field(
        False,
        description="prompt mode codex layers seven files (codex_v2) instead of its base "
        "and prompts/AGENTS.md (codex_v1)",
    )
    codex_prompt_source: Annotated[
        Literal["file", "catalog"], Env("NEXTAI_CODEX_PROMPT_SOURCE")
    ] = Field(
        "file",
        description="codex_v2's model instructions: the template file, or "
        "prompts/codex/models.runtime.json (the active model's entry)",
    )
    codex_prompt_shadow_compare: Annotated[Flag, Env("NEXTAI_CODEX_PROMPT_SHADOW_COMPARE")] = Field(
        False,
        description="with the file source, also build the catalog's and log "
        "codex_prompt_shadow_diff when they differ (the answer is unchanged)",
    )


def layer_paths(prompts: PromptsConfig, base: Path) -> list[Path]:
    """The configured layer files, relative to ``base`` (config.toml's folder)."""
    out: list[Path] = []
    for name in prompts.layers:
        path = Path(name).expanduser()
        out.append(path if path.is_absolute() else base / path)
    return out


def missing_layers(prompts: PromptsConfig, base: Path) -> list[str]:
    """The configured layer files not there now (a warning at load; skipped per turn)."""
    return [
        name
        for name, path in zip(prompts.layers, layer_paths(prompts, base), strict=True)
        if not path.is_file()
    ]
