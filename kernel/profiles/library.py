"""Personas, projects and sub-agents as files beside config.toml (issue 18):
``personas/<name>.md``, ``projects/<name>.md``, ``agents/<name>.md``, each a front matter
between ``---`` lines and a body of instructions.

Front matter keys: ``name`` (the file's name), ``description`` (one line, required),
``tools`` (an allow-list: ``web_search, memory_*`` or ``[a, b]``; ``[]`` is none; unset:
every tool), ``model`` (``"provider:model"``), ``reasoning`` (``off|low|medium|high`` or
a token budget of at least 1024), and for a project ``folder`` (its working folder). A
key Kernel does not read is a problem, not ignored: a misspelt ``tool:`` must never
silently lift an allow-list. Files are read on demand in a worker thread (cached by
mtime and size), so an edit counts from the next turn.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG
from typing import Literal

from kernel.core.errors import ProfileError
from kernel.core.fileio import write_atomic
from kernel.core.i18n import t
from kernel.core.provider import MIN_THINKING_BUDGET

Kind = Literal["persona", "project", "agent"]
KINDS: tuple[Kind, ...] = ("persona", "project", "agent")
FOLDERS: dict[Kind, str] = {"persona": "personas", "project": "projects", "agent": "agents"}
SUFFIX = ".md"
MAX_PROFILE_BYTES = 64 * 1024  # prompt text: bigger is a mistake
MAX_DESCRIPTION = 300
LEVELS = ("off", "low", "medium", "high")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_TOOL = re.compile(r"[A-Za-z0-9_*-]{1,64}")
_KEYS: dict[Kind, tuple[str, ...]] = {
    "persona": ("name", "description", "tools", "model", "reasoning"),
    "project": ("name", "description", "folder"),
    "agent": ("name", "description", "tools", "model", "reasoning"),
}


def valid_name(name: str) -> bool:
    """Letters, digits, ``-`` and ``_``: never a path."""
    return bool(_NAME.fullmatch(name))


@dataclass(frozen=True, slots=True)
class Profile:
    kind: Kind
    name: str
    description: str = ""
    body: str = ""  # the instructions after the front matter
    tools: tuple[str, ...] | None = None  # names or globs; None: every tool
    model: str = ""  # "provider:model" ("" the usual choice)
    reasoning: str | int | None = None
    folder: str = ""  # a project's working folder as written ("" none)
    size: int = 0
    modified: datetime | None = None
    problem: str = ""  # why it cannot be used; "" when it can

    @property
    def usable(self) -> bool:
        return not self.problem

    @property
    def source(self) -> str:
        """Where it lives, relative to config.toml's folder."""
        return f"{FOLDERS[self.kind]}/{self.name}{SUFFIX}"

    def allows(self, tool: str) -> bool:
        """Whether the allow-list lets ``tool`` be offered and run."""
        if self.tools is None:
            return True
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.tools)

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "name": self.name,
            "description": self.description,
            "tools": list(self.tools) if self.tools is not None else None,
            "model": self.model,
            "reasoning": self.reasoning,
            "body": self.body,
            "source": self.source,
            "problem": self.problem,
        }
        if self.kind == "project":
            out["folder"] = self.folder
            for key in ("tools", "model", "reasoning"):
                del out[key]
        return out


def parse_tools(value: str) -> tuple[str, ...]:
    """``a, b`` or ``[a, b]`` → ("a", "b"); ValueError naming a bad entry."""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    items = [item.strip().strip("\"'") for item in text.split(",")]
    names = tuple(item for item in items if item)
    for name in names:
        if not _TOOL.fullmatch(name):
            raise ValueError(name[:64])
    return names


