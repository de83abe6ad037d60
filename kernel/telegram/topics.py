"""Topics in the owner's private chat (Bot API 9.3+, ``docs/telegram-topics.md``) as lanes.

A *lane* is the id the channel keys a conversation's state by: its view and busy window,
its /cancel, its outbox worker and rows, its inbox rows. The General topic (and a chat
without topics) is the chat itself: its lane is the chat id, exactly as before topics.
A topic of the owner's chat is a lane of its own, ``TOPIC_BASE`` + its
``message_thread_id``: above every Telegram user id (at most 52 significant bits), so it
never names a real chat, and it fits SQLite's integers, so outbox and inbox rows keep
their topic across restarts.

Lanes meet Telegram in two places only, both in :class:`~kernel.telegram.polling.PollingBot`:
an update from a topic of the owner's chat is read into its lane (:meth:`Lanes.read`), and
every call to a lane leaves with the owner's chat id and, for a method that sends,
``message_thread_id`` (:meth:`Lanes.address`). A chat without topics never has a lane of
its own, and costs one comparison per call.
"""

from __future__ import annotations

from typing import Any

from telegram.error import BadRequest

from kernel.core.delivery import TOPIC_CONVERSATION

TOPIC_BASE = 1 << 53
CONVERSATION = TOPIC_CONVERSATION + "{thread}"  # a topic's (General's: telegram:<chat>)

# Methods that take message_thread_id (the ones that send); edits, deletes and reactions
# name a message, which stays in its topic.
THREADED = frozenset(
    {
        "sendMessage",
        "sendPhoto",
        "sendDocument",
        "sendVoice",
        "sendAudio",
        "sendVideo",
        "sendAnimation",
        "sendChatAction",
        "sendMessageDraft",
        "sendMediaGroup",
    }
)
# Telegram's refusals of a send into a topic that was deleted, or closed.
GONE = ("message thread not found", "topic_closed", "topic_deleted")


def is_topic(lane: int) -> bool:
    return lane >= TOPIC_BASE


def thread_of(lane: int) -> int | None:
    """The topic's ``message_thread_id``; None for the General lane."""
    return lane - TOPIC_BASE if lane >= TOPIC_BASE else None


def lane_of(thread: int | None, chat_id: int) -> int:
    return TOPIC_BASE + thread if thread else chat_id


def lane_of_conversation(conversation: str, general: int) -> int:
    """The lane a conversation's messages go to: a topic's, else ``general``."""
    thread = conversation.removeprefix(TOPIC_CONVERSATION)
    if thread != conversation and thread.isdigit() and int(thread) > 0:
        return TOPIC_BASE + int(thread)
    return general


def topic_gone(exc: BadRequest) -> bool:
    """Telegram refused a send because its topic was deleted or closed."""
    message = exc.message.lower()
    return any(words in message for words in GONE)


class Lanes:
    """The owner's chat's lanes (only the owner's chat has topics Kernel uses)."""

    def __init__(self, owner: int) -> None:
        self.owner = owner

    def chat(self, lane: int) -> int:
        """The real chat of a lane."""
        return self.owner if lane >= TOPIC_BASE else lane

    def read(self, item: dict[str, Any]) -> None:
        """An update's message (or a pressed button's) in a topic of the owner's chat
        gets its lane as its chat id, in place, before it is parsed."""
        for kind in ("message", "edited_message", "callback_query"):
            inner = item.get(kind)
            if kind == "callback_query" and isinstance(inner, dict):
                inner = inner.get("message")
            if isinstance(inner, dict):
                self._read_message(inner)

    def _read_message(self, message: dict[str, Any]) -> None:
        chat, thread = message.get("chat"), message.get("message_thread_id")
        if (
            isinstance(chat, dict)
            and chat.get("id") == self.owner
            and message.get("is_topic_message")
            and isinstance(thread, int)
            and not isinstance(thread, bool)
            and thread > 0
        ):
            message["chat"] = chat | {"id": TOPIC_BASE + thread}

    def address(self, endpoint: str, data: dict[str, Any]) -> None:
        """A call to a lane goes to the owner's chat, in the topic when it sends."""
        lane = data.get("chat_id")
        if type(lane) is not int or lane < TOPIC_BASE:
            return
        data["chat_id"] = self.owner
        if endpoint in THREADED:
            data["message_thread_id"] = lane - TOPIC_BASE
