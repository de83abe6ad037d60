"""An outbox row goes out as python-telegram-bot's own method would send it.

RowCalls posts a send and a 🔁 taken away through ``Bot._post`` with the keyboard as the
JSON the row stored, and reads only the message id of Telegram's answer (issue 37: making
the answer into objects cost more than the rest of the call). What reaches Telegram must
not change: each row's request is compared, parameter by parameter, with the request of
the Bot method it stands for, sent through the same bot to the strict simulator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from telegram import Bot, InlineKeyboardMarkup, ReplyParameters

from kernel.core.i18n import get_language, speaking
from kernel.core.rows import Later, RowId
from kernel.store.mailbox import OutboxRow
from kernel.telegram.calls import RowCalls
from kernel.telegram.download import FileRequest
from kernel.telegram.items import retry_later, retry_markup
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim


@pytest.fixture
async def tg() -> AsyncIterator[TelegramSim]:
    async with TelegramSim() as sim:
        yield sim


def make_bot(base: str) -> Bot:
    return Bot(
        DEFAULT_TOKEN,
        base_url=f"{base}/bot",
        base_file_url=f"{base}/file/bot",
        request=FileRequest(),
        get_updates_request=FileRequest(),
    )


def row(kind: str, body: dict[str, Any]) -> OutboxRow:
    now = datetime.now(UTC)
    return OutboxRow(
        id=1,
        channel="telegram",
        chat_id=str(OWNER),
        kind=kind,  # type: ignore[arg-type]
        body=body,
        state="sending",
        ambiguous=False,
        attempts=1,
        next_at=now,
        expires_at=now,
        created_at=now,
        message_id=None,
        error=None,
        inbox_id=None,
    )


async def test_a_send_goes_out_as_send_message_sends_it(tg: TelegramSim) -> None:
    quoted = int(tg.inject_text("the owner's question")["message"]["message_id"])
    markup = retry_markup(7)
    text = "<b>Hi</b> &amp; 你好 😀"
    async with make_bot(tg.api_base) as bot:
        sent = await bot.send_message(
            OWNER,
            text,
            parse_mode="HTML",
            reply_markup=InlineKeyboardMarkup.de_json(markup, None),
            reply_parameters=ReplyParameters(quoted, allow_sending_without_reply=True),
            disable_notification=True,
        )
        body: dict[str, Any] = {"text": text, "parse_mode": "HTML", "reply_markup": markup}
        body |= {"reply_to": quoted, "silent": True}
        message_id = await RowCalls(bot).deliver(OWNER, row("send", body))
    theirs, ours = tg.calls_to("sendMessage")
    assert ours.params == theirs.params
    assert message_id == sent.message_id + 1 == tg.chat(OWNER)[-1].message_id


async def test_buttons_taken_away_go_out_as_edit_message_reply_markup_sends_it(
    tg: TelegramSim,
) -> None:
    async with make_bot(tg.api_base) as bot:
        keyboard = InlineKeyboardMarkup.de_json(retry_markup(7), None)
        sent = await bot.send_message(OWNER, "an answer", reply_markup=keyboard)
        await bot.edit_message_reply_markup(OWNER, sent.message_id)  # taken away
        # The same again: Telegram says "message is not modified", which is done.
        body = {"message_id": sent.message_id, "text": None, "reply_markup": None}
        assert await RowCalls(bot).deliver(OWNER, row("edit", body)) == sent.message_id
    theirs, ours = tg.calls_to("editMessageReplyMarkup")
    assert ours.params == theirs.params


def test_a_button_made_on_the_database_thread_keeps_the_callers_language() -> None:
    """The 🔁 of an answer being stored is made on the database thread (issue 37), out of
    the caller's context: its label is the one the caller's language gave."""
    row = RowId()
    with speaking("en"):
        later = retry_later(row)
        wanted = retry_markup(7)
    row.value = 7
    assert isinstance(later, Later) and later.value() == wanted
    assert wanted != retry_markup(7) or get_language() == "en"
