"""How often one Telegram exchange hands work to the database thread (issue 37): calls
queued together go in one hop (group commit), the records no one waits for (audit rows,
routing decisions) ride the next call that is waited for, and a turn reads what it needs
at its start in one hop. bench/db_hops.py shows each hop and the calls it carried."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import closing
from typing import Any

from kernel.store.db import Store
from tests.sim.script import text_reply
from tests.telegram.conftest import Factory

# Hand-offs for a plain exchange after the first, the placeholder still sent: 29 when
# every store call was its own hop, 17 now (and the audit anchor's check may fall in).
# A new hop in a turn phase shows here.
MOST_HOPS = 18


def count_hops(store: Store) -> list[int]:
    """Count every hand-off to the store's database thread (its executor's submit)."""
    executor = store._executor
    assert executor is not None
    submit = executor.submit
    count = [0]

    def counted(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        count[0] += 1
        return submit(fn, *args, **kwargs)

    executor.submit = counted  # type: ignore[method-assign]
    return count


def rows(store: Store, sql: str) -> list[Any]:
    with closing(sqlite3.connect(store.path)) as conn:
        return [row[0] for row in conn.execute(sql)]


async def test_one_exchange_costs_a_counted_number_of_hops(bot: Factory) -> None:
    b = await bot()
    b.model.enqueue(text_reply("ok"), text_reply("fine"))
    assert await b.converse("first") == "ok"  # the session, the chat: made once
    store = b.kernel.store
    # Records no one waits for wait for the next waited call however slow the machine
    # (in use they wait 5 ms at most): the count does not depend on timing.
    store._courier.linger = 3600
    # The audit anchor's check (a read, at most once a second) falls in at most once.
    b.kernel.audit.anchor_every = 3600
    hops = count_hops(store)

    assert await b.converse("hello") == "fine"

    assert hops[0] <= MOST_HOPS, f"{hops[0]} hops for one exchange (at most {MOST_HOPS})"
    await store.read("after", lambda conn: None)  # anything still queued is written first
    assert rows(store, "SELECT state FROM inbox ORDER BY id") == ["answered", "answered"]
    assert sum("hello" in text for text in rows(store, "SELECT content FROM messages")) == 1
    kinds = rows(store, "SELECT kind FROM audit_events ORDER BY id")
    assert kinds.count("message.received") == kinds.count("turn.answered") == 2
    assert len(rows(store, "SELECT id FROM routing_decisions")) == 2