def parse_reasoning(value: str) -> str | int:
    """A level or a token budget; ValueError otherwise."""
    text = value.strip().lower()
    if text in LEVELS:
        return text
    if text.isascii() and text.isdigit() and int(text) >= MIN_THINKING_BUDGET:
        return int(text)
    raise ValueError(value[:40])


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def parse_profile(kind: Kind, name: str, text: str) -> Profile:
    """The profile in ``text`` (a file's content); ``problem`` says what is wrong."""
    lines = text.replace("\r\n", "\n").split("\n")
    profile = Profile(kind, name)
    if not lines or lines[0].strip() != "---":
        return replace(profile, problem=t("profile.no_front_matter"))
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), -1)
    if end < 0:
        return replace(profile, problem=t("profile.no_front_matter"))
    body = "\n".join(lines[end + 1 :]).strip("\n")
    profile = replace(profile, body=body)
    meta: dict[str, str] = {}
    for number in range(1, end):
        line = lines[number].strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if not sep or not key:
            return replace(profile, problem=t("profile.bad_line", line=number + 1))
        if key not in _KEYS[kind]:
            known = ", ".join(_KEYS[kind])
            return replace(profile, problem=t("profile.unknown_key", key=key[:40], known=known))
        meta[key] = _unquote(value.strip())
    description = meta.get("description", "")
    if not description:
        return replace(profile, problem=t("profile.no_description"))
    profile = replace(profile, description=description[:MAX_DESCRIPTION])
    if meta.get("name", name) != name:
        return replace(
            profile, problem=t("profile.name_mismatch", got=meta["name"][:64], name=name)
        )
    if kind == "agent" and "tools" not in meta:
        # A sub-agent runs alone: what it may do is said, never assumed ("[*]": all).
        return replace(profile, problem=t("profile.agent_needs_tools"))
    if "tools" in meta:
        try:
            profile = replace(profile, tools=parse_tools(meta["tools"]))
        except ValueError as exc:
            return replace(profile, problem=t("profile.bad_tool", tool=str(exc)))
    if meta.get("reasoning"):
        try:
            profile = replace(profile, reasoning=parse_reasoning(meta["reasoning"]))
        except ValueError:
            return replace(profile, problem=t("profile.bad_reasoning"))
    return replace(profile, model=meta.get("model", ""), folder=meta.get("folder", ""))


def render_profile(profile: Profile) -> str:
    """The file text for ``profile`` (what :func:`parse_profile` reads back)."""
    lines = ["---", f"name: {profile.name}", f"description: {profile.description}"]
    if profile.tools is not None:
        lines.append(f"tools: [{', '.join(profile.tools)}]")
    if profile.model:
        lines.append(f"model: {profile.model}")
    if profile.reasoning is not None:
        lines.append(f"reasoning: {profile.reasoning}")
    if profile.folder:
        lines.append(f"folder: {profile.folder}")
    lines.append("---")
    return "\n".join(lines) + "\n\n" + profile.body.strip("\n") + "\n"


