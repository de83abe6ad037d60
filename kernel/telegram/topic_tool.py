"""``open_topic``: the agent opens a topic in the owner's Telegram chat (issue 41) for a
background task or a reminder, and may start a turn there with the owner's words.

Offered only while the Telegram channel runs with topics on (registered at its start,
removed at its stop); refused in any conversation but the owner's Telegram chat.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import Field
from telegram.error import TelegramError

from kernel.core.errors import ToolError
from kernel.core.i18n import t
from kernel.telegram.topic_desk import TopicDesk
from kernel.telegram.topics import thread_of
from kernel.tools.registry import ToolContext, ToolRegistry

log = logging.getLogger(__name__)

NAME = "open_topic"
SOURCE = "telegram"
Title = Annotated[str, Field(min_length=1, max_length=128, description="the topic's name")]
Text = Annotated[
    str,
    Field(max_length=4000, description="optional: the owner's message to start a turn with"),
]


def register(
    registry: ToolRegistry, topics: TopicDesk, start: Callable[[int, str], Awaitable[None]]
) -> None:
    async def open_topic(
        title: Title, text: Text = "", context: ToolContext | None = None
    ) -> dict[str, Any]:
        """Open a new topic in the owner's Telegram chat: a conversation of its own that
        runs beside this one (for a background task, a reminder, a new subject). With
        `text`, a turn starts there at once, as if the owner had written it."""
        if not (context.conversation if context is not None else "").startswith("telegram:"):
            raise ToolError(t("tg.open_topic_owner_only"))
        if text and (busy := topics.over_cap(0)) is not None:  # 0: no lane of its own yet
            raise ToolError(busy)  # its turn would be one too many (a fan-out of topics)
        try:
            lane = await topics.open(title)
        except TelegramError as exc:
            log.warning("open_topic failed: %s", type(exc).__name__)
            raise ToolError(t("tg.topic_open_failed")) from None
        if text:
            await start(lane, text)
        return {
            "topic": topics.name(lane),
            "message_thread_id": thread_of(lane),
            "started": bool(text),
        }

    registry.tool(open_topic, name=NAME)
