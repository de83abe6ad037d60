"""The mailbox tables: inbox rows and their states, the outbox's order, recovery after a
death mid-send, settling a turn together with its reply, stats and pruning."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kernel.core.messages import Message, TextBlock
from kernel.core.rows import Later, RowId
from kernel.store.db import Store
from kernel.store.mailbox import Mailbox, OutboxItem

T0 = datetime(2026, 11, 25, 21, 3, tzinfo=UTC)


@pytest.fixture
async def mailbox(tmp_path: Path) -> AsyncIterator[Mailbox]:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        yield Mailbox(store)
    finally:
        await store.close()


async def take(box: Mailbox, update_id: int, state: str = "open") -> int:
    row = await box.take_in(
        "telegram",
        "42",
        update_id=update_id,
        message_id=update_id + 100,
        kind="text",
        payload={"update_id": update_id, "message": {"text": f"m{update_id}"}},
        now=T0 + timedelta(seconds=update_id),
        state=state,  # type: ignore[arg-type]
    )
    assert row is not None
    return row.id


async def test_an_update_is_taken_in_once(mailbox: Mailbox) -> None:
    first = await take(mailbox, 7)
    again = await mailbox.take_in(
        "telegram", "42", update_id=7, message_id=1, kind="text", payload={}, now=T0
    )
    assert again is None  # delivered twice by the platform: handled once
    row = await mailbox.inbox_row(first)
    assert row is not None and row.state == "open" and row.payload["message"]["text"] == "m7"
    assert row.received_at == T0 + timedelta(seconds=7)


async def test_settle_only_from_unsettled_states(mailbox: Mailbox) -> None:
    row_id = await take(mailbox, 1)
    assert await mailbox.settle(row_id, "answered", T0)
    assert not await mailbox.settle(row_id, "interrupted", T0)  # already settled
    row = await mailbox.inbox_row(row_id)
    assert row is not None and row.state == "answered" and row.closed_at == T0
    # 🔁 runs a settled message again: reopened explicitly from its settled state
    assert await mailbox.settle(row_id, "open", T0, only_from=("answered",))
    row = await mailbox.inbox_row(row_id)
    assert row is not None and row.state == "open" and row.closed_at is None


async def test_inbox_rows_by_state_oldest_first(mailbox: Mailbox) -> None:
    for update_id in (3, 1, 2):
        await take(mailbox, update_id, "waiting")
    await take(mailbox, 4)
    waiting = await mailbox.inbox_rows("telegram", ["waiting"])
    assert [row.update_id for row in waiting] == [3, 1, 2]  # in the order taken in
    assert len(await mailbox.inbox_rows("telegram", ["waiting", "open"])) == 4
    assert await mailbox.inbox_rows("qq", ["waiting"]) == []


async def test_put_settles_the_turn_in_the_same_transaction(mailbox: Mailbox) -> None:
    row_id = await take(mailbox, 1)
    await mailbox.set_placeholder(row_id, 555)
    items = [
        OutboxItem("send", {"text": "one", "parse_mode": "HTML", "replace": 555}),
        OutboxItem("send", {"text": "two", "parse_mode": "HTML"}),
    ]
    ids = await mailbox.put(
        "telegram",
        "42",
        items,
        now=T0,
        expires_at=T0 + timedelta(hours=24),
        settle=(row_id, "answered"),
    )
    assert ids == sorted(ids) and len(ids) == 2
    row = await mailbox.inbox_row(row_id)
    assert row is not None and row.state == "answered" and row.placeholder_id == 555
    unsent = await mailbox.unsent("telegram", "42")
    assert [r.body["text"] for r in unsent] == ["one", "two"]
    assert all(r.inbox_id == row_id and r.state == "pending" for r in unsent)


async def test_a_failed_put_settles_nothing(mailbox: Mailbox) -> None:
    row_id = await take(mailbox, 1)
    with pytest.raises(Exception, match="not JSON"):
        await mailbox.put(
            "telegram",
            "42",
            [OutboxItem("send", {"text": object()})],
            now=T0,
            expires_at=T0,
            settle=(row_id, "answered"),
        )
    row = await mailbox.inbox_row(row_id)
    assert row is not None and row.state == "open"


def retry(answer: int) -> dict[str, object]:
    return {"inline_keyboard": [[{"text": "again", "callback_data": f"retry:{answer}"}]]}


async def test_a_reply_names_an_answer_stored_in_the_same_hop(mailbox: Mailbox) -> None:
    """Issue 37: the answer's append is queued, not waited for, and the reply's row
    behind it names the answer's id (a Later, made on the database thread): one hop,
    one transaction; the rows come back as written, the 🔁 filled in."""
    store = mailbox.store
    session = await store.create_session("telegram")
    hops = store._courier.hops
    row = RowId()
    answer = Message("assistant", [TextBlock("the answer")])
    storing = store.append_messages_soon(session.id, [answer], [row])
    items = [OutboxItem("send", {"text": "the answer", "reply_markup": Later(row, retry)})]
    rows = await mailbox.queue("telegram", "42", items, now=T0, expires_at=T0)
    (answer_id,) = await storing
    assert store._courier.hops == hops + 1
    assert rows[0].body["reply_markup"] == retry(answer_id)
    (stored,) = await mailbox.unsent("telegram", "42")
    assert stored.id == rows[0].id and stored.body == rows[0].body


async def test_a_reply_whose_answer_was_not_stored_goes_without_its_button(
    mailbox: Mailbox,
) -> None:
    store = mailbox.store
    row = RowId()
    failing = store.append_messages_soon(999, [Message("assistant", [TextBlock("x")])], [row])
    items = [OutboxItem("send", {"text": "x", "reply_markup": Later(row, retry)})]
    rows = await mailbox.queue("telegram", "42", items, now=T0, expires_at=T0)
    with pytest.raises(Exception, match="session"):
        await failing
    assert rows[0].body == {"text": "x"}
    assert [r.body for r in await mailbox.unsent("telegram", "42")] == [{"text": "x"}]


async def test_a_death_mid_send_is_recovered_as_ambiguous(mailbox: Mailbox) -> None:
    items = [OutboxItem("send", {"text": "a"}), OutboxItem("edit", {"text": "b", "message_id": 3})]
    send_id, edit_id = await mailbox.put(
        "telegram", "42", items, now=T0, expires_at=T0 + timedelta(hours=1)
    )
    await mailbox.sending(send_id)
    await mailbox.sending(edit_id)
    assert await mailbox.recover("telegram") == 1
    send, edit = await mailbox.unsent("telegram")
    assert send.state == "pending" and send.ambiguous and send.attempts == 1
    assert edit.state == "pending" and not edit.ambiguous  # an edit repeats harmlessly


async def test_retry_sent_give_up_and_inbox_counts(mailbox: Mailbox) -> None:
    a, b, c = await mailbox.put(
        "telegram",
        "42",
        [OutboxItem("send", {"text": x}) for x in "abc"],
        now=T0,
        expires_at=T0 + timedelta(hours=1),
    )
    await mailbox.retry_at(a, T0 + timedelta(seconds=5), "NetworkError", ambiguous=True)
    await mailbox.retry_at(a, T0 + timedelta(seconds=9), "RetryAfter", ambiguous=False)
    row = await mailbox.outbox_row(a)
    assert row is not None and row.ambiguous and row.error == "RetryAfter"  # stays marked
    assert row.next_at == T0 + timedelta(seconds=9)
    await mailbox.sent(a, 77, T0)
    await mailbox.give_up([b], "expired", "NetworkError", T0)
    await take(mailbox, 1, "waiting")
    await take(mailbox, 2)
    counts = await mailbox.inbox_counts("telegram")
    assert (counts.open_turns, counts.waiting_updates) == (1, 1)
    assert [r.id for r in await mailbox.unsent("telegram")] == [c]
    sent = await mailbox.outbox_row(a)
    assert sent is not None and sent.message_id == 77 and sent.state == "sent"


async def test_prune_keeps_what_is_unsettled(mailbox: Mailbox, tmp_path: Path) -> None:
    old = await take(mailbox, 1)
    await mailbox.settle(old, "answered", T0)
    await take(mailbox, 2, "waiting")
    (done, _pending) = await mailbox.put(
        "telegram",
        "42",
        [OutboxItem("send", {"text": "x"})] * 2,
        now=T0,
        expires_at=T0,
        settle=None,
    )
    await mailbox.sent(done, 1, T0)
    assert await mailbox.prune(T0 + timedelta(days=1)) == 2
    assert await mailbox.inbox_row(old) is None
    assert len(await mailbox.inbox_rows("telegram", ["waiting"])) == 1
    assert len(await mailbox.unsent("telegram")) == 1
    await mailbox.store.close()
    with closing(sqlite3.connect(tmp_path / "kernel.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
