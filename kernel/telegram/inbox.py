"""How the mailroom (``mailroom.py``) reads the owner's updates and its inbox rows: the
kind an update is, how a notice names a message, when it was sent.

Message text is the owner's data: it goes to the chat, never to a log.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from telegram import Update

from kernel.core.i18n import t
from kernel.store.mailbox import InboxRow

NAMED = 40  # characters of a message named in a notice


def accessible(message: Any) -> bool:
    """A message the bot can still edit (not Telegram's dateless stand-in)."""
    date = getattr(message, "date", None)
    return message is not None and date is not None and date.timestamp() > 0


def kind_of(update: Update) -> str:
    if update.callback_query is not None:
        return "callback"
    message = update.message
    if message is None:
        return "other"
    if message.text:
        entity = message.entities[0] if message.entities else None
        command = entity is not None and entity.type == "bot_command" and entity.offset == 0
        message_like = message.text.startswith(("/skill/", "/prompts:"))
        return "command" if command and not message_like else "text"
    for kind in ("photo", "document", "voice", "audio"):
        if getattr(message, kind):
            return kind
    return "other"


def named(row: InboxRow) -> str:
    """How a notice names the message: the start of its text, or its kind."""
    message = row.payload.get("message") or {}
    text = str(message.get("text") or message.get("caption") or "").strip()
    if text:
        text = " ".join(text.split())
        return text if len(text) <= NAMED else text[: NAMED - 1] + "…"
    kind = row.kind if row.kind in ("photo", "document", "voice", "audio", "command") else "other"
    return t(f"tg.interrupted_turn.{kind}")


def sent_at(row: InboxRow) -> datetime:
    """When the owner sent it (Telegram's date), else when Kernel took it in."""
    date = (row.payload.get("message") or {}).get("date")
    if isinstance(date, int | float) and date > 0:
        return datetime.fromtimestamp(date, UTC)
    return row.received_at
