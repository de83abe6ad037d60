"""Prompt modes (issue 20, seed 000): a session's system prompt built the ``default``
way (SOUL.md and Kernel's layers), or from files the owner put under ``prompts/``:

- ``codex``: a checkout of openai/codex at ``prompts/codex`` — ``codex_v1`` is its base
  prompt and ``prompts/AGENTS.md`` (and, with ``[features] prompt_templates``, the
  collaboration mode's template); ``codex_v2`` (``[features] codex_mode_v2``) seven
  layers in a fixed order. A collaboration mode (default, plan, execute,
  pair_programming) belongs to ``codex`` only: in ``plan`` the model may ask the owner
  (Codex's ``request_user_input`` is Kernel's ``ask_user``), in the others it may not.
- ``claude``: four required files of ``prompts/claude/claude-code-reverse`` and an
  optional tool adapter (``claude_v1``).

Kernel ships none of these texts. A required file missing or empty is
``codex_prompt_unavailable`` / ``claude_prompt_unavailable`` (HTTP 500, as the seed
says), naming the file; an optional one is skipped. Both modes replace the default
system layers (not the volatile memories and time, nor the tool definitions); a layer
whose normalised text repeats an earlier one's is dropped.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kernel.agent.context import Layer
from kernel.agent.prompt_files import AGENTS_FILE, FOLDER, LayerFile, PromptFiles
from kernel.config.prompts import FeaturesConfig
from kernel.core.errors import PromptError
from kernel.core.i18n import t

log = logging.getLogger(__name__)

PROMPT_MODES = ("default", "codex", "claude")
COLLABORATION_MODES = ("default", "plan", "execute", "pair_programming")
COLLABORATION_EVENTS = {f"set_{mode}": mode for mode in COLLABORATION_MODES}
TASK_COMMANDS = ("review", "compact", "memory")
ASK_TOOL = "ask_user"  # Codex's request_user_input
MODE_KEY = "prompt_mode"  # the session meta's keys
COLLABORATION_KEY = "collaboration_mode"

CODEX = "codex/codex-rs/core"
CODEX_BASE = f"{CODEX}/prompt.md"
CODEX_TEMPLATES = f"{CODEX}/templates"
INSTRUCTIONS = f"{CODEX_TEMPLATES}/model_instructions/gpt-5.2-codex_instructions_template.md"
PERSONALITY = f"{CODEX_TEMPLATES}/personalities/gpt-5.2-codex_pragmatic.md"
CATALOG = "codex/models.runtime.json"
CATALOG_SLUG = "gpt-5.2-codex"  # when the active model has no entry
MAX_CATALOG_BYTES = 8 * 1024 * 1024
TASK_FILES = {
    "review": f"{CODEX}/review_prompt.md",
    "compact": f"{CODEX_TEMPLATES}/compact/prompt.md",
    "memory": f"{CODEX_TEMPLATES}/memories/stage_one_system.md",
}
CLAUDE = "claude/claude-code-reverse"
CLAUDE_REQUIRED = (
    ("claude_identity_system", "system-identity"),
    ("claude_workflow_system", "system-workflow"),
    ("claude_reminder_start_system", "system-reminder-start"),
    ("claude_reminder_end_system", "system-reminder-end"),
)
# {{ NAME }} as Codex's templates write it; only the names a layer gives are filled in.
VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True, slots=True)
class ModeChoice:
    """A session's prompt mode and (under ``codex``) its collaboration mode; a task
    command (review, compact, memory) only estimates a Codex task's layers."""

    mode: str = "default"
    collaboration: str = "default"
    task: str | None = None

    @classmethod
    def of_meta(cls, meta: dict[str, Any]) -> ModeChoice:
        """The session meta's choice; a value Kernel does not know reads as default."""
        mode = meta.get(MODE_KEY)
        collaboration = meta.get(COLLABORATION_KEY)
        return cls(
            mode if mode in PROMPT_MODES else "default",
            collaboration if collaboration in COLLABORATION_MODES else "default",
        )

    @property
    def asks(self) -> bool:
        """Whether ``ask_user`` is offered: always, except under codex outside plan."""
        return self.mode != "codex" or self.collaboration == "plan"

    def variant(self, features: FeaturesConfig) -> str:
        if self.mode == "codex":
            return "codex_v2" if features.codex_mode_v2 else "codex_v1"
        return "claude_v1" if self.mode == "claude" else "default"


