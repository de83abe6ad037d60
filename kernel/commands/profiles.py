"""/persona and /project: list the files beside config.toml, or switch this chat's
persona or project (kept in its session; a new session takes the chat's current one)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.agent.scope import PERSONA, ChatScope, project_folder
from kernel.commands.reply import Choice, Reply
from kernel.core.errors import KernelError
from kernel.core.i18n import t
from kernel.profiles import FOLDERS, Kind, Profile

if TYPE_CHECKING:
    from kernel.agent.agent import Agent

OFF_WORDS = ("off", "none", "-")  # /persona off: back to none


async def profile_command(agent: Agent, conversation: str, kind: Kind, arg: str) -> Reply:
    """``arg`` empty: the listing; ``off``: none; a name: switch to it."""
    if not arg:
        return await listing(agent, conversation, kind)
    name = None if arg.lower() in OFF_WORDS else arg
    try:
        profile = await agent.scopes.set(conversation, kind, name)
    except KernelError as exc:
        return Reply(str(exc), error=True)
    if profile is None:
        return Reply(t(f"{kind}.off"))
    return Reply(switched(agent, profile))


def switched(agent: Agent, profile: Profile) -> str:
    text = t(f"{profile.kind}.switched", name=profile.name, description=profile.description)
    if profile.kind == "project":
        folder = project_folder(profile, agent.config.base_dir)
        text += "\n" + (
            t("project.folder", folder=folder)
            if folder
            else t("project.no_folder", workspace=agent.config.general.default_workspace)
        )
    return text


async def listing(agent: Agent, conversation: str, kind: Kind) -> Reply:
    found = await agent.profiles.of(kind).all()
    scope = await agent.scopes.current(conversation)
    current = scope.persona if kind == PERSONA else scope.project
    if not found and not current:
        return Reply(t(f"{kind}.none", folder=FOLDERS[kind]))
    lines = [t(f"{kind}.list_header")]
    choices: list[Choice] = []
    for profile in found:
        problem = profile.problem or agent.scopes.model_problem(profile)
        if problem:
            lines.append(t("profile.line_unusable", name=profile.name, problem=problem))
            continue
        here = profile.name == current
        lines.append(f"{'▶' if here else '•'} {profile.name} — {profile.description}")
        choices.append(Choice(profile.name, f"/{kind} {profile.name}", current=here))
    if current and current not in {p.name for p in found}:
        lines.append(t("profile.line_gone", name=current))
    lines.append(t("profile.line_current", name=current or t("profile.current_none")))
    if current:
        choices.append(Choice("off", f"/{kind} off"))
    return Reply("\n".join(lines), choices=tuple(choices))


def scope_line(scope: ChatScope) -> list[str]:
    """The /status line of this chat's persona and project; none while it has neither
    (most owners never use them: /status stays short)."""
    if not scope.persona and not scope.project:
        return []
    none = t("profile.current_none")
    return [t("tg.status_scope", persona=scope.persona or none, project=scope.project or none)]
