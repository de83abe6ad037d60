"""/prompts: the templates of ``prompts/`` (name and first line), used as
``/prompts:<name> KEY=VALUE …`` in a message (the agent fills them in)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kernel.commands.reply import Reply
from kernel.core.i18n import t

if TYPE_CHECKING:
    from kernel.agent.agent import Agent


async def prompts_listing(agent: Agent) -> Reply:
    files = agent.prompt.files
    if not agent.config.features.prompt_templates:
        return Reply(t("prompts.disabled"), error=True)
    found = await asyncio.to_thread(files.templates)
    if not found:
        return Reply(t("prompts.list_empty"))
    lines = [t("prompts.list_header")]
    lines += [f"/prompts:{tpl.name} — {tpl.first_line}" for tpl in found]
    return Reply("\n".join(lines))
