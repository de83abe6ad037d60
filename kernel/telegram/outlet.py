"""Telegram as a delivery target and as the owner's ear for turns nobody watches.

While the channel runs it attaches :class:`TelegramOutlet` to the Kernel's channel
registry (cron results go to the owner's private chat, rendered like any reply, through
the durable outbox: ``send_text`` returns once the message is queued) and
sets :class:`TelegramAsker`, which shows a cron or QQ turn's questions (ask_user, tool
approvals) on the same inline-button board the chat's own turns use.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from kernel.core.delivery import Target
from kernel.core.errors import ChannelError
from kernel.core.events import AskUser
from kernel.core.i18n import t
from kernel.telegram.outbox import reply_items
from kernel.telegram.topics import lane_of_conversation

if TYPE_CHECKING:
    from kernel.telegram.deps import Deps
    from kernel.telegram.topic_desk import TopicDesk

PHOTO_TYPES = (".png", ".jpg", ".jpeg")
MAX_PHOTO = 10 * 1024 * 1024  # Telegram's limit for a photo a bot sends


class TelegramOutlet:
    name = "telegram"

    def __init__(self, deps: Deps, topics: TopicDesk | None = None) -> None:
        self.deps = deps
        self.topics = topics  # a delivery naming no topic may go to the configured one

    def unavailable(self) -> str:
        if not self.deps.life.running:
            return t("channel.not_running", name=self.name)
        return ""

    async def send_text(self, target: Target, text: str) -> None:
        owner = self.deps.owner
        if target.user_id and target.user_id != str(owner):
            # Kernel talks to its owner only, whatever a job or request names.
            raise ChannelError(ChannelError.DISPATCH_FAILED, t("tg.owner_only"), channel=self.name)
        lane = await _lane(owner, target.session_id, self.topics)
        try:
            await self.deps.outbox.put(lane, reply_items(text))
        except Exception as exc:  # the store refused: the delivery is not queued
            raise ChannelError(
                ChannelError.DISPATCH_FAILED,
                t("channel.failed", name=self.name, detail=type(exc).__name__),
                channel=self.name,
            ) from None

    async def send_file(self, target: Target, path: Path, name: str, caption: str) -> None:
        """Send a file Kernel made (a browser screenshot) to the owner at once, not
        through the outbox (as /files does: a file on disk is not kept in the database):
        an image as a photo, anything else, or an image past Telegram's photo limit, as
        a document."""
        owner = self.deps.owner
        if target.user_id and target.user_id != str(owner):
            raise ChannelError(ChannelError.DISPATCH_FAILED, t("tg.owner_only"), channel=self.name)
        try:
            data = await asyncio.to_thread(path.read_bytes)
            if path.suffix.lower() in PHOTO_TYPES and len(data) <= MAX_PHOTO:
                await self.deps.bot.send_photo(owner, photo=data, caption=caption[:1024])
            else:
                await self.deps.bot.send_document(
                    owner, document=data, filename=name, caption=caption[:1024]
                )
        except Exception as exc:  # unreadable, or Telegram refused: told by type only
            raise ChannelError(
                ChannelError.DISPATCH_FAILED,
                t("channel.failed", name=self.name, detail=type(exc).__name__),
                channel=self.name,
            ) from None


class TelegramAsker:
    def __init__(self, deps: Deps, topics: TopicDesk | None = None) -> None:
        self.deps = deps
        self.topics = topics
        self._shown: set[str] = set()  # question ids this asker put on the board

    async def show(self, event: AskUser, label: str, where: str = "") -> None:
        """In the topic ``where`` names (a job made in a topic), else the configured
        topic for deliveries (``telegram.proactive_topic``), else General."""
        self._shown.add(event.id)
        lane = await _lane(self.deps.owner, where, self.topics)
        await self.deps.board.show(lane, replace(event, question=f"{label}\n\n{event.question}"))

    async def settle(self, tool_call_id: str) -> None:
        await self.deps.board.close_for_tool(tool_call_id, "unanswered", self._shown)
        self._shown = {i for i in self._shown if self.deps.agent.asks.get(i)}


async def _lane(owner: int, conversation: str, topics: TopicDesk | None) -> int:
    """Where a delivery or a question of an unwatched turn goes: the topic
    ``conversation`` names (a topic's job), else the configured topic, else General."""
    lane = lane_of_conversation(conversation, owner)
    if lane == owner and topics is not None:
        lane = await topics.proactive()
    return lane
