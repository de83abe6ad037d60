"""The durable outbox against the Bot API simulator: a real PTB bot, real SQLite.

Order per chat under faults, exactly-once delivery when an answer is lost (the re-send is
marked), unmarked retries when the API was never reached, expiry with one notice,
restarts, placeholders, the HTML fallback, and a refused row not blocking the next.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from telegram.error import NetworkError, TelegramError, TimedOut
from telegram.ext import ExtBot

from kernel.core.backoff import Backoff
from kernel.core.clock import Clock, SystemClock
from kernel.core.events import Completed, ErrorEvent, ToolCall, ToolResult
from kernel.core.i18n import t
from kernel.core.turns import Turn
from kernel.store.db import Store
from kernel.store.mailbox import Mailbox, OutboxItem
from kernel.telegram.aio_request import PoolTimeout
from kernel.telegram.budget import RateArgs, RateBudget
from kernel.telegram.calls import _never_reached
from kernel.telegram.mending import MendingRequest
from kernel.telegram.outbox import (
    BACKOFF,
    Outbox,
    Undeliverable,
    again_markup,
    delete_item,
    edit_item,
    plain_items,
    reply_items,
    retry_markup,
    unbutton_item,
)
from kernel.telegram.polling import PollingBot
from kernel.telegram.view import Chat, Looks, TurnView
from tests.conftest import free_port
from tests.sim.script import text_reply
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim, _Fault
from tests.telegram.conftest import Factory
from tests.telegram.virtual import JumpClock
from tests.waiting import wait_until

MARK = "↻ "
OTHER = 777


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Rig:
    tg: TelegramSim
    store: Store
    mailbox: Mailbox
    bot: ExtBot[RateArgs]
    outbox: Outbox

    def texts(self, chat: int = OWNER) -> list[str]:
        return [m.text for m in self.tg.chat(chat, from_bot=True)]


Make = Callable[..., Any]


def make_bot(base: str, clock: Clock | None = None) -> ExtBot[RateArgs]:
    # As the channel builds it: the view passes rate_limit_args for drafts and typing.
    # On a virtual clock the budget waits on it too.
    budget = RateBudget()
    if clock is not None:
        budget = RateBudget(clock=lambda: clock.now().timestamp(), sleep=clock.sleep)
    return ExtBot(
        DEFAULT_TOKEN,
        base_url=f"{base}/bot",
        request=MendingRequest(connect_timeout=2.0, read_timeout=2.0),
        rate_limiter=budget,
    )


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Make]:
    made: list[Rig] = []
    sims: list[TelegramSim] = []
    stores: dict[Path, Store] = {}

    async def make(
        *,
        tg: TelegramSim | None = None,
        expiry: timedelta = timedelta(hours=1),
        base: str | None = None,
        start: bool = True,
        backoff: Backoff = BACKOFF,
        clock: Clock | None = None,
    ) -> Rig:
        if tg is None:
            tg = await TelegramSim().start()
            tg.add_chat(OTHER)
            sims.append(tg)
        path = tmp_path / "kernel.db"
        store = stores.get(path)
        if store is None:
            store = stores[path] = Store(path)
            await store.start()
        mailbox = Mailbox(store)
        bot = make_bot(base or tg.api_base, clock)
        await bot.initialize()
        clock = clock or SystemClock()
        outbox = Outbox(mailbox, bot, expiry=expiry, clock=clock, backoff=backoff)
        if start:
            await outbox.start()
        r = Rig(tg, store, mailbox, bot, outbox)
        made.append(r)
        return r

    yield make
    for r in made:
        await r.outbox.stop(0)
        await r.bot.shutdown()
    for store in stores.values():
        await store.close()
    for tg in sims:
        await tg.stop()


async def test_a_reply_goes_out_in_order_and_tickets_give_message_ids(rig: Make) -> None:
    r = await rig()
    ticket = await r.outbox.put(OWNER, [*plain_items("one"), *plain_items("two")])
    ids = await ticket.wait()
    assert r.texts() == ["one", "two"]
    assert ids == [m.message_id for m in r.tg.chat(OWNER, from_bot=True)]
    assert not r.outbox.backlog(OWNER)
    assert r.outbox.stats()["undelivered"] == 0


async def test_send_returns_the_message_id(rig: Make) -> None:
    r = await rig()
    message_id = await r.outbox.send(OWNER, plain_items("hello")[0])
    assert r.tg.message(OWNER, message_id) is not None


async def test_a_lost_answer_is_resent_once_with_the_marker(rig: Make) -> None:
    r = await rig()
    r.tg.drop_connections("sendMessage", after_processing=True)
    await (await r.outbox.put(OWNER, plain_items("hello"))).wait()
    assert r.texts() == ["hello", MARK + "hello"]


async def test_a_dropped_request_is_resent_marked_never_plainly_twice(rig: Make) -> None:
    r = await rig()
    r.tg.drop_connections("sendMessage", times=2)
    await (await r.outbox.put(OWNER, plain_items("a") + plain_items("b"))).wait()
    assert r.texts() == [MARK + "a", "b"]


async def test_bad_gateway_for_a_while_then_delivered_once_in_order(rig: Make) -> None:
    clock = JumpClock()
    r = await rig(clock=clock)
    r.tg.fail("sendMessage", status=502, times=3)
    ticket = await r.outbox.put(OWNER, plain_items("first"))
    second = await r.outbox.put(OWNER, plain_items("second"))
    assert r.outbox.backlog(OWNER)
    jumps = await clock.run_until(lambda: not r.outbox.backlog(OWNER))
    await ticket.wait()
    await second.wait()
    # A 5xx is answered after the request reached the API: the re-send is marked.
    assert r.texts() == [MARK + "first", "second"]
    assert jumps[:3] == [1.0, 2.0, 4.0]  # the backoff: 1 s, doubling


async def test_the_backoff_doubles_to_five_minutes_on_the_virtual_clock(rig: Make) -> None:
    clock = JumpClock()
    r = await rig(clock=clock, expiry=timedelta(hours=2))
    r.tg.fail("sendMessage", status=502, times=11)
    ticket = await r.outbox.put(OWNER, plain_items("at last"))
    jumps = await clock.run_until(lambda: not r.outbox.backlog(OWNER))
    assert await ticket.states() == ["sent"]
    assert r.texts() == [MARK + "at last"]
    assert jumps[:11] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0]


async def test_rate_limited_is_retried_unmarked(rig: Make) -> None:
    clock = JumpClock()
    r = await rig(clock=clock)
    r.tg.fail("sendMessage", status=429, retry_after=1, times=5)  # beyond any inner retry
    ticket = await r.outbox.put(OWNER, plain_items("patient"))
    async with clock.driving():
        await ticket.wait()
    assert r.texts() == ["patient"]


async def test_a_429s_retry_after_is_the_wait_whatever_the_backoff(rig: Make) -> None:
    clock = JumpClock()
    r = await rig(clock=clock, backoff=Backoff(1.0, 2.0))
    # The budget retries 3 times itself (4 calls), then the outbox waits: Telegram's 7 s.
    r.tg.fail("sendMessage", status=429, retry_after=7, times=6)
    ticket = await r.outbox.put(OWNER, plain_items("patient"))
    async with clock.driving() as jumps:
        assert await ticket.states() == ["sent"]
    row = await r.mailbox.outbox_row(ticket.ids[0])
    assert row is not None and row.attempts == 2  # the outbox's second try went through
    assert jumps[:6] == [7.0] * 6  # Telegram's wait each time, above the backoff's cap
    assert r.texts() == ["patient"]  # a 429 never reached the chat: unmarked


async def test_connection_refused_is_retried_unmarked(rig: Make, tmp_path: Path) -> None:
    # A port nobody listens on: connecting fails, so the API was never reached.
    port = free_port()
    tg = await TelegramSim(port=port).start()
    clock = JumpClock()
    r = await rig(tg=tg, clock=clock)
    await tg.stop()
    ticket = await r.outbox.put(OWNER, plain_items("later"))
    await wait_for_attempt(r, ticket.ids[0])  # at least one refused attempt
    row = await r.mailbox.outbox_row(ticket.ids[0])
    assert row is not None and row.attempts >= 1 and row.state == "pending"
    await tg.start()
    try:
        async with clock.driving():
            await ticket.wait()
        assert r.texts() == ["later"]
    finally:
        await tg.stop()


async def test_expiry_expires_the_blocked_rows_and_tells_once(rig: Make) -> None:
    clock = JumpClock()
    r = await rig(expiry=timedelta(seconds=2), clock=clock)
    r.tg.fail("sendMessage", status=502, times=1000)
    ticket = await r.outbox.put(OWNER, plain_items("a") + plain_items("b"))
    clock.advance(0.3)
    more = await r.outbox.put(OWNER, plain_items("c"))
    async with clock.driving():
        assert await ticket.states() == ["expired", "expired"]
        assert await more.states() == ["expired"]
    r.tg._faults.clear()
    await clock.run_until(lambda: len(r.texts()) == 1)
    (notice,) = r.texts()
    assert "3 messages could not be delivered" in notice or "3 条消息" in notice
    for _ in range(3):  # minutes go by: nothing more is told
        await clock.jump()
    assert len(r.texts()) == 1


async def test_restart_delivers_what_was_queued(rig: Make) -> None:
    first = await rig(start=False)
    await first.outbox.put(OWNER, plain_items("queued before") + plain_items("the restart"))
    await first.outbox.stop(0)
    second = await rig(tg=first.tg)
    await first.tg.wait_until(lambda: len(second.texts()) == 2)
    assert second.texts() == ["queued before", "the restart"]


async def test_a_tidy_row_goes_after_later_rows_and_a_restart_still_delivers_it(
    rig: Make,
) -> None:
    """Issue 37: taking an old 🔁 away never costs an answer its turn: the tidy rows wait
    behind every later row (and for a token to spare), and stay on record until then."""
    first = await rig(start=False)
    a = await first.outbox.put(OWNER, plain_items("answer a", markup=retry_markup(1)))
    b = await first.outbox.put(
        OWNER, [*plain_items("answer b", markup=retry_markup(2)), unbutton_item(a.ids[0])]
    )
    await first.outbox.put(
        OWNER, [*plain_items("answer c", markup=retry_markup(3)), unbutton_item(b.ids[0])]
    )
    await first.outbox.stop(0)  # all of it waits in the table for the next start
    second = await rig(tg=first.tg)
    await first.tg.wait_until(
        lambda: len(second.texts()) == 3 and not second.outbox.undelivered(OWNER)
    )
    calls = [c.method for c in first.tg.calls if c.method != "getMe"]
    assert calls == [*["sendMessage"] * 3, *["editMessageReplyMarkup"] * 2]
    shown = second.tg.chat(OWNER, from_bot=True)
    assert [m.text for m in shown if m.reply_markup] == ["answer c"]  # one live 🔁


async def test_a_row_cut_mid_send_is_resent_marked_after_restart(rig: Make) -> None:
    first = await rig(start=False)
    ticket = await first.outbox.put(OWNER, plain_items("maybe"))
    await first.mailbox.sending(ticket.ids[0])  # the process died during the call
    second = await rig(tg=first.tg)
    await first.tg.wait_until(lambda: len(second.texts()) == 1)
    assert second.texts() == [MARK + "maybe"]


async def stuck_worker(r: Rig) -> None:
    """The outbox's workers never get to a row (the process is about to stop or die)."""

    async def step(*_: object) -> None:
        await asyncio.Event().wait()

    r.outbox._step = step  # type: ignore[method-assign]


