"""The skills folder: ``skills/<name>/SKILL.md`` with a front matter (``name``,
``description``, optional ``enabled``) and the instructions after it.

Enabled skills are summarised as a system layer; ``/skill/<name>`` anywhere in an owner's
message puts that skill's instructions, wrapped in ``<skill name="…">…</skill>``, before
the message for that turn (the stored history keeps a one-line marker, see
``kernel.agent.slimming``). The folder is read on demand in a worker thread, so an edit
made by hand, by ``/skills`` or by SelfOps counts from the next turn, and the event loop
never waits on the disk.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG

from kernel.core.errors import SkillError
from kernel.core.fileio import write_atomic
from kernel.core.i18n import t

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 64 * 1024  # a skill is prompt text: bigger is a mistake, not a skill
MAX_DESCRIPTION = 300
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# "/skill/<name>" as a word of its own: not inside a URL or a path such as a/skill/b.
_REF = re.compile(r"(?<!\S)/skill/(\S*)")
_TRAILING = ".,;:!?)]}>'\"，。；：！？）】」』、…"
SKILL_BLOCK = re.compile(r'\A<skill name="([A-Za-z0-9_-]{1,64})">\n.*\n</skill>\Z', re.DOTALL)
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def valid_name(name: str) -> bool:
    """Letters, digits, ``-`` and ``_``: never a path (no ``/``, ``\\``, ``.``)."""
    return bool(_NAME.fullmatch(name))


def skill_refs(text: str) -> list[str]:
    """The names after ``/skill/`` in ``text``, in order, each once (trailing
    punctuation, as in "use /skill/tidy, please", is not part of the name)."""
    names: list[str] = []
    for match in _REF.finditer(text):
        name = match.group(1).rstrip(_TRAILING)
        if name not in names:
            names.append(name)
    return names


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    enabled: bool
    body: str  # the instructions after the front matter
    size: int
    modified: datetime
    problem: str = ""  # why it cannot be used; "" when it can

    @property
    def usable(self) -> bool:
        return self.enabled and not self.problem


_CLOSING_TAG = re.compile(r"</\s*(skill\s*)>", re.IGNORECASE)


def wrap_skill(skill: Skill) -> str:
    """The skill as the model sees it: its boundaries marked, a closing tag inside the
    text neutralised so the block cannot be ended early."""
    body = _CLOSING_TAG.sub(lambda m: "<\\/" + m.group(1), skill.body)
    return f'<skill name="{skill.name}">\n{body}\n</skill>'


def render_skill(name: str, description: str, enabled: bool, body: str) -> str:
    state = "true" if enabled else "false"
    front = f"---\nname: {name}\ndescription: {description}\nenabled: {state}\n---\n"
    return front + "\n" + body.strip("\n") + "\n"


def check_description(description: str) -> str:
    text = description.strip()
    if not text or "\n" in text or "\r" in text or len(text) > MAX_DESCRIPTION:
        raise SkillError("invalid_request", t("skill.bad_description", limit=MAX_DESCRIPTION))
    return text


def check_name(name: str) -> None:
    if not valid_name(name):
        raise SkillError("skill_invalid_name", t("skill.bad_name", name=name[:80]), {"name": name})


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _front_matter(lines: list[str]) -> tuple[int, dict[str, str], str]:
    """(index of the closing ``---``, the keys, a problem or "")."""
    if not lines or lines[0].strip() != "---":
        return -1, {}, t("skill.no_front_matter")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), -1)
    if end < 0:
        return -1, {}, t("skill.no_front_matter")
    meta: dict[str, str] = {}
    for number in range(1, end):
        line = lines[number].strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            return end, meta, t("skill.bad_front_matter", line=number + 1)
        meta[key.strip().lower()] = _unquote(value.strip())
    return end, meta, ""


def parse_skill(name: str, text: str, size: int, modified: datetime) -> Skill:
    lines = text.replace("\r\n", "\n").split("\n")
    end, meta, problem = _front_matter(lines)
    body = "\n".join(lines[end + 1 :]).strip("\n") if end >= 0 else ""
    description = meta.get("description", "")
    enabled_text = meta.get("enabled", "true").lower()
    enabled = enabled_text not in _FALSE
    if not problem:
        if not description:
            problem = t("skill.no_description")
        elif meta.get("name", name) != name:
            problem = t("skill.name_mismatch", got=meta["name"], name=name)
        elif enabled_text not in _TRUE + _FALSE:
            problem = t("skill.bad_enabled")
    return Skill(name, description, enabled, body, size, modified, problem)


def _atomic_write(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"), mode=0o644)


class SkillLibrary:
    """The skills under one folder (``skills/`` beside config.toml)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = asyncio.Lock()  # one change at a time
        # Parsed skills by name with the (mtime, size) they were read at: each turn
        # lists the folder, but re-reads only a SKILL.md that changed.
        self._parsed: dict[str, tuple[tuple[int, int], Skill]] = {}

    # ----- reading (always in a worker thread) --------------------------------------

    def _load(self, name: str) -> Skill | None:
        path = self.folder / name / SKILL_FILE
        try:
            stat = path.stat()
        except OSError:
            self._parsed.pop(name, None)
            return None
        if not S_ISREG(stat.st_mode):
            self._parsed.pop(name, None)
            return None
        modified = datetime.fromtimestamp(stat.st_mtime, UTC)
        if not valid_name(name):
            return Skill(name, "", False, "", stat.st_size, modified, t("skill.bad_folder"))
        if stat.st_size > MAX_SKILL_BYTES:
            problem = t("skill.too_large", limit=MAX_SKILL_BYTES)
            return Skill(name, "", False, "", stat.st_size, modified, problem)
        version = (stat.st_mtime_ns, stat.st_size)
        cached = self._parsed.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            text = path.read_bytes()[:MAX_SKILL_BYTES].decode("utf-8-sig")
        except UnicodeDecodeError:
            return Skill(name, "", False, "", stat.st_size, modified, t("skill.not_utf8"))
        except OSError:
            return None
        skill = parse_skill(name, text, stat.st_size, modified)
        self._parsed[name] = (version, skill)
        return skill

    def _scan(self) -> list[Skill]:
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:  # no skills folder yet
            return []
        kept = set(names)
        for gone in [name for name in list(self._parsed) if name not in kept]:
            self._parsed.pop(gone, None)  # deleted skills are not kept parsed
        found = []
        for name in names:
            if name.startswith("."):
                continue
            skill = self._load(name)
            if skill is not None:
                found.append(skill)
        return found

    async def all(self) -> list[Skill]:
        """Every skill, usable or not (``problem`` says why not)."""
        return await asyncio.to_thread(self._scan)

    async def get(self, name: str) -> Skill:
        check_name(name)
        skill = await asyncio.to_thread(self._load, name)
        if skill is None:
            raise await self._unknown([name])
        return skill

    async def summary(self) -> str:
        """The system layer: one line per usable skill; "" when there is none."""
        return await asyncio.to_thread(self.summary_now)

    def summary_now(self) -> str:
        """:meth:`summary`, blocking (it scans the folder): call it in a thread."""
        usable = [s for s in self._scan() if s.usable]
        if not usable:
            return ""
        lines = [f"- {s.name}: {s.description}" for s in usable]
        return t("skill.layer_header") + "\n" + "\n".join(lines)

    async def invoked(self, text: str) -> list[Skill]:
        """The skills ``text`` names with ``/skill/<name>``, in order. A name that is not
        a usable skill raises SkillError naming it and the available ones: the owner
        asked for that skill, and a turn without it would answer something else."""
        refs = skill_refs(text)
        if not refs:
            return []

        def load_named() -> list[Skill | None]:
            # A name that is not a valid skill name is never a path to look at.
            return [self._load(name) if valid_name(name) else None for name in refs]

        found = await asyncio.to_thread(load_named)
        unknown = [name for name, skill in zip(refs, found, strict=True) if skill is None]
        if unknown:
            raise await self._unknown(unknown)
        chosen = [skill for skill in found if skill is not None]
        for skill in chosen:
            if skill.problem:
                raise SkillError(
                    "skill_invalid",
                    t("skill.unusable", name=skill.name, problem=skill.problem),
                    {"skill": skill.name},
                )
            if not skill.enabled:
                raise SkillError(
                    "skill_disabled", t("skill.disabled", name=skill.name), {"skill": skill.name}
                )
        return chosen

    async def _unknown(self, names: list[str], skills: list[Skill] | None = None) -> SkillError:
        if skills is None:
            skills = await self.all()
        available = [s.name for s in skills if s.usable]
        shown = ", ".join(n[:64] or "''" for n in names)
        message = t("skill.unknown", name=shown, available=", ".join(available) or "-")
        return SkillError("skill_not_found", message, {"skills": names, "available": available})

    # ----- changes ------------------------------------------------------------------

    async def create(self, name: str, description: str, body: str, enabled: bool = True) -> Skill:
        check_name(name)
        description = check_description(description)
        text = render_skill(name, description, enabled, body)
        if len(text.encode("utf-8")) > MAX_SKILL_BYTES:
            raise SkillError("skill_too_large", t("skill.too_large", limit=MAX_SKILL_BYTES))
        async with self._lock:
            await asyncio.to_thread(self._create, name, text)
        return await self.get(name)

    def _create(self, name: str, text: str) -> None:
        folder = self.folder / name
        if (folder / SKILL_FILE).exists() or folder.is_symlink() or folder.is_file():
            raise SkillError("skill_exists", t("skill.exists", name=name), {"skill": name})
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / SKILL_FILE, text)

    async def set_enabled(self, name: str, enabled: bool) -> Skill:
        skill = await self.get(name)
        if skill.problem:
            raise SkillError(
                "skill_invalid",
                t("skill.unusable", name=name, problem=skill.problem),
                {"skill": name},
            )
        if skill.enabled != enabled:
            async with self._lock:
                await asyncio.to_thread(self._toggle, name, enabled)
        return await self.get(name)

    def _toggle(self, name: str, enabled: bool) -> None:
        """Rewrite only the ``enabled`` line of the front matter; the rest stays as written."""
        path = self.folder / name / SKILL_FILE
        lines = path.read_text(encoding="utf-8-sig").replace("\r\n", "\n").split("\n")
        end, _, _ = _front_matter(lines)
        line = f"enabled: {'true' if enabled else 'false'}"
        at = next(
            (i for i in range(1, end) if lines[i].strip().lower().startswith("enabled:")), None
        )
        if at is None:
            lines.insert(end, line)
        else:
            lines[at] = line
        _atomic_write(path, "\n".join(lines))

    async def delete(self, name: str) -> None:
        await self.get(name)  # unknown or badly named: refused with the available ones
        async with self._lock:
            await asyncio.to_thread(self._delete, name)

    def _delete(self, name: str) -> None:
        folder = self.folder / name
        if folder.is_symlink():  # a linked skill: remove the link, never what it points at
            folder.unlink()
        else:
            shutil.rmtree(folder)