class ProfileLibrary:
    """The profiles of one kind, under one folder (``personas/`` beside config.toml)."""

    def __init__(self, folder: Path, kind: Kind) -> None:
        self.folder = folder
        self.kind = kind
        self._lock = asyncio.Lock()  # one change at a time
        self._parsed: dict[str, tuple[tuple[int, int], Profile]] = {}

    # ----- reading (always in a worker thread) --------------------------------------

    def _load(self, name: str) -> Profile | None:
        path = self.folder / f"{name}{SUFFIX}"
        try:
            stat = path.stat()
        except OSError:
            self._parsed.pop(name, None)
            return None
        if not S_ISREG(stat.st_mode):
            self._parsed.pop(name, None)
            return None
        modified = datetime.fromtimestamp(stat.st_mtime, UTC)
        if stat.st_size > MAX_PROFILE_BYTES:
            problem = t("profile.too_large", limit=MAX_PROFILE_BYTES)
            return Profile(self.kind, name, size=stat.st_size, modified=modified, problem=problem)
        version = (stat.st_mtime_ns, stat.st_size)
        cached = self._parsed.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            text = path.read_bytes()[:MAX_PROFILE_BYTES].decode("utf-8-sig")
        except UnicodeDecodeError:
            problem = t("profile.not_utf8")
            return Profile(self.kind, name, size=stat.st_size, modified=modified, problem=problem)
        except OSError:
            return None
        profile = replace(
            parse_profile(self.kind, name, text), size=stat.st_size, modified=modified
        )
        self._parsed[name] = (version, profile)
        return profile

    def scan(self) -> list[Profile]:
        """Every profile of this kind, read now (blocking: call it in a thread, or once
        at start-up as config.toml is read)."""
        try:
            files = sorted(os.listdir(self.folder))
        except OSError:  # no folder yet
            return []
        kept = {file.removesuffix(SUFFIX) for file in files}
        for gone in [name for name in list(self._parsed) if name not in kept]:
            self._parsed.pop(gone, None)  # deleted profiles are not kept parsed
        found = []
        for file in files:
            name = file.removesuffix(SUFFIX)
            if file.startswith(".") or not file.endswith(SUFFIX) or not valid_name(name):
                continue
            profile = self._load(name)
            if profile is not None:
                found.append(profile)
        return found

    async def all(self) -> list[Profile]:
        """Every profile of this kind, usable or not (``problem`` says why not)."""
        return await asyncio.to_thread(self.scan)

    async def find(self, name: str) -> Profile | None:
        """The profile called ``name`` (usable or not); None when there is none."""
        if not valid_name(name):
            return None
        return await asyncio.to_thread(self._load, name)

    async def get(self, name: str) -> Profile:
        """The usable profile ``name``; ProfileError naming the usable ones otherwise."""
        profile = await self.find(name)
        if profile is None:
            raise await self.unknown(name)
        if profile.problem:
            raise ProfileError(
                "profile_invalid",
                t(
                    "profile.unusable",
                    kind=t(f"profile.kind.{self.kind}"),
                    name=name,
                    problem=profile.problem,
                ),
                {"kind": self.kind, "name": name},
            )
        return profile

    async def unknown(self, name: str) -> ProfileError:
        available = [p.name for p in await self.all() if p.usable]
        message = t(
            "profile.unknown",
            kind=t(f"profile.kind.{self.kind}"),
            name=name[:64],
            available=", ".join(available) or "-",
            folder=FOLDERS[self.kind],
        )
        details: dict[str, object] = {"kind": self.kind, "name": name[:64], "available": available}
        return ProfileError("profile_not_found", message, details)

    # ----- changes ------------------------------------------------------------------

    async def save(self, profile: Profile, *, create: bool) -> Profile:
        """Write ``profile`` (``create``: refused when it exists; else: refused when it
        does not). The text is checked by reading it back: what is saved is usable."""
        if not valid_name(profile.name):
            raise ProfileError(
                "profile_invalid_name", t("profile.bad_name", name=profile.name[:80])
            )
        text = render_profile(profile)
        if len(text.encode("utf-8")) > MAX_PROFILE_BYTES:
            raise ProfileError("profile_too_large", t("profile.too_large", limit=MAX_PROFILE_BYTES))
        for value in (profile.description, profile.model, profile.folder, *(profile.tools or ())):
            if "\n" in value or "\r" in value:
                # A line break would start a key of its own ("model: x\ntools: [*]"
                # lifting an allow-list): every front matter value is one line.
                raise ProfileError("invalid_request", t("profile.one_line"))
        check = parse_profile(self.kind, profile.name, text)
        if check.problem:
            raise ProfileError("invalid_request", check.problem)
        fields = ("description", "tools", "model", "reasoning", "folder")
        if any(getattr(check, f) != getattr(profile, f) for f in fields):
            # What would be read back is not what was asked (quotes, spaces): refused
            # rather than saved as something else.
            raise ProfileError("invalid_request", t("profile.not_kept"))
        async with self._lock:
            await asyncio.to_thread(self._write, profile.name, text, create)
        return await self.get(profile.name)

    def _write(self, name: str, text: str, create: bool) -> None:
        path = self.folder / f"{name}{SUFFIX}"
        exists = path.exists() or path.is_symlink()
        if create and exists:
            raise ProfileError(
                "profile_exists",
                t("profile.exists", kind=t(f"profile.kind.{self.kind}"), name=name),
                {"kind": self.kind, "name": name},
            )
        if not create and not exists:
            raise ProfileError(
                "profile_not_found",
                t(
                    "profile.unknown",
                    kind=t(f"profile.kind.{self.kind}"),
                    name=name,
                    available="-",
                    folder=FOLDERS[self.kind],
                ),
                {"kind": self.kind, "name": name},
            )
        if path.is_symlink():  # never write through a link to somewhere else
            path.unlink()
        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text.encode("utf-8"), mode=0o644)

    async def delete(self, name: str) -> None:
        if await self.find(name) is None:
            raise await self.unknown(name)
        async with self._lock:
            await asyncio.to_thread((self.folder / f"{name}{SUFFIX}").unlink, True)