async def state_of(r: Rig, row_id: int) -> tuple[str, int]:
    row = await r.mailbox.outbox_row(row_id)
    assert row is not None
    return row.state, row.attempts


async def test_a_send_for_now_is_claimed_in_the_put_and_tried_without_a_claim(
    rig: Make,
) -> None:
    """Issue 37: a send the chat's worker calls for next takes its ``sending`` mark in
    the transaction that puts it, not in a store call of its own before the call; the
    rows behind it are claimed as before."""
    r = await rig()
    claimed: list[int] = []
    claim = r.mailbox.claim

    async def watched(row_id: int, of_row: int | None = None) -> tuple[bool, int | None]:
        claimed.append(row_id)
        return await claim(row_id, of_row)

    r.mailbox.claim = watched  # type: ignore[method-assign]
    ticket = await r.outbox.put(OWNER, [*plain_items("one"), *plain_items("two")])
    await ticket.wait()
    assert r.texts() == ["one", "two"]
    assert claimed == [ticket.ids[1]]
    assert [await state_of(r, i) for i in ticket.ids] == [("sent", 1), ("sent", 1)]


async def test_a_stop_before_the_call_takes_back_the_claim_made_with_the_put(
    rig: Make,
) -> None:
    """A row claimed as it was put but never called for is pending again after a stop:
    the next start sends it unmarked, as a row that never left."""
    first = await rig()
    await stuck_worker(first)
    ticket = await first.outbox.put(OWNER, plain_items("not yet"))
    assert await state_of(first, ticket.ids[0]) == ("sending", 1)
    await first.outbox.stop(0)
    assert await state_of(first, ticket.ids[0]) == ("pending", 0)
    second = await rig(tg=first.tg)
    await first.tg.wait_until(lambda: len(second.texts()) == 1)
    assert second.texts() == ["not yet"]


