"""One Bot API call for an outbox row: :class:`RowCalls` turns a row into a send, an
edit or a delete, and its outcome into a message id, :class:`RetryLater` (with whether
the message may have reached the chat) or :class:`Refused`.

A re-send of an ambiguous row carries ``tg.resent_marker``. A tidy row (a superseded
🔁 taken away, :func:`~kernel.telegram.items.unbutton_item`) goes at ``progress``
priority: when the chat's rate budget has no token to spare, :class:`NotNow` says so
without calling the API. A ``replace`` edits the
placeholder, or sends anew when it is gone; "message is not modified" and a gone
message's edit or delete are done; HTML Telegram cannot parse goes as plain text. A send
to a topic the owner deleted (or closed) goes to the General topic instead, the first
one after a note (``topics.py``): never lost.

Public API: :class:`RowCalls`, :class:`RetryLater`, :class:`Refused`, :class:`NotNow`.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from typing import Any

from telegram import Bot, InlineKeyboardMarkup, ReplyParameters
from telegram.error import (
    BadRequest,
    ChatMigrated,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from telegram.ext import ExtBot

from kernel.core.i18n import t
from kernel.core.redact import hide_quoted
from kernel.store.mailbox import OutboxRow
from kernel.telegram.aio_request import never_sent
from kernel.telegram.budget import Thinned
from kernel.telegram.items import is_tidy
from kernel.telegram.render import html_to_plain
from kernel.telegram.split import LIMIT, split_html, split_plain, utf16_len
from kernel.telegram.topics import TOPIC_BASE, Lanes, is_topic, topic_gone

log = logging.getLogger(__name__)

_PERMANENT = (Forbidden, BadRequest, InvalidToken, ChatMigrated, EndPointNotFound)


class RetryLater(Exception):
    """Not delivered yet: try again after ``delay`` (None: the backoff's own)."""

    def __init__(self, delay: float | None, error: str, *, ambiguous: bool) -> None:
        super().__init__(error)
        self.delay = delay  # None: the backoff's own
        self.error = error
        self.ambiguous = ambiguous


class NotNow(Exception):
    """A tidy row found no token to spare in the chat's budget: nothing was called."""


class Refused(Exception):
    """Telegram refused the row for good."""

    def __init__(self, error: str, *, forbidden: bool = False) -> None:
        super().__init__(error)
        self.forbidden = forbidden  # the chat refuses the bot: nothing can reach it


class RowCalls:
    """The outbox worker's calls through ``bot``; ``resent`` counts marked re-sends."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        # The owner's topics, when the bot knows them (``polling.py``'s PollingBot).
        self.lanes: Lanes | None = getattr(bot, "lanes", None)
        self.resent = 0
        self.gone: set[int] = set()  # topics' lanes found deleted: their sends go to General

    async def deliver(self, chat_id: int, row: OutboxRow) -> int | None:
        """One try at ``row``: the message id (None for a delete). Raises
        :class:`RetryLater` or :class:`Refused`."""
        body = row.body
        try:
            if row.kind == "delete":
                return await self._delete(chat_id, int(body["message_id"]))
            if row.kind == "edit":
                return await self._edit(chat_id, body, tidy=is_tidy(body))
            return await self._send_in_topic(chat_id, row)
        except Thinned:
            raise NotNow from None
        except RetryAfter as exc:
            wait = exc._retry_after
            seconds = wait.total_seconds() if isinstance(wait, timedelta) else float(wait)
            raise RetryLater(seconds, "RetryAfter", ambiguous=False) from None
        except _PERMANENT as exc:
            error = f"{type(exc).__name__}: {hide_quoted(exc.message)}"
            raise Refused(error, forbidden=isinstance(exc, Forbidden)) from None
        except TelegramError as exc:
            reached = not _never_reached(exc)
            # Only a send can duplicate; an edit or delete just repeats.
            ambiguous = reached and row.kind == "send"
            raise RetryLater(None, type(exc).__name__, ambiguous=ambiguous) from None
        except (KeyError, TypeError, ValueError) as exc:  # a malformed body: never deliverable
            raise Refused(type(exc).__name__) from None

    def chat(self, lane: int) -> int:
        """The real chat of a lane (the chat's rate budget is the topics' too)."""
        return self.lanes.chat(lane) if self.lanes is not None else lane

    async def _send_in_topic(self, lane: int, row: OutboxRow) -> int | None:
        """A send to its lane; when the lane's topic is gone, to General."""
        if self.lanes is None or not is_topic(lane):
            return await self._send(lane, row)
        if lane not in self.gone:
            try:
                return await self._send(lane, row)
            except BadRequest as exc:
                if not topic_gone(exc):
                    raise
            log.info("a topic is gone; its messages go to the General topic")
            self.gone.add(lane)
            note = t("tg.topic_gone", topic=lane - TOPIC_BASE)
            await self._send_parts(self.lanes.chat(lane), [note], None, None, silent=True)
        return await self._send(self.lanes.chat(lane), row)

    async def _send(self, chat_id: int, row: OutboxRow) -> int | None:
        body = row.body
        text, mode = str(body.get("text") or ""), body.get("parse_mode")
        markup = _markup(body.get("reply_markup"))
        replace, reply_to = body.get("replace"), body.get("reply_to")
        silent = bool(body.get("silent"))
        if replace is not None and reply_to is None:
            try:
                return await self._edit_text(chat_id, int(replace), text, mode, markup)
            except BadRequest as exc:
                if not _gone(exc):
                    raise
        # The placeholder is gone or cannot be edited, or the text must quote the
        # owner's message (an edit cannot make a reply): it comes anew, and the
        # placeholder (if it still stands) goes.
        quoted = int(reply_to) if reply_to is not None else None
        message_id = await self._send_text(chat_id, row, text, mode, markup, quoted, silent)
        if replace is not None:
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(chat_id, int(replace))
        return message_id

    async def _send_text(
        self,
        chat_id: int,
        row: OutboxRow,
        text: str,
        mode: str | None,
        markup: Markup | None,
        reply_to: int | None = None,
        silent: bool = False,
    ) -> int:
        marker = t("tg.resent_marker") if row.ambiguous else ""
        if row.ambiguous:
            self.resent += 1
        try:
            parts = [marker + text]
            if utf16_len(parts[0]) > LIMIT:  # the marker pushed a full chunk over: two
                parts = split_html(parts[0]) if mode else split_plain(parts[0])
            return await self._send_parts(chat_id, parts, mode, markup, reply_to, silent)
        except BadRequest as exc:
            if mode is None or not _bad_entities(exc):
                raise
            log.warning(
                "telegram rejected an HTML chunk (%s); sending plain text", hide_quoted(exc.message)
            )
            plain = split_plain(marker + html_to_plain(text)) or [t("tg.empty_reply")]
            return await self._send_parts(chat_id, plain, None, markup, reply_to, silent)

    async def _send_parts(
        self,
        chat_id: int,
        parts: list[str],
        mode: str | None,
        markup: Markup | None,
        reply_to: int | None = None,
        silent: bool = False,
    ) -> int:
        """Almost always one part; the buttons go on the last; its id is the row's. The
        first quotes ``reply_to`` when given (a deleted original does not fail it). Only
        the first may notify (``silent``: none)."""
        message_id = 0
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            quote = (
                ReplyParameters(reply_to, allow_sending_without_reply=True)
                if index == 0 and reply_to is not None
                else None
            )
            data: dict[str, Any] = {
                "chat_id": chat_id,
                "text": part,
                "parse_mode": mode,
                "reply_markup": markup if last else None,
                "reply_parameters": quote,
                "disable_notification": True if silent or index > 0 else None,
            }
            sent = await self._post("sendMessage", data)
            message_id = int(sent["message_id"])
        return message_id

    async def _edit_text(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        mode: str | None,
        markup: Markup | None,
    ) -> int:
        keyboard = InlineKeyboardMarkup.de_json(markup, None) if markup is not None else None
        try:
            await self.bot.edit_message_text(
                text, chat_id=chat_id, message_id=message_id, parse_mode=mode, reply_markup=keyboard
            )
        except BadRequest as exc:
            if _not_modified(exc):
                return message_id
            if mode is None or not _bad_entities(exc):
                raise
            plain = html_to_plain(text)
            try:
                await self.bot.edit_message_text(
                    plain, chat_id=chat_id, message_id=message_id, reply_markup=keyboard
                )
            except BadRequest as again:
                if not _not_modified(again):
                    raise
        return message_id

    async def _edit(self, chat_id: int, body: dict[str, Any], *, tidy: bool = False) -> int | None:
        message_id = int(body["message_id"])
        markup = _markup(body.get("reply_markup"))
        try:
            if body.get("text") is None:
                await self._edit_markup(chat_id, message_id, markup, tidy)
                return message_id
            return await self._edit_text(
                chat_id, message_id, str(body["text"]), body.get("parse_mode"), markup
            )
        except BadRequest as exc:
            if _gone(exc) or _not_modified(exc):
                return message_id  # nothing left to change
            raise

    async def _edit_markup(
        self, chat_id: int, message_id: int, markup: Markup | None, tidy: bool
    ) -> None:
        """``editMessageReplyMarkup`` as ``Bot.edit_message_reply_markup`` sends it. A
        tidy call goes only with a token to spare (a plain Bot, with no rate limiter to
        ask, just sends)."""
        data: dict[str, Any] = {"chat_id": chat_id, "message_id": message_id}
        if markup is not None:
            data["reply_markup"] = markup
        spare = {"priority": "progress"} if tidy and isinstance(self.bot, ExtBot) else None
        await self._post("editMessageReplyMarkup", data, spare)

    async def _post(
        self, method: str, data: dict[str, Any], rate: dict[str, Any] | None = None
    ) -> Any:
        """``method`` with ``data`` (None values left out) as the Bot's own method sends
        it (Kernel sets no ``Defaults`` and no arbitrary callback data, the only things
        those methods add), through the same rate limiter (``rate``: its arguments) and
        request, but the Message Telegram answers with stays the JSON it came as: only
        its ``message_id`` is read, and making it into objects cost more than the rest
        of the call (issue 37: a send and a 🔁 taken away per exchange)."""
        return await self.bot._post(
            method, data, api_kwargs=ExtBot._merge_api_rl_kwargs(None, rate)
        )

    async def _delete(self, chat_id: int, message_id: int) -> int | None:
        try:
            await self.bot.delete_message(chat_id, message_id)
        except BadRequest as exc:
            if not _gone(exc):
                raise
        return None


Markup = dict[str, Any]
"""An inline keyboard as the row stores it: the Bot API's JSON, sent as it is (the
``InlineKeyboardMarkup`` made of it only for an edit of text, whose method takes no
other)."""


def _markup(value: Any) -> Markup | None:
    return value if isinstance(value, dict) else None


def _never_reached(exc: BaseException) -> bool:
    """True when the request provably never got to the API (nothing can duplicate)."""
    cause: BaseException | None = exc
    while cause is not None:
        if never_sent(cause):
            return True
        cause = cause.__cause__
    return False


def _lower(exc: TelegramError) -> str:
    return exc.message.lower()


def _not_modified(exc: TelegramError) -> bool:
    return "not modified" in _lower(exc)


def _bad_entities(exc: TelegramError) -> bool:
    return "can't parse entities" in _lower(exc) or "can't find end" in _lower(exc)


def _gone(exc: TelegramError) -> bool:
    text = _lower(exc)
    return any(
        mark in text
        for mark in (
            "message to edit not found",
            "message to delete not found",
            "message can't be edited",
            "message can't be deleted",
            "message not found",
            "message_id_invalid",
        )
    )
