"""A chat's persona and project (issue 18), and what they make of a turn.

A session keeps its persona and project in its ``meta`` (``"persona"``, ``"project"``:
a name; absent: none). A conversation's current choice, the one a new session inherits
(``/new``, a restart), is a setting ``chat.persona:<conversation>``. A conversation named
by its session (``session:<id>``, the sidecar's chats) has only the session's own.

:class:`Outlook` is what shapes one turn besides its input: the persona, the project, or a
sub-agent's profile (its prompt replaces SOUL.md), and the depth.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernel.agent.prompt_modes import MODE_KEY, PROMPT_MODES, ModeChoice
from kernel.agent.sessions import SESSION_PREFIX, Sessions
from kernel.config import Config, parse_ref
from kernel.core.errors import ProfileError
from kernel.core.i18n import t
from kernel.core.session_modes import ACT
from kernel.memory import scopes as memory_scopes
from kernel.profiles import Profile, ProfileLibrary, Profiles
from kernel.routing import Choice
from kernel.store.db import Store
from kernel.tools.registry import ToolContext

log = logging.getLogger(__name__)

PERSONA = "persona"
PROJECT = "project"
SUBAGENT_TOOL = "delegate_task"  # never offered at depth ≥ 1


@dataclass(frozen=True, slots=True)
class ChatScope:
    persona: str = ""  # "" none
    project: str = ""
    prompt_mode: str = ""  # "" default (issue 20: /mode codex | claude)

    @classmethod
    def of_meta(cls, meta: dict[str, Any]) -> ChatScope:
        mode = ModeChoice.of_meta(meta).mode
        return cls(
            _name(meta.get(PERSONA)), _name(meta.get(PROJECT)), "" if mode == "default" else mode
        )


@dataclass(frozen=True, slots=True)
class Outlook:
    """What shapes a turn besides its input. ``agent``: a sub-agent's run (its body is
    the system prompt; no SOUL.md, no recalled memories); ``max_tool_calls``: its cap
    (None: ``general.max_tool_calls``)."""

    persona: Profile | None = None
    project: Profile | None = None
    agent: Profile | None = None
    depth: int = 0
    max_tool_calls: int | None = None

    def refuser(self, tool: str) -> Profile | None:
        """The profile whose allow-list leaves ``tool`` out (a sub-agent runs only what
        both its own list and the chat's persona allow); None when none does."""
        for profile in (self.agent, self.persona):
            if profile is not None and not profile.allows(tool):
                return profile
        return None

    def allows(self, tool: str) -> bool:
        if self.depth >= 1 and tool == SUBAGENT_TOOL:
            return False
        return self.refuser(tool) is None

    @property
    def chooser(self) -> Profile | None:
        """Whose model and reasoning the turn takes: the sub-agent's, else the persona's."""
        return self.agent or self.persona

    @property
    def model(self) -> str:
        """The profile's model reference ("" none)."""
        return self.chooser.model if self.chooser is not None else ""

    @property
    def reasoning(self) -> str | int | None:
        return self.chooser.reasoning if self.chooser is not None else None

    @property
    def choice(self) -> Choice | None:
        """The profile's model and reasoning, for the router (None: it sets neither)."""
        if not self.model and self.reasoning is None:
            return None
        return Choice(self.model, self.reasoning, "agent" if self.agent else "persona")

    @property
    def memory_scopes(self) -> tuple[str, ...]:
        return memory_scopes.visible(
            self.project.name if self.project else "", self.persona.name if self.persona else ""
        )

    @property
    def memory_scope(self) -> str:
        """Where a new memory goes by default: the project's, when one is active."""
        return memory_scopes.default(self.project.name if self.project else "")

    def tool_context(self, base: Path, **fields: Any) -> ToolContext:
        """A tool call's context in this outlook (``fields``: the call's own: session,
        conversation, progress…): the persona, the project, its folder, the memory scopes."""
        return ToolContext(
            persona=self.persona.name if self.persona else "",
            project=self.project.name if self.project else "",
            folder=project_folder(self.project, base),
            memory_scopes=self.memory_scopes,
            memory_scope=self.memory_scope,
            depth=self.depth,
            **fields,
        )


def project_folder(project: Profile | None, base: Path) -> str:
    """The project's working folder, absolute (``~`` expanded, relative to config.toml's
    folder); "" when it names none."""
    if project is None or not project.folder:
        return ""
    path = Path(os.path.expanduser(project.folder))
    return str(path if path.is_absolute() else base / path)


class Scopes:
    """Reads and changes chats' personas and projects."""

    def __init__(self, config: Config, store: Store, sessions: Sessions, profiles: Profiles):
        self.config = config
        self.store = store
        self.sessions = sessions
        self.profiles = profiles

    @staticmethod
    def _setting(kind: str, conversation: str) -> str:
        return f"chat.{kind}:{conversation}"

    async def inherited(self, conversation: str) -> ChatScope:
        """What a new session of this conversation starts with."""
        if conversation.startswith(SESSION_PREFIX):
            return ChatScope()
        persona = await self.store.get_setting(self._setting(PERSONA, conversation))
        project = await self.store.get_setting(self._setting(PROJECT, conversation))
        mode = await self.store.get_setting(self._setting(MODE_KEY, conversation))
        return ChatScope(persona or "", project or "", mode if mode in PROMPT_MODES else "")

    async def of_session(self, session_id: int) -> ChatScope:
        row = await self.store.get_session(session_id)
        return ChatScope.of_meta(row.meta if row is not None else {})

    async def current(self, conversation: str) -> ChatScope:
        """The scope of the conversation's session, or what a new one would inherit."""
        session_id = self.sessions.current_session(conversation)
        if session_id is not None:
            return await self.of_session(session_id)
        return await self.inherited(conversation)

    async def set(self, conversation: str, kind: str, name: str | None) -> Profile | None:
        """Switch the conversation's persona or project (None: none); its current session
        too. Raises BusyError while its turn runs, ProfileError for a name that is not a
        usable profile (or a persona whose model is not configured)."""
        self.sessions.guard_idle(conversation)
        profile = await self.check(kind, name)
        await self._keep(conversation, kind, profile.name if profile is not None else "")
        return profile

    async def set_session_scope(
        self, session_id: int, *, persona: str | None = None, project: str | None = None
    ) -> ChatScope:
        """Set one session's persona and/or project by id ("" clears; None leaves it)."""
        if persona is not None:
            await self.set_session(session_id, PERSONA, persona or None)
        if project is not None:
            await self.set_session(session_id, PROJECT, project or None)
        return await self.of_session(session_id)

    async def prompt_mode(self, conversation: str) -> ModeChoice:
        """The prompt and collaboration modes of the conversation's session (or what a
        new one would start with)."""
        session_id = self.sessions.current_session(conversation)
        row = await self.store.get_session(session_id) if session_id is not None else None
        if row is not None:
            return ModeChoice.of_meta(row.meta)
        return ModeChoice((await self.inherited(conversation)).prompt_mode or "default")

    async def tool_context(self, session_id: int, conversation: str) -> ToolContext:
        """The context of a tool called directly (not by the model) in a session: its
        persona, project, folder, memory scopes and mode, as a turn there would give."""
        row = await self.store.get_session(session_id)
        outlook = await self.outlook(ChatScope.of_meta(row.meta if row is not None else {}))
        return outlook.tool_context(
            self.config.base_dir,
            session_id=session_id,
            conversation=conversation,
            session_mode=row.mode if row is not None else ACT,
        )

    async def set_mode(self, conversation: str, mode: str) -> None:
        """Switch the conversation's prompt mode (and its current session's); a new
        session starts in it too. Raises BusyError while its turn runs."""
        self.sessions.guard_idle(conversation)
        value = mode if mode in PROMPT_MODES and mode != "default" else ""
        await self._keep(conversation, MODE_KEY, value)

    async def _keep(self, conversation: str, kind: str, value: str) -> None:
        """``kind`` of the conversation ("" none): what a new session inherits, and its
        current session's meta."""
        if not conversation.startswith(SESSION_PREFIX):
            key = self._setting(kind, conversation)
            if value:
                await self.store.set_setting(key, value)
            else:
                await self.store.delete_setting(key)
        session_id = self.sessions.current_session(conversation)
        if session_id is not None:
            await self.store.merge_meta(session_id, {kind: value or None})

    async def set_session(self, session_id: int, kind: str, name: str | None) -> Profile | None:
        """The same for one session named by id (the sidecar's chats)."""
        self.sessions.guard_idle(f"{SESSION_PREFIX}{session_id}")
        profile = await self.check(kind, name)
        value = profile.name if profile is not None else None
        await self.store.merge_meta(session_id, {kind: value})
        return profile

    async def check(self, kind: str, name: str | None) -> Profile | None:
        if not name:
            return None
        library = self.profiles.personas if kind == PERSONA else self.profiles.projects
        profile = await library.get(name)
        problem = self.model_problem(profile)
        if problem:
            raise ProfileError("profile_invalid", problem, {"kind": kind, "name": name})
        return profile

    def model_problem(self, profile: Profile) -> str:
        """Why the profile's model cannot be used ("" when it can, or names none)."""
        if not profile.model:
            return ""
        provider, model = parse_ref(profile.model)
        pcfg = self.config.providers.get(provider)
        if pcfg is None:
            names = ", ".join(self.config.providers) or "-"
            return t(
                "profile.bad_model_provider", name=profile.name, ref=profile.model, providers=names
            )
        if model and pcfg.resolve(model) is None:
            return t(
                "profile.bad_model",
                name=profile.name,
                ref=profile.model,
                models=", ".join(pcfg.models) or "-",
            )
        return ""

    async def outlook(self, scope: ChatScope) -> Outlook:
        """The profiles a turn in ``scope`` works with. A profile deleted since it was
        chosen is left out; one whose file is broken raises ProfileError (going on
        without it would lift its allow-list); a model that is no longer configured is
        ignored (logged), the rest of the persona applies."""
        persona = await self._usable(self.profiles.personas, scope.persona)
        project = await self._usable(self.profiles.projects, scope.project)
        return Outlook(persona=persona, project=project)

    async def _usable(self, library: ProfileLibrary, name: str) -> Profile | None:
        if not name:
            return None
        profile = await library.find(name)
        if profile is None:
            log.info("the chat's %s is gone; going on without it", library.kind)
            return None
        if profile.problem:
            await library.get(name)  # raises ProfileError naming the problem
        if self.model_problem(profile):
            log.warning("the %s's model is not configured; using the usual one", library.kind)
            return replace(profile, model="")
        return profile


def _name(value: object) -> str:
    return value if isinstance(value, str) else ""
