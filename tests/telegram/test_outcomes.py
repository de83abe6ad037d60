"""The inbox row of an owner's message is the mailroom's (issue 36, item 5): the inbound
handler returns how the handling ended (``kernel/telegram/outcome.py``) and leaves the
row alone; the mailroom applies the outcome. Each outcome is pinned here to what the
owner and the database see: the row's state, the notice in the chat and its 🔁. A real
Kernel and channel against the Telegram simulator, real SQLite."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from telegram import Update

from kernel.core.i18n import t
from kernel.store.mailbox import InboxRow, InboxState
from kernel.telegram.outcome import ANSWERED, Close, Hold, Keep, Later, Outcome, cut, told
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import BotHarness, Factory
from tests.telegram.test_inbox import buttons
from tests.waiting import wait_until

_ids = iter(range(700_001, 800_000))


def payload(**content: Any) -> dict[str, Any]:
    """An owner's private message (``content``: its text, or its kind's field)."""
    message_id = next(_ids)
    message = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": {"id": OWNER, "type": "private", "first_name": "Owner"},
        "from": {"id": OWNER, "is_bot": False, "first_name": "Owner"},
        **content,
    }
    return {"update_id": message_id, "message": message}


async def take_in(h: BotHarness, body: dict[str, Any], kind: str = "text") -> InboxRow:
    """The message's row, open, as the gate records it."""
    mailroom = h.channel.mailroom
    row = await mailroom.mailbox.take_in(
        "telegram",
        str(OWNER),
        update_id=body["update_id"],
        message_id=body["message"]["message_id"],
        kind=kind,
        payload=body,
        now=mailroom.now(),
    )
    assert row is not None and row.state == "open"
    return row


async def state_of(h: BotHarness, row_id: int) -> InboxState:
    row = await h.channel.mailroom.mailbox.inbox_row(row_id)
    assert row is not None
    return row.state


async def becomes(h: BotHarness, row_id: int, state: InboxState) -> None:
    async def reached() -> bool:
        return await state_of(h, row_id) == state

    await wait_until(reached, what=f"inbox row {row_id} {state}")


def shown(h: BotHarness, text: str) -> list[ChatMessage]:
    return [m for m in h.bot_messages() if m.text == text]


@pytest.mark.parametrize(
    ("outcome", "state", "again"),
    [
        (told("This kind of file is refused: send a smaller one"), "failed", False),
        (told("The download failed: send it again", again=True), "failed", True),
        (told("Kernel stopped: send it again", "interrupted", again=True), "interrupted", True),
        (Close("cancelled"), "cancelled", False),
        (ANSWERED, "answered", False),
    ],
)
async def test_each_closing_outcome_settles_the_row_with_its_notice(
    bot: Factory, outcome: Close, state: InboxState, again: bool
) -> None:
    h = await bot()
    row = await take_in(h, payload(text="a message"))
    await h.channel.mailroom.apply(OWNER, row.id, outcome)
    await becomes(h, row.id, state)
    if outcome.notice is None:
        await h.settle()
        assert h.bot_messages() == []  # closed quietly: the reply said it, or /cancel did
        return
    await h.tg.wait_until(lambda: bool(shown(h, str(outcome.notice))), timeout=30)
    (notice,) = shown(h, str(outcome.notice))
    assert buttons(notice) == ([f"again:{row.id}"] if again else [])


async def test_keep_leaves_the_row_open_for_the_next_start_and_raises_its_error(
    bot: Factory,
) -> None:
    h = await bot()
    row = await take_in(h, payload(text="cut off by a stop"))
    await h.channel.mailroom.apply(OWNER, row.id, Keep())
    with pytest.raises(RuntimeError):
        await h.channel.mailroom.apply(OWNER, row.id, Keep(RuntimeError("boom")))
    await h.settle()
    assert await state_of(h, row.id) == "open"
    assert h.bot_messages() == []


async def test_hold_makes_the_row_wait_counted_by_the_busy_notice(bot: Factory) -> None:
    h = await bot()
    row = await take_in(h, payload(text="while busy"))
    await h.channel.mailroom.apply(OWNER, row.id, Hold())
    assert await state_of(h, row.id) == "waiting"
    held = t("tg.busy.held", count=1)
    await h.tg.wait_until(lambda: bool(shown(h, held)), timeout=30)
    assert buttons(shown(h, held)[0]) == ["busy:run", "busy:drop"]


async def test_later_work_is_the_chats_busy_task_and_its_outcome_is_applied(
    bot: Factory,
) -> None:
    h = await bot()
    row = await take_in(h, payload(text="read beside the queue"))
    release = asyncio.Event()

    async def work() -> Outcome:
        await release.wait()
        return told("read, then refused")

    await h.channel.mailroom.apply(OWNER, row.id, Later(work(), "tg-test-later"))
    assert h.channel.inbound.busy(OWNER)  # /status and a second message see it
    assert await state_of(h, row.id) == "open"
    release.set()
    await becomes(h, row.id, "failed")
    await h.tg.wait_until(lambda: bool(shown(h, "read, then refused")), timeout=30)
    await h.tg.wait_until(lambda: not h.channel.inbound.busy(OWNER), timeout=30)


async def test_later_work_cancelled_settles_cancelled_and_its_task_ends_cancelled(
    bot: Factory,
) -> None:
    """/cancel while a file is read: the work says ``cancelled`` and the task still
    ends cancelled (the close lands although the task was cancelled)."""
    h = await bot()
    row = await take_in(h, payload(text="a long download"))
    started = asyncio.Event()

    async def work() -> Outcome:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            return cut(exc, "cancelled")
        raise AssertionError("not reached")

    await h.channel.mailroom.apply(OWNER, row.id, Later(work(), "tg-test-cancel"))
    task = h.channel.deps.views.get(OWNER)
    assert task is not None
    await started.wait()
    task.cancel()
    await asyncio.wait({task})
    assert task.cancelled()
    await becomes(h, row.id, "cancelled")


async def test_inbound_returns_the_outcome_and_leaves_the_row_to_the_mailroom(
    bot: Factory,
) -> None:
    """An unsupported message: inbound reads it beside the update queue and says it is
    refused, the row untouched; the mailroom's applying it is what the owner sees."""
    h = await bot()
    body = payload(location={"latitude": 48.85, "longitude": 2.35})
    row = await take_in(h, body, kind="other")
    message = Update.de_json(body, h.channel.app.bot).message
    assert message is not None
    handle: Callable[..., Awaitable[Outcome]] = h.channel.inbound.handle
    outcome = await handle(message, row.id, None)
    assert isinstance(outcome, Later)
    refused = await outcome.work
    assert refused == told(t("tg.unsupported_message"))
    await h.settle()
    assert await state_of(h, row.id) == "open"  # inbound settled nothing
    assert h.bot_messages() == []
    await h.channel.mailroom.apply(OWNER, row.id, refused)
    await becomes(h, row.id, "failed")
    unsupported = "This kind of message is not supported: send text, a picture or a text file"
    await h.tg.wait_until(lambda: bool(shown(h, unsupported)), timeout=30)
    assert buttons(shown(h, unsupported)[0]) == []
