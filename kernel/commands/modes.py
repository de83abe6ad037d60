"""/mode: this chat's prompt mode — ``default``, or ``codex`` / ``claude`` built from
the files the owner put under ``prompts/`` (issue 20, seed 000). A mode whose files
are missing is refused here, naming them, before it is kept."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kernel.agent.prompt_modes import PROMPT_MODES, ModeChoice
from kernel.commands.reply import Choice, Reply
from kernel.core.errors import KernelError
from kernel.core.i18n import t

if TYPE_CHECKING:
    from kernel.agent.agent import Agent


async def mode_command(agent: Agent, conversation: str, arg: str) -> Reply:
    """``arg`` empty: the current mode, with the others as choices; else switch."""
    features = agent.config.features
    if not arg:
        current = await agent.scopes.prompt_mode(conversation)
        extra = (
            t("mode.collaboration", mode=current.collaboration) if current.mode == "codex" else ""
        )
        text = t(
            "mode.current",
            mode=current.mode,
            variant=current.variant(features),
            collaboration=extra,
        )
        choices = tuple(Choice(m, f"/mode {m}") for m in PROMPT_MODES if m != current.mode)
        return Reply(f"{text}\n{t('mode.usage')}", choices=choices)
    word = arg.split()[0].lower()
    if word not in PROMPT_MODES:
        return Reply(f"{t('mode.unknown', mode=word[:32])}\n{t('mode.usage')}", error=True)
    choice = ModeChoice(word)
    try:
        if word != "default":  # its required files, checked now rather than at the next turn
            await asyncio.to_thread(agent.prompt.modes.layers, choice, "", agent.selection.model)
        await agent.scopes.set_mode(conversation, word)
    except KernelError as exc:
        return Reply(str(exc), error=True)
    return Reply(t("mode.switched", mode=word, variant=choice.variant(features)))