async def test_a_death_after_a_put_claimed_for_now_resends_marked(rig: Make) -> None:
    """A death after the put is a death after the claim: the row may have gone, so it
    is re-sent marked (never an unmarked duplicate)."""
    first = await rig()
    await stuck_worker(first)
    ticket = await first.outbox.put(OWNER, plain_items("maybe"))
    second = await rig(tg=first.tg)  # the process died: a new one starts on its table
    await first.tg.wait_until(lambda: len(second.texts()) == 1)
    assert second.texts() == [MARK + "maybe"]

    async def recorded() -> bool:
        return await state_of(second, ticket.ids[0]) == ("sent", 2)

    await wait_until(recorded, what="the re-send recorded sent")


async def test_the_placeholder_is_replaced(rig: Make) -> None:
    r = await rig()
    placeholder = (await r.bot.send_message(OWNER, "working…")).message_id
    items = reply_items("**done**", replace=placeholder)
    ids = await (await r.outbox.put(OWNER, items)).wait()
    assert ids == [placeholder]
    assert r.texts() == ["done"]


async def test_a_gone_placeholder_is_sent_anew(rig: Make) -> None:
    r = await rig()
    placeholder = (await r.bot.send_message(OWNER, "working…")).message_id
    await r.bot.delete_message(OWNER, placeholder)
    await (await r.outbox.put(OWNER, plain_items("fresh", replace=placeholder))).wait()
    assert r.texts() == ["fresh"]


