"""How often one Telegram exchange hands work to the database thread (issue 37): calls
queued together go in one hop (group commit), the records no one waits for (audit rows,
routing decisions) ride the next call that is waited for, a turn reads what it needs
at its start in one hop and stores its message with its memories' recall in another, and
the outbox neither reads back the rows a put hands it nor claims a row in two calls.
bench/db_hops.py shows each hop and the calls it carried."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import closing
from typing import Any

from kernel.store.db import Store
from kernel.telegram.items import retry_markup
from tests.sim.script import text_reply
from tests.telegram.conftest import Factory

# Hand-offs for a plain exchange after the first: 28 or 29 when every store call was
# its own hop (the placeholder still sent), 15-17 with group commit alone, 10 since the
# turn recalls its memories while its message is stored and the outbox claims a row in
# one call, takes a put's rows as written and writes a row's audit with its "sent" mark;
# 8 once the placeholder was gone and a tidy row's first try took no mark; 6 since the
# reply's row is claimed in the transaction that puts it and the tidy row's "sent" (no
# one waits for it) rides a later hop (issue 37). 7 when jieba is loaded in the process
# (another test used it): the query's terms are cut in a thread first, so the recall
# (one store call) misses the message's hop. 5 (6 with jieba) since the answer is
# queued, not waited for, and the reply's row, its 🔁 naming the answer (made on the
# database thread), rides its hop with the turn's end. More: a turn phase got hops
# back; the message lists each hop's calls. 4 (5 with jieba) since a turn's start
# assumes the session as the turn before read it, checked in the job that stores the
# message: one hop reads, checks and stores.
MOST_HOPS = 4


def count_hops(store: Store) -> list[str]:
    """Every hand-off to the store's database thread (its executor's submit), named by
    the calls it carried."""
    executor = store._executor
    assert executor is not None
    submit = executor.submit
    hops: list[str] = []

    def counted(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        jobs = args[-1] if args and isinstance(args[-1], list) else []
        hops.append(" + ".join(getattr(job, "op", "?") for job in jobs))
        return submit(fn, *args, **kwargs)

    executor.submit = counted  # type: ignore[method-assign]
    return hops


def rows(store: Store, sql: str) -> list[Any]:
    with closing(sqlite3.connect(store.path)) as conn:
        return [row[0] for row in conn.execute(sql)]


async def test_one_exchange_costs_a_counted_number_of_hops(bot: Factory) -> None:
    b = await bot()
    b.kernel.audit.anchor_every = 3600  # the anchor's check (a read) stays out of the count
    b.model.enqueue(text_reply("ok"), text_reply("fine"))
    assert await b.converse("first") == "ok"  # the session, the chat: made once
    store = b.kernel.store
    # Records no one waits for wait for the next waited call however slow the machine
    # is (in use, 5 ms at most): a loaded machine does not add hops to the count.
    store._courier.linger = 3600
    b.channel.outbox.tidy_linger = 3600
    hops = count_hops(store)

    assert await b.converse("hello") == "fine"

    listed = "\n".join(hops)
    # jieba loaded (another test used it): the recall's terms are cut in a thread first.
    most = MOST_HOPS + b.kernel.memories.tokenizer.loaded
    assert len(hops) <= most, f"{len(hops)} hops (at most {most}):\n{listed}"
    # The reply goes to a chat with nothing else unsent: its "sending" mark went with
    # the put (and the tidy row's first try takes none).
    assert not any("mark a message sending" in hop for hop in hops), listed
    # The tidy row (the first answer's 🔁 taken off) is done; its "sent" and its audit
    # row wait for company: the reply's mark is the only one written yet.
    assert sum("mark a message sent" in hop for hop in hops) == 1, listed
    # Turn start: one hop, the session read, checked and the message stored together
    # with its audit row (the first exchange read the session the second assumes).
    assert sum("begin a turn + audit append" in hop for hop in hops) == 1, listed
    assert not any("get session" in hop for hop in hops), listed
    # Model call done: one hop, the answer's row, the turn's end and the reply's row
    # together (the 🔁 names the answer's id, known only on the database thread).
    answered = "append messages + audit append + queue outgoing messages"
    assert sum(hop.endswith(answered) for hop in hops) == 1, listed
    await store.read("after", lambda conn: None)  # anything still queued is written first
    assert hops[-1] == "mark a message sent + audit append + after", listed
    assert rows(store, "SELECT state FROM inbox ORDER BY id") == ["answered", "answered"]
    assert set(rows(store, "SELECT state FROM outbox")) == {"sent"}
    assert sum("hello" in text for text in rows(store, "SELECT content FROM messages")) == 1
    kinds = rows(store, "SELECT kind FROM audit_events ORDER BY id")
    assert kinds.count("message.received") == kinds.count("turn.answered") == 2
    assert len(rows(store, "SELECT id FROM routing_decisions")) == 2
    answer = max(rows(store, "SELECT id FROM messages WHERE role = 'assistant'"))
    outbox = rows(store, "SELECT json_array(id, body) FROM outbox ORDER BY id")
    bodies = {row: json.loads(body) for row, body in map(json.loads, outbox)}
    shown = [row for row, body in bodies.items() if body.get("reply_markup")]
    # The reply's 🔁 names the stored answer; the first answer's was taken off.
    assert bodies[shown[-1]]["reply_markup"] == retry_markup(answer), bodies
    assert [body.get("of_row") for body in bodies.values() if body.get("tidy")] == shown[:1]
