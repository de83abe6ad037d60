"""/mode: this chat's work mode — ``act``, ``plan`` or ``read_only``, the tools the model
may use (issue 38, kernel/agent/session_modes.py) — and its prompt mode — ``default``,
or ``codex`` / ``claude`` built from the files the owner put under ``prompts/`` (issue
20, seed 000). A prompt mode whose files are missing is refused here, naming them,
before it is kept."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kernel.agent.prompt_modes import PROMPT_MODES, ModeChoice
from kernel.commands.reply import Choice, Reply
from kernel.core.errors import KernelError
from kernel.core.i18n import t
from kernel.core.session_modes import SESSION_MODES

if TYPE_CHECKING:
    from kernel.agent.agent import Agent


async def mode_command(agent: Agent, conversation: str, arg: str) -> Reply:
    """``arg`` empty: the current modes, with the others as choices; else switch."""
    features = agent.config.features
    word = arg.split()[0].lower() if arg else ""
    if word in SESSION_MODES:
        await agent.modes.set(conversation, word, actor="owner", how="command")
        text = t("mode.session_switched", mode=t(f"mode.name.{word}"))
        return Reply(text, choices=_session_choices(word))
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
        session = await agent.modes.current(conversation)
        lines = [text, t("mode.session", mode=t(f"mode.name.{session}")), _usage()]
        choices = _session_choices(session) + tuple(
            Choice(m, f"/mode {m}", current=m == current.mode) for m in PROMPT_MODES
        )
        return Reply("\n".join(lines), choices=choices)
    if word not in PROMPT_MODES:
        return Reply(f"{t('mode.unknown', mode=word[:32])}\n{_usage()}", error=True)
    choice = ModeChoice(word)
    try:
        if word != "default":  # its required files, checked now rather than at the next turn
            await asyncio.to_thread(agent.prompt.modes.layers, choice, "", agent.selection.model)
        await agent.scopes.set_mode(conversation, word)
    except KernelError as exc:
        return Reply(str(exc), error=True)
    return Reply(t("mode.switched", mode=word, variant=choice.variant(features)))


def _session_choices(current: str) -> tuple[Choice, ...]:
    return tuple(Choice(m, f"/mode {m}", current=m == current) for m in SESSION_MODES)


def _usage() -> str:
    return f"{t('mode.session_usage')}\n{t('mode.usage')}"
