"""What the owner sees, read back from the Bot API simulator's call log.

A `Transcript` turns the bot's calls since a mark into the owner's view of the chat: each
new message (and whether it made the phone notify), each edit, deletion, button change,
draft and typing action. Tests assert on it the way an owner would judge the chat: which
message lit up the lock screen, which buttons are still live, how many messages one
exchange cost. `render()` prints it as lines for a person to read when a test fails.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.sim.telegram_sim import OWNER, BotCall, ChatMessage, TelegramSim

SENDS = frozenset(
    {"sendmessage", "sendphoto", "senddocument", "sendvoice", "sendaudio", "sendvideo"}
)


def buttons_of(markup: Any) -> list[tuple[str, str]]:
    """(label, callback data or url) of every inline button in a reply_markup."""
    if isinstance(markup, str):
        markup = json.loads(markup) if markup else None
    if not isinstance(markup, dict):
        return []
    rows = markup.get("inline_keyboard") or []
    return [
        (str(b.get("text", "")), str(b.get("callback_data") or b.get("url") or ""))
        for row in rows
        for b in row
    ]


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() in {"true", "1"}


@dataclass
class Seen:
    """One thing the owner saw happen in the chat."""

    kind: str  # sent, edited, deleted, markup, draft, typing
    message_id: int | None = None
    text: str = ""
    notify: bool = False  # a new message that made the phone notify
    buttons: list[tuple[str, str]] = field(default_factory=list)
    reply_to: int | None = None

    def line(self) -> str:
        parts = [self.kind]
        if self.message_id is not None:
            parts.append(f"#{self.message_id}")
        if self.kind == "sent":
            parts.append("🔔" if self.notify else "🔕")
        if self.reply_to is not None:
            parts.append(f"↩#{self.reply_to}")
        if self.text:
            parts.append(repr(self.text[:160]))
        if self.buttons:
            parts.append("[" + " | ".join(label for label, _ in self.buttons) + "]")
        return " ".join(parts)


def _reply_target(params: dict[str, Any]) -> int | None:
    reply = params.get("reply_parameters")
    if isinstance(reply, str):
        reply = json.loads(reply)
    if isinstance(reply, dict) and reply.get("message_id") is not None:
        return int(reply["message_id"])
    target = params.get("reply_to_message_id")
    return int(target) if target is not None else None


def _seen(call: BotCall) -> list[Seen]:
    method, params = call.method.lower(), call.params
    if not call.ok:
        return []
    if method in SENDS:
        result = call.result if isinstance(call.result, dict) else {}
        return [
            Seen(
                "sent",
                result.get("message_id"),
                str(params.get("text") or params.get("caption") or ""),
                notify=not _flag(params.get("disable_notification")),
                buttons=buttons_of(params.get("reply_markup")),
                reply_to=_reply_target(params),
            )
        ]
    message_id = params.get("message_id")
    message_id = int(message_id) if message_id is not None else None
    if method in {"editmessagetext", "editmessagecaption"}:
        text = str(params.get("text") or params.get("caption") or "")
        return [Seen("edited", message_id, text, buttons=buttons_of(params.get("reply_markup")))]
    if method == "editmessagereplymarkup":
        return [Seen("markup", message_id, buttons=buttons_of(params.get("reply_markup")))]
    if method == "deletemessage":
        return [Seen("deleted", message_id)]
    if method == "deletemessages":
        ids = params.get("message_ids") or []
        if isinstance(ids, str):
            ids = json.loads(ids)
        return [Seen("deleted", int(i)) for i in ids]
    if method == "sendmessagedraft":
        return [Seen("draft", text=str(params.get("text") or ""))]
    if method == "sendchataction":
        return [Seen("typing")]
    return []


class Transcript:
    """The owner's view of one chat, from `mark()` on."""

    def __init__(self, tg: TelegramSim, chat_id: int = OWNER) -> None:
        self.tg = tg
        self.chat_id = chat_id

    def mark(self) -> int:
        return len(self.tg.calls)

    def seen(self, since: int = 0) -> list[Seen]:
        out: list[Seen] = []
        for call in self.tg.calls[since:]:
            chat = call.params.get("chat_id")
            if chat is not None and str(chat) != str(self.chat_id):
                continue
            out.extend(_seen(call))
        return out

    def sent(self, since: int = 0) -> list[Seen]:
        return [s for s in self.seen(since) if s.kind == "sent"]

    def notifying(self, since: int = 0) -> list[Seen]:
        """The new messages that lit up the owner's phone, in order."""
        return [s for s in self.sent(since) if s.notify]

    def live(self) -> list[ChatMessage]:
        """The bot's messages the chat shows now."""
        return self.tg.chat(self.chat_id, from_bot=True)

    def live_buttons(self, prefix: str) -> list[ChatMessage]:
        """The bot's messages in the chat now that carry a button whose data starts so."""
        return [
            m
            for m in self.live()
            if any(data.startswith(prefix) for _, data in buttons_of(m.reply_markup))
        ]

    def render(self, since: int = 0) -> str:
        return "\n".join(s.line() for s in self.seen(since))