async def test_html_the_api_refuses_goes_as_plain_text(rig: Make) -> None:
    r = await rig()
    item = OutboxItem("send", {"text": "<b>bold</i> &amp; more", "parse_mode": "HTML"})
    await (await r.outbox.put(OWNER, [item])).wait()
    assert r.texts() == ["bold & more"]


async def test_a_forbidden_row_does_not_block_the_next(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=403, times=1)
    ticket = await r.outbox.put(OWNER, plain_items("refused") + plain_items("next"))
    assert await ticket.states() == ["failed", "sent"]
    assert r.texts() == ["next"]
    with pytest.raises(Undeliverable):
        r.tg.fail("sendMessage", status=403, times=1)
        await r.outbox.send(OWNER, plain_items("refused again")[0])


async def test_chats_do_not_block_each_other(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=429, retry_after=3600)  # the owner's chat waits an hour
    slow = await r.outbox.put(OWNER, plain_items("owner"))
    await r.tg.wait_until(lambda: any(c.status == 429 for c in r.tg.calls))
    other = await r.outbox.put(OTHER, plain_items("other"))
    await other.wait()
    assert [m.text for m in r.tg.chat(OTHER, from_bot=True)] == ["other"]
    assert r.outbox.backlog(OWNER) and not r.outbox.backlog(OTHER)
    row = await r.mailbox.outbox_row(slow.ids[0])
    assert row is not None and row.state == "pending"


