"""The prompt's layers (SPEC §4): SOUL.md, prompts/AGENTS.md and the ``[prompts]``
layers (:mod:`~kernel.agent.prompt_files`), the tool guide and the skills summary (the
system prompt, stable from turn to turn so a provider can cache it), then recalled
memories and the local time (volatile: sent with the turn's own message, after the
cached prefix). Each is a :class:`~kernel.agent.context.Layer` that says where its
text came from."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from kernel.agent import soul as soul_sections
from kernel.agent.context import Layer
from kernel.agent.environment import environment_layer
from kernel.agent.prompt_files import PromptFiles
from kernel.agent.prompt_modes import ASK_TOOL, ModeChoice, ModeLayers
from kernel.agent.scope import SUBAGENT_TOOL, Outlook, project_folder
from kernel.config import Config
from kernel.core.errors import KernelError
from kernel.core.fileio import write_atomic
from kernel.core.i18n import CATALOG, LANGUAGES, t
from kernel.memory.memories import MAX_REMEMBERED_PER_TURN, Memories
from kernel.profiles import FOLDERS, Profile, Profiles
from kernel.skills import SkillLibrary
from kernel.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


class SystemPrompt:
    def __init__(
        self,
        config: Config,
        tools: ToolRegistry,
        memories: Memories,
        skills: SkillLibrary,
        clock: Callable[[], datetime],
        tz: ZoneInfo,
        profiles: Profiles | None = None,
    ) -> None:
        self.config = config
        self.tools = tools
        self.memories = memories
        self.skills = skills
        self.profiles = profiles or Profiles.beside(config.base_dir)
        self.files = PromptFiles(config)  # prompts/AGENTS.md, [prompts] layers, templates
        self.modes = ModeLayers(self.files)  # /mode codex | claude: layers from prompts/
        self._clock = clock
        self._tz = tz

    async def layers(
        self,
        query: str = "",
        *,
        guest_tools: tuple[str, ...] | None = None,
        outlook: Outlook | None = None,
        mode: ModeChoice | None = None,
        model: str = "",
        volatile: bool = True,
    ) -> list[Layer]:
        """The layers for a turn whose input is ``query`` (what memories are recalled
        for). ``volatile`` False: without the turn's own (:meth:`volatile`), which a
        turn reads while its message is stored (one database hop). ``guest_tools``: a
        guest's turn, with only those tools, no memories and none of the owner's prompt
        files (prompts/AGENTS.md, the ``[prompts]`` layers).
        ``outlook``: the chat's persona and project, or a sub-agent's own prompt.
        ``mode``: the session's prompt mode (a guest's and a sub-agent's turn are always
        default); codex and claude raise PromptError when their files are not there.
        ``model``: the active model (codex_v2's catalog entry)."""
        outlook = outlook or Outlook()
        layers = await self._lasting(guest_tools, outlook, mode, model)
        if not volatile:
            return layers
        return layers + await self.volatile(query, guest_tools=guest_tools, outlook=outlook)

    async def volatile(
        self, query: str, *, guest_tools: tuple[str, ...] | None, outlook: Outlook
    ) -> list[Layer]:
        """The layers sent with the turn's own message: the memories recalled for
        ``query`` (not for a guest or a sub-agent) and the time."""
        if guest_tools is not None or outlook.agent is not None:
            return [self._time()]
        return await self._volatile(query, outlook)

    async def _lasting(
        self,
        guest_tools: tuple[str, ...] | None,
        outlook: Outlook,
        mode: ModeChoice | None,
        model: str,
    ) -> list[Layer]:
        mode = mode if mode is not None and guest_tools is None and outlook.agent is None else None
        names = self.offered(guest_tools, outlook, mode)
        if outlook.agent is not None:  # a sub-agent: its prompt instead of SOUL.md
            layers = [Layer("agent", outlook.agent.body, outlook.agent.source)]
            if names:
                layers.append(Layer("tools", tool_guide(names), "tool registry"))
            return layers
        if mode is not None and mode.mode != "default":
            guide = tool_guide(names) if names else ""
            layers = await asyncio.to_thread(self.modes.layers, mode, guide, model)
            return layers + self._environment(outlook)
        agents = SUBAGENT_TOOL in names
        soul, files, skills, usable = await asyncio.to_thread(
            self._read_files, guest_tools is None, agents
        )
        layers = [self._soul(soul, names), *files]
        if outlook.persona is not None and outlook.persona.body:
            persona = outlook.persona
            text = t("prompt.persona", name=persona.name) + "\n" + persona.body
            layers.append(Layer("persona", text, persona.source))
        if outlook.project is not None:
            layers.append(self._project(outlook.project))
        layers += self._environment(outlook)
        if names:
            guide = tool_guide(names, layers[0].covers)
            layers.append(Layer("tools", guide, "tool registry"))
        if skills:
            where = relative(self.skills.folder, self.config.base_dir)
            layers.append(Layer("skills", skills, where))
        if usable:
            lines = "\n".join(f"- {a.name}: {a.description}" for a in usable)
            layers.append(Layer("agents", t("prompt.agents") + "\n" + lines, FOLDERS["agent"]))
        return layers

    async def _volatile(self, query: str, outlook: Outlook) -> list[Layer]:
        """Recalled memories and the time: sent with the turn's own message."""
        memories = await self._recall(query, outlook)
        layers = [Layer("memories", memories, "memories", volatile=True)] if memories else []
        return [*layers, self._time()]

    def offered(
        self,
        guest_tools: tuple[str, ...] | None,
        outlook: Outlook,
        mode: ModeChoice | None = None,
    ) -> list[str]:
        """The tools a turn offers: a guest's, the allow-list's, never delegate_task
        without an agent to run; under codex, ask_user only in plan (seed 000)."""
        names = [n for n in self.tools.names() if outlook.allows(n)]
        if guest_tools is not None:
            names = [n for n in names if n in guest_tools]
        if mode is not None and not mode.asks:
            names = [n for n in names if n != ASK_TOOL]
        return names

    def _soul(self, soul: str, names: list[str]) -> Layer:
        """SOUL.md for this turn: its sections about tools the turn does not offer left
        out; the tools it has sections for marked (their built-in rules are not sent)."""
        if soul == t("prompt.soul_fallback"):
            return Layer("soul", soul, "built-in")
        where = relative(self.config.general.soul, self.config.base_dir)
        text, covers = soul_sections.for_turn(soul, tuple(names), tuple(self.tools.known()))
        return Layer("soul", text, where, covers=covers)

    def _environment(self, outlook: Outlook) -> list[Layer]:
        """The environment_context layer, when ``[features]`` asks for it."""
        if not self.config.features.environment_context:
            return []
        folder = project_folder(outlook.project, self.config.base_dir)
        where = Path(folder) if folder else self.config.general.default_workspace
        return [environment_layer(where, self._clock().astimezone(self._tz).date())]

    def _project(self, project: Profile) -> Layer:
        lines = [t("prompt.project", name=project.name)]
        folder = project_folder(project, self.config.base_dir)
        if folder:
            lines.append(t("prompt.project_folder", folder=folder))
        if project.body:
            lines.append(project.body)
        return Layer("project", "\n".join(lines), project.source)

    def _time(self) -> Layer:
        now = self._clock().astimezone(self._tz)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S%z")
        text = t("prompt.time", stamp=stamp, tz=self.config.general.timezone)
        return Layer("time", text, "clock", volatile=True)

    def _read_files(self, owner: bool, agents: bool) -> tuple[str, list[Layer], str, list[Profile]]:
        """SOUL.md, the owner's prompt files (none for a guest: ``owner`` False), the
        skills' summary and the usable agent profiles (when ``agents``: the turn offers
        delegation), read in one go: one thread hop per turn, not four."""
        usable = [a for a in self.profiles.agents.scan() if a.usable] if agents else []
        files = self.files.layers() if owner else []
        return self._read_soul(), files, self.skills.summary_now(), usable

    def _read_soul(self) -> str:
        """SOUL.md; the SOUL.md Kernel ships, left as it came, in the owner's language."""
        try:
            soul = self.config.general.soul.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return t("prompt.soul_fallback")
        shipped = any(
            soul == CATALOG[language][key]
            for language in LANGUAGES
            for key in ("prompt.soul", "prompt.soul_before_38")
        )
        return t("prompt.soul") if shipped else soul

    def update_shipped_soul(self) -> bool:
        """Rewrite SOUL.md with the text Kernel ships now when it is still, unedited,
        one Kernel shipped before (issue 38 brought the tool rules back into it): the
        owner then finds the rules there to edit. Any other SOUL.md is left alone.
        Blocking (a worker thread, at start); False when nothing was written."""
        path = self.config.general.soul
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return False
        if not any(text == CATALOG[lang]["prompt.soul_before_38"] for lang in LANGUAGES):
            return False
        try:
            write_atomic(path, (t("prompt.soul") + "\n").encode("utf-8"), mode=0o644)
        except OSError as exc:
            log.warning("SOUL.md as shipped not updated: %s", type(exc).__name__)
            return False
        log.info("SOUL.md as shipped updated to this release's (with the tool rules)")
        return True

    async def _recall(self, query: str, outlook: Outlook) -> str:
        try:
            found = await self.memories.recall(
                query, self.config.general.memory_recall_k, scopes=outlook.memory_scopes
            )
        except KernelError:
            # Recall is a help, not a condition: the turn goes on without it.
            log.warning("memory recall failed", exc_info=True)
            return ""
        if not found:
            return ""
        lines = [f"- [{m.id}] {m.text}" for m in found]
        return t("prompt.memories") + "\n" + "\n".join(lines)


def tool_guide(names: list[str], covered: Collection[str] = ()) -> str:
    """How to use tools in general, and what Kernel does beside the offered tools. The
    tools themselves (names, what each is for, its rules) reach the model once, in
    their definitions; this guide does not list them again. A line about a tool is left
    out when SOUL.md has a section about it (``covered``)."""
    lines = [t("prompt.tools"), t("prompt.tools_rule")]
    if "memory_add" in names and "memory_add" not in covered:
        lines.append(t("prompt.tools_remember", max=MAX_REMEMBERED_PER_TURN))
    if any(name.startswith("mcp_") and name not in covered for name in names):
        lines.append(t("prompt.tools_mcp"))
    return "\n".join(lines)


def relative(path: Path, base: Path) -> str:
    """``path`` as shown to the owner and the model: relative to ``base`` when inside it."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)