def collaboration_change(mode: str, source: str, now: datetime | None = None) -> dict[str, Any]:
    """The session meta's collaboration keys after switching to ``mode`` (seed 000)."""
    stamp = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    return {
        COLLABORATION_KEY: mode,
        "collaboration_last_event": f"set_{mode}",
        "collaboration_event_source": source,
        "collaboration_updated_at": stamp,
    }


class ModeLayers:
    """Builds a mode's layers from ``prompts/`` through :class:`PromptFiles` (read fresh
    each turn, through its stat cache). Blocking: call :meth:`layers` in a thread."""

    def __init__(self, files: PromptFiles) -> None:
        self.files = files

    @property
    def features(self) -> FeaturesConfig:
        return self.files.config.features

    def _file(self, name: str, relative: str, *, required: bool = False) -> LayerFile:
        return LayerFile(name, self.files.folder / relative, f"{FOLDER}/{relative}", required)

    def layers(self, choice: ModeChoice, tool_guide: str, model: str = "") -> list[Layer]:
        """The stable system layers of ``choice`` (not ``default``); raises PromptError
        ``codex_prompt_unavailable`` / ``claude_prompt_unavailable`` naming the required
        files missing or empty. ``tool_guide``: Kernel's own, codex_v2's fallback when
        ``prompts/ai-tools.md`` is absent. ``model``: the catalog entry to look for."""
        if choice.mode == "claude":
            out = self._claude()
        elif self.features.codex_mode_v2:
            out = self._codex_v2(choice, tool_guide, model)
        else:
            out = self._codex_v1(choice)
        if choice.mode == "codex" and choice.task is not None:
            out += self._read(
                [self._file(f"codex_task_{choice.task}_system", TASK_FILES[choice.task])]
            )
        return _unique(out)

    def _require(self, mode: str, files: list[LayerFile]) -> None:
        missing = self.files.unavailable(files)
        if missing:
            sources = [f.source for f in missing]
            raise PromptError(
                f"{mode}_prompt_unavailable",
                t(f"prompts.{mode}_unavailable", files=", ".join(sources)),
                {"prompt_mode": mode, "missing": sources},
            )

    def _read(self, files: list[LayerFile]) -> list[Layer]:
        return self.files.layers(files)

    def _claude(self) -> list[Layer]:
        required = [
            self._file(name, f"{CLAUDE}/results/prompts/{stem}.prompt.md", required=True)
            for name, stem in CLAUDE_REQUIRED
        ]
        self._require("claude", required)
        adapter = self._file(
            "claude_nextai_tool_adapter_system", f"{CLAUDE}/tool-adapter-nextai.md"
        )
        return self._read([*required, adapter])

    def _base(self) -> LayerFile:
        base = self._file("codex_base_system", CODEX_BASE, required=True)
        self._require("codex", [base])
        return base

    def _policy(self) -> LayerFile:
        return self._file("codex_local_policy_system", AGENTS_FILE)

    def _codex_v1(self, choice: ModeChoice) -> list[Layer]:
        out = self._read([self._base(), self._policy()])
        if self.features.prompt_templates:
            out += self._collaboration(choice)
        return out

    def _codex_v2(self, choice: ModeChoice, tool_guide: str, model: str) -> list[Layer]:
        out = self._read(
            [
                self._base(),
                self._file(
                    "codex_orchestrator_system", f"{CODEX_TEMPLATES}/agents/orchestrator.md"
                ),
            ]
        )
        out += self._instructions(model)
        out += self._collaboration(choice)
        out += self._read(
            [
                self._file(
                    "codex_experimental_collab_system",
                    f"{CODEX_TEMPLATES}/collab/experimental_prompt.md",
                ),
                self._policy(),
            ]
        )
        guide = self._read([self._file("codex_tool_guide_system", "ai-tools.md")])
        if not guide and tool_guide:  # the legacy fallback: Kernel's own guide
            guide = [Layer("codex_tool_guide_system", tool_guide, "tool registry")]
        return out + guide

    def _instructions(self, model: str) -> list[Layer]:
        """codex_model_instructions_system from the template file or the catalog."""
        if self.features.codex_prompt_source == "catalog":
            return self._catalog(model)
        from_file = self._instructions_file()
        if self.features.codex_prompt_shadow_compare:
            self._shadow(from_file, self._catalog(model), model)
        return from_file

    def _instructions_file(self) -> list[Layer]:
        file = self._file("codex_model_instructions_system", INSTRUCTIONS)
        template = self.files.read(file.path, configured=False)
        if not template:
            return []
        personality = self.files.read(self.files.folder / PERSONALITY, configured=False)
        text = render(template, {"personality": personality})
        return [Layer(file.name, text, file.source)] if text else []

    def _catalog(self, model: str) -> list[Layer]:
        """The active model's entry of ``models.runtime.json`` (else gpt-5.2-codex's):
        its instructions template filled with its variables, the pragmatic personality.
        An optional layer: a catalog missing, too large, not a regular file or not in
        the expected shape is warned about and skipped, never an error of the turn."""
        path = self.files.folder / CATALOG
        try:
            if not path.is_file() or path.stat().st_size > MAX_CATALOG_BYTES:
                raise ValueError("not a regular file within the size")
            data = json.loads(path.read_text(encoding="utf-8"))
            entry = _catalog_entry(data, model)
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("codex catalog skipped: %s", type(exc).__name__)
            return []
        if entry is None:
            log.warning("codex catalog has no entry for the active model or %s", CATALOG_SLUG)
            return []
        slug, template, variables = entry
        text = render(template, variables).strip()
        source = f"{FOLDER}/{CATALOG}#{slug}"
        return [Layer("codex_model_instructions_system", text, source)] if text else []

    def _shadow(self, from_file: list[Layer], from_catalog: list[Layer], model: str) -> None:
        file_hash = from_file[0].normalized_hash if from_file else ""
        catalog_hash = from_catalog[0].normalized_hash if from_catalog else ""
        if file_hash != catalog_hash:
            reason = (
                "catalog_missing"
                if not catalog_hash
                else "file_missing"
                if not file_hash
                else "content"
            )
            log.info(
                "codex_prompt_shadow_diff model_slug=%s file_hash=%s catalog_hash=%s"
                " diff_reason=%s",
                model or CATALOG_SLUG,
                file_hash or "-",
                catalog_hash or "-",
                reason,
            )

    def _collaboration(self, choice: ModeChoice) -> list[Layer]:
        """The collaboration mode's template, rendered (seed: KNOWN_MODE_NAMES,
        REQUEST_USER_INPUT_AVAILABLE from the mode's capability)."""
        file = self._file(
            "codex_collaboration_default_system",
            f"{CODEX_TEMPLATES}/collaboration_mode/{choice.collaboration}.md",
        )
        text = self.files.read(file.path, configured=False)
        if not text:
            return []
        values = {
            "KNOWN_MODE_NAMES": ", ".join(m.replace("_", " ").title() for m in COLLABORATION_MODES),
            "REQUEST_USER_INPUT_AVAILABLE": "true" if choice.asks else "false",
        }
        return [Layer(file.name, render(text, values), file.source)]