async def test_edits_and_deletes_of_gone_messages_are_done(rig: Make) -> None:
    r = await rig()
    message_id = await r.outbox.send(OWNER, plain_items("question", markup=again_markup(5))[0])
    ticket = await r.outbox.put(
        OWNER,
        [
            edit_item(message_id, "question\n\nclosed"),
            edit_item(message_id, "question\n\nclosed"),  # not modified
            delete_item(message_id),
            delete_item(message_id),  # already gone
            edit_item(message_id, "too late"),  # gone
        ],
    )
    assert await ticket.states() == ["sent"] * 5
    assert r.texts() == []


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_order_holds_under_faults(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=502, times=2)
    r.tg.drop_connections("sendMessage", times=1, after_processing=True)
    tickets = [await r.outbox.put(OWNER, plain_items(f"m{n}")) for n in range(8)]
    for ticket in tickets:
        await ticket.wait()
    shown = [text.removeprefix(MARK) for text in r.texts()]
    deduped = [text for i, text in enumerate(shown) if i == 0 or shown[i - 1] != text]
    assert deduped == [f"m{n}" for n in range(8)]
    assert len(shown) <= 9


# ----- the store fails around a call; cancels; outages ending; refusals -----------------


def lock_database(r: Rig) -> sqlite3.Connection:
    """Another connection takes the write lock: every write of the Store now waits its
    busy timeout and fails with "database is locked" until :func:`unlock`."""
    other = sqlite3.connect(r.store.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    return other


def unlock(other: sqlite3.Connection) -> None:
    other.execute("ROLLBACK")
    other.close()


async def store_fails_once_the_sim_has(r: Rig, text: str, caplog: pytest.LogCaptureFixture) -> None:
    """Lock the database the moment the simulator took the message (before the bot
    reads the answer), hold it until the worker's write failed, then let go."""
    await r.tg.wait_until(lambda: text in r.texts())
    other = lock_database(r)
    try:
        await r.tg.wait_until(lambda: "outbox step failed" in caplog.text)
    finally:
        unlock(other)


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_a_store_failure_after_the_send_does_not_send_it_again(
    rig: Make, caplog: pytest.LogCaptureFixture
) -> None:
    r = await rig()
    locker = asyncio.create_task(store_fails_once_the_sim_has(r, "hello", caplog))
    ticket = await r.outbox.put(OWNER, plain_items("hello"))
    await locker
    assert await ticket.states() == ["sent"]
    assert r.texts() == ["hello"]  # its message id was known: only the record was retried
    row = await r.mailbox.outbox_row(ticket.ids[0])
    assert row is not None and row.state == "sent" and row.message_id is not None


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_a_store_failure_after_a_lost_answer_resends_marked(
    rig: Make, caplog: pytest.LogCaptureFixture
) -> None:
    r = await rig()
    r.tg.drop_connections("sendMessage", after_processing=True)
    locker = asyncio.create_task(store_fails_once_the_sim_has(r, "hello", caplog))
    ticket = await r.outbox.put(OWNER, plain_items("hello"))
    await locker
    assert await ticket.states() == ["sent"]
    assert r.texts() == ["hello", MARK + "hello"]


async def test_a_put_cancelled_while_it_writes_is_still_delivered(rig: Make) -> None:
    r = await rig()  # no row yet: no worker for the chat until a put starts one
    other = lock_database(r)
    try:
        put = asyncio.create_task(r.outbox.put(OWNER, plain_items("kept")))
        await asyncio.sleep(0.2)  # the write is waiting for the lock
        put.cancel()
    finally:
        unlock(other)
    with pytest.raises(asyncio.CancelledError):
        await put
    await r.tg.wait_until(lambda: bool(r.texts()) and r.outbox.stats()["undelivered"] == 0)
    assert r.texts() == ["kept"]


async def test_a_row_queued_later_keeps_its_own_expiry(rig: Make) -> None:
    clock = JumpClock()
    began = clock.now()
    r = await rig(expiry=timedelta(seconds=6), clock=clock)
    r.tg.fail("sendMessage", status=502, times=1000)
    old = await r.outbox.put(OWNER, plain_items("old"))
    await clock.run_until(lambda: clock.now() >= began + timedelta(seconds=3))
    fresh = await r.outbox.put(OWNER, plain_items("fresh"))
    async with clock.driving():
        assert await old.states() == ["expired"]
    r.tg._faults.clear()
    async with clock.driving():
        assert await fresh.states() == ["sent"]
    await r.tg.wait_until(lambda: len(r.texts()) == 2)
    shown, notice = r.texts()
    assert shown.removeprefix(MARK) == "fresh"
    assert "1 messages could not be delivered" in notice or "1 条消息" in notice


async def test_the_end_of_an_outage_is_heard_at_once(rig: Make) -> None:
    port = free_port()
    tg = await TelegramSim(port=port).start()
    r = await rig(tg=tg, backoff=Backoff(3600.0, 3600.0))  # without a nudge: an hour's wait
    polls = PollingBot(DEFAULT_TOKEN, base_url=f"{tg.api_base}/bot")
    polls.recovery_listeners.append(r.outbox.nudge)
    await polls.initialize()
    await tg.stop()
    try:
        ticket = await r.outbox.put(OWNER, plain_items("after the outage"))
        await wait_for_attempt(r, ticket.ids[0])
        with pytest.raises(TelegramError):
            await polls.get_updates(timeout=0)  # polling sees the outage too
        await tg.start()
        await polls.get_updates(timeout=0)  # and hears the end of it: the outbox goes
        assert await ticket.states() == ["sent"]
        assert r.texts() == ["after the outage"]  # connection refused: never reached
    finally:
        await polls.shutdown()
        await tg.stop()


async def test_a_delivery_elsewhere_ends_a_chats_wait_for_the_network(rig: Make) -> None:
    port = free_port()
    tg = await TelegramSim(port=port).start()
    tg.add_chat(OTHER)
    r = await rig(tg=tg, backoff=Backoff(3600.0, 3600.0))
    await tg.stop()
    try:
        ticket = await r.outbox.put(OWNER, plain_items("held"))
        await wait_for_attempt(r, ticket.ids[0])
        await tg.start()
        await (await r.outbox.put(OTHER, plain_items("new"))).wait()
        assert await ticket.states() == ["sent"]
        assert r.texts() == ["held"]
    finally:
        await tg.stop()


async def test_a_429_wait_is_not_cut_short_by_a_nudge(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=429, retry_after=3600, times=100)
    ticket = await r.outbox.put(OWNER, plain_items("patient"))
    await r.tg.wait_until(lambda: any(c.status == 429 for c in r.tg.calls))
    await wait_for_attempt(r, ticket.ids[0])
    calls = len(r.tg.calls)
    r.outbox.nudge()
    await asyncio.sleep(0.3)
    assert len(r.tg.calls) == calls


async def wait_for_attempt(r: Rig, row_id: int, *, attempts: int = 1) -> None:
    async def tried() -> bool:
        row = await r.mailbox.outbox_row(row_id)
        return row is not None and row.attempts >= attempts and row.state == "pending"

    await wait_until(tried, what=f"outbox row {row_id} tried {attempts} time(s)")


async def test_a_refused_reply_is_told_once_in_plain_words(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=400, description="Bad Request: message is too long", times=2)
    ticket = await r.outbox.put(OWNER, [*plain_items("one"), *plain_items("two")])
    last = await r.outbox.put(OWNER, plain_items("three"))
    assert await ticket.states() == ["failed", "failed"]
    assert await last.states() == ["sent"]
    await r.tg.wait_until(lambda: len(r.texts()) == 2)
    await r.tg.wait_until(lambda: not r.outbox.backlog(OWNER))
    assert r.texts() == ["three", t("tg.chunk_refused")]


async def test_a_refused_notice_or_a_blocked_chat_is_not_told(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=403, description="Forbidden: bot was blocked by the user")
    assert await (await r.outbox.put(OWNER, plain_items("blocked"))).states() == ["failed"]
    r.tg.fail("sendMessage", status=400, description="Bad Request: chat not found", times=2)
    assert await (await r.outbox.put(OWNER, plain_items("refused"))).states() == ["failed"]
    # The notice of the refused reply was tried (and refused too); nothing more.
    await r.tg.wait_until(lambda: len(sends(r)) == 3 and not r.outbox.backlog(OWNER))
    assert sends(r)[2].params["text"] == t("tg.chunk_refused")
    assert r.texts() == []


async def test_a_refusal_its_caller_handles_is_not_told_again(rig: Make) -> None:
    r = await rig()  # send(): the caller (a question) gets Undeliverable and tells itself
    r.tg.fail("sendMessage", status=400, description="Bad Request: chat not found")
    with pytest.raises(Undeliverable):
        await r.outbox.send(OWNER, plain_items("a question")[0])
    await (await r.outbox.put(OWNER, plain_items("next"))).wait()
    assert r.texts() == ["next"]
    assert len(sends(r)) == 2


def sends(r: Rig) -> list[Any]:
    return [c for c in r.tg.calls if c.method == "sendMessage"]


# ----- the turn view: its outcome goes through the outbox and settles the inbox row ------


async def open_row(r: Rig, update_id: int = 1) -> int:
    row = await r.mailbox.take_in(
        "telegram",
        str(OWNER),
        update_id=update_id,
        message_id=update_id,
        kind="text",
        payload={"update_id": update_id},
        now=now(),
    )
    assert row is not None
    return row.id


def view(r: Rig, inbox_id: int | None, *, stopping: bool = False) -> TurnView:
    return TurnView(
        Chat(r.bot, r.outbox, OWNER),
        Looks(drafts=False, interrupted=lambda: stopping),
        inbox_id=inbox_id,
    )


async def run(v: TurnView, *events: Any) -> None:
    turn = Turn(f"telegram:{OWNER}")
    shown = asyncio.create_task(v.show(turn))
    await asyncio.sleep(0)
    for event in events:
        turn.emit(event)
    await shown


async def outcome(r: Rig, inbox_id: int) -> tuple[str, int | None]:
    await r.tg.wait_until(lambda: not r.outbox.backlog(OWNER))
    row = await r.mailbox.inbox_row(inbox_id)
    assert row is not None
    return row.state, row.placeholder_id


async def test_the_reply_comes_anew_the_placeholder_goes_and_the_row_is_answered(
    rig: Make,
) -> None:
    r = await rig()
    inbox_id = await open_row(r)
    await run(view(r, inbox_id), Completed(1, "**hello**"))
    state, placeholder = await outcome(r, inbox_id)
    assert state == "answered"
    assert r.texts() == ["hello"]  # a new message, the one that notifies (issue 34)
    # Nothing came before it (issue 37: a plain exchange sends one message).
    assert [m.text for m in r.tg.history(OWNER)] == ["hello"] and placeholder is None

    # A tool's line (drafts off) comes in a silent placeholder, on record while the
    # turn runs, and goes once the answer came.
    tooled = await open_row(r, update_id=2)
    call = ToolCall(1, "call-1", "memory_add", {"text": "likes tea"})
    done = ToolResult(1, "call-1", "memory_add", True, "ok")
    await run(view(r, tooled), call, done, Completed(1, "noted"))
    state, placeholder = await outcome(r, tooled)
    assert state == "answered"
    line = r.tg.history(OWNER)[1]
    assert line.text == t("tg.working_tool", name="memory_add") and line.deleted
    assert placeholder == line.message_id
    assert r.texts() == ["hello", "noted"]


async def test_an_error_is_told_with_the_again_button_and_fails_the_row(rig: Make) -> None:
    r = await rig()
    inbox_id = await open_row(r)
    await run(view(r, inbox_id), ErrorEvent(1, "provider_error", "the model is down"))
    state, _ = await outcome(r, inbox_id)
    assert state == "failed"
    (notice,) = r.tg.chat(OWNER, from_bot=True)
    assert "the model is down" in notice.text
    assert notice.reply_markup == again_markup(inbox_id)


async def test_a_stop_tells_interrupted_with_the_again_button(rig: Make) -> None:
    r = await rig()
    inbox_id = await open_row(r)
    await run(view(r, inbox_id, stopping=True), Completed(1, "", cancelled=True))
    state, _ = await outcome(r, inbox_id)
    assert state == "interrupted"
    (notice,) = r.tg.chat(OWNER, from_bot=True)
    assert notice.reply_markup == again_markup(inbox_id)


async def test_cancel_deletes_the_placeholder_and_cancels_the_row(rig: Make) -> None:
    r = await rig()
    inbox_id = await open_row(r)
    await run(view(r, inbox_id), Completed(1, "", cancelled=True))
    state, _ = await outcome(r, inbox_id)
    assert state == "cancelled"
    assert r.texts() == []


async def test_no_placeholder_jumps_a_backlog(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=429, retry_after=2)
    await r.outbox.put(OWNER, plain_items("earlier"))
    await r.tg.wait_until(lambda: any(c.status == 429 for c in r.tg.calls))
    inbox_id = await open_row(r)
    await run(view(r, inbox_id), Completed(1, "later"))
    state, placeholder = await outcome(r, inbox_id)
    assert (state, placeholder) == ("answered", None)
    assert r.texts() == ["earlier", "later"]


async def test_a_view_without_an_inbox_row_still_delivers(rig: Make) -> None:
    r = await rig()
    await run(view(r, None), Completed(1, "plain"))
    await r.tg.wait_until(lambda: r.texts() == ["plain"])


async def test_stop_gives_queued_rows_their_drain(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=502)
    ticket = await r.outbox.put(OWNER, plain_items("before the stop"))
    await r.outbox.stop(30)
    assert r.texts() == [MARK + "before the stop"]
    assert await ticket.states() == ["sent"]


# ----- the running channel ----------------------------------------------------------------


async def test_a_lost_answer_to_the_reply_edit_does_not_duplicate(bot: Factory) -> None:
    h = await bot()
    h.tg.drop_connections("editMessageText", after_processing=True)
    h.model.enqueue(text_reply("exactly once"))
    h.tg.inject_text("hi")
    await h.tg.wait_until(lambda: "exactly once" in h.texts())
    await h.settle()
    assert h.texts() == ["exactly once"]


async def test_a_lost_answer_to_a_command_reply_is_resent_marked(bot: Factory) -> None:
    h = await bot()
    h.tg.drop_connections("sendMessage", after_processing=True)
    h.tg.inject_text("/unknowncommand")
    await h.tg.wait_until(lambda: len(h.texts()) == 2)
    await h.settle()
    first, again = h.texts()
    assert again == MARK + first


async def test_a_read_timeout_counts_as_maybe_delivered(rig: Make) -> None:
    r = await rig()  # the bot's read timeout is 2 s; this call gets no answer for 5
    r.tg._add_fault("sendMessage", _Fault("hang", seconds=5.0), 1)
    await (await r.outbox.put(OWNER, plain_items("slow"))).wait()
    assert r.texts() == [MARK + "slow"]


def caused(error: TelegramError, cause: BaseException) -> TelegramError:
    error.__cause__ = cause
    return error


def test_only_a_request_that_never_left_counts_as_not_reached() -> None:
    # A refused connection, on the wire: tests/telegram/test_aio_request.py.
    assert _never_reached(caused(TimedOut(), aiohttp.ConnectionTimeoutError("slow connect")))
    assert _never_reached(caused(TimedOut(), PoolTimeout()))
    assert not _never_reached(caused(TimedOut(), aiohttp.SocketTimeoutError("read")))
    assert not _never_reached(caused(NetworkError("x"), aiohttp.ServerDisconnectedError()))
    assert not _never_reached(caused(NetworkError("x"), aiohttp.ClientOSError(104, "reset")))
    assert not _never_reached(NetworkError("Bad Gateway"))  # a 5xx: it got there
