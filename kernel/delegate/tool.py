"""The ``delegate_to_cli`` tool, registered like any extension's tool (seed 004).

Offered only when a configured CLI is found at start (``kernel check`` names the ones
that are not): a tool that can only fail costs every request its definition and invites
a call that cannot succeed. Its ``cli`` argument lists the CLIs found. The chat's
persona and project (``ToolContext.persona``/``.project``) are read from ``profiles`` at
each call and their instructions go to the CLI; one that is gone or unusable is skipped.
"""

from __future__ import annotations

import logging
from typing import Any

from kernel.core.i18n import t
from kernel.delegate.delegator import Delegator
from kernel.delegate.formats import DISPLAY_NAMES
from kernel.profiles import Profile, ProfileLibrary, Profiles
from kernel.tools.describe import first_line
from kernel.tools.registry import CONTEXT_ARG, ToolContext, ToolRegistry

log = logging.getLogger(__name__)

NAME = "delegate_to_cli"
DESCRIPTION = (
    "Hand real work (files, code, project analysis, shell commands, the browser) to a "
    "coding-agent CLI run as a subprocess. Returns {ok, cli, version, cwd, exit_code, "
    "reason, output_path, output, signal, kernel_signals, cause}: output is the CLI's "
    "final answer (head and tail past 50,000 characters), all of it is in output_path."
)
# Kernel's rules for it, left out when SOUL.md has a delegate_to_cli section (issue 38).
RULES = (
    "Never pretend it is done or leave the owner to run commands. Plain questions, "
    "explanations, writing and translation need no CLI. One task at a time: on a busy "
    "refusal do not retry, tell the owner what runs (they may wait or /cancel). ok "
    "false: say it failed and why (reason; cause: the CLI's last known error), invent "
    "nothing; you may fix the task and delegate once more. Else sum up output in your "
    "words: what was done, the result, what the owner still has to do."
)
TASK = (
    "the whole instruction, self-contained (the CLI sees nothing of this conversation): "
    "goal, paths, constraints, what to report"
)


def parameters(names: list[str], default: str) -> dict[str, Any]:
    """The schema offered: ``cli`` only when there is a choice, among ``names``."""
    properties: dict[str, Any] = {
        "task": {"type": "string", "description": TASK},
        "cwd": {
            "type": "string",
            "description": "working directory, if the owner named one (default: the "
            "project's folder, else the workspace; a relative one is taken from it)",
        },
    }
    if len(names) > 1:
        properties["cli"] = {
            "type": "string",
            "enum": names,
            "description": f"only when the owner asks for one; default {default}",
        }
    return {"type": "object", "properties": properties, "required": ["task"]}


async def chat_profiles(profiles: Profiles | None, context: ToolContext) -> list[Profile]:
    """The chat's persona then project, when each exists, is usable and says something."""
    if profiles is None:
        return []
    found: list[Profile] = []
    wanted: list[tuple[ProfileLibrary, str]] = [
        (profiles.personas, context.persona),
        (profiles.projects, context.project),
    ]
    for library, name in wanted:
        if not name:
            continue
        profile = await library.find(name)
        if profile is None or not profile.usable:
            log.info("the chat's %s is gone or unusable: the CLI gets none", library.kind)
        elif profile.body.strip():
            found.append(profile)
    return found


def register(
    registry: ToolRegistry, delegator: Delegator, profiles: Profiles | None = None
) -> None:
    names = delegator.installed()
    if not names:
        log.info("%s not offered: no configured coding CLI was found", NAME)
        return
    default = delegator.default_cli()

    async def delegate_to_cli(
        task: str, cwd: str | None = None, cli: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        context = extra.get(CONTEXT_ARG)
        conversation = context.conversation if isinstance(context, ToolContext) else ""
        folder = context.folder if isinstance(context, ToolContext) else ""
        chosen = await chat_profiles(profiles, context) if isinstance(context, ToolContext) else []
        return await delegator.delegate(
            task,
            cwd,
            cli or default,
            conversation=conversation,
            folder=folder,
            profiles=chosen,
            context=context if isinstance(context, ToolContext) else None,
        )

    def describe(args: dict[str, Any]) -> tuple[str, str]:
        """An approval's words: "交给 Claude Code" and the task's first line."""
        cli = args.get("cli") if isinstance(args.get("cli"), str) else default
        shown = DISPLAY_NAMES.get(str(cli), str(cli))
        return t("ask.delegate", cli=shown), first_line(str(args.get("task") or ""))

    registry.register(
        NAME,
        DESCRIPTION,
        parameters(names, default),
        delegate_to_cli,
        with_context=True,
        describe=describe,
    )
    registry.add_rules(NAME, RULES)