def _catalog_entry(data: object, model: str) -> tuple[str, str, dict[str, str]] | None:
    """(slug, template, variables) of ``model``'s entry (else gpt-5.2-codex's) in a
    parsed catalog: ``{"models": [...]}`` or the list itself; entries of another shape
    are passed over."""
    models = data.get("models") if isinstance(data, dict) else data
    entries: dict[str, dict[str, object]] = {}
    for item in models if isinstance(models, list) else []:
        if isinstance(item, dict) and isinstance(item.get("slug"), str):
            entries.setdefault(item["slug"], item)
    entry = entries.get(model) or entries.get(CATALOG_SLUG)
    if entry is None:
        return None
    messages = entry.get("model_messages")
    messages = messages if isinstance(messages, dict) else {}
    given = messages.get("instructions_variables")
    variables = {
        k: v for k, v in (given if isinstance(given, dict) else {}).items() if isinstance(v, str)
    }
    base = entry.get("base_instructions")
    base = base if isinstance(base, str) else ""
    variables.setdefault("personality", variables.get("personality_pragmatic", ""))
    variables.setdefault("base_instructions", base)
    template = messages.get("instructions_template")
    return str(entry["slug"]), template if isinstance(template, str) else base, variables


def render(template: str, values: dict[str, str]) -> str:
    """``{{ NAME }}`` filled in for the names ``values`` has; others are left as written."""

    def fill(match: re.Match[str]) -> str:
        value = values.get(match.group(1))
        return match.group(0) if value is None else value

    return VARIABLE.sub(fill, template).strip()


def _unique(layers: list[Layer]) -> list[Layer]:
    """Each normalised text once, the earlier layer kept (codex core > policy > tools)."""
    seen: set[str] = set()
    out: list[Layer] = []
    for layer in layers:
        if layer.normalized_hash not in seen:
            seen.add(layer.normalized_hash)
            out.append(layer)
    return out
