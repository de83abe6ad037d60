"""The audit chains (issue 23) in a real SQLite file: appended in order, verified, and
every edit, deletion, reorder or unrecorded emptying named by its first broken row."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from kernel.audit import AuditLog
from kernel.core.messages import Message, TextBlock
from kernel.store.db import Store
from tests.waiting import wait_until


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    yield store
    await store.close()


async def _fill(store: Store) -> tuple[AuditLog, int, int]:
    audit = AuditLog(store)
    a = (await store.create_session("telegram")).id
    b = (await store.create_session("telegram")).id
    [asked] = await store.append_messages(a, [Message("user", [TextBlock("what's up?")])])
    await audit.record("message.received", session_id=a, actor="owner", messages=[asked])
    await audit.record("tool.call", session_id=a, actor="model", tool="memory_search", ok=True)
    await audit.record("config.changed", sections=["providers"])
    await audit.record("message.received", session_id=b, actor="owner")
    [answer] = await store.append_messages(a, [Message("assistant", [TextBlock("fine")])])
    await audit.record("turn.answered", session_id=a, messages=[answer], outcome="answered")
    return audit, a, b


def _sql(store: Store, sql: str, *args: object) -> None:
    with closing(sqlite3.connect(store.path)) as conn:
        conn.execute(sql, args)
        conn.commit()


async def test_whole_chains_verify(store: Store) -> None:
    audit, a, b = await _fill(store)
    assert (await audit.verify(a)).as_json() == {"ok": True, "checked": 3, "pruned": 0}
    assert (await audit.verify(b)).ok
    assert (await audit.verify()).as_json() == {"ok": True, "checked": 5, "pruned": 0}
    rows = await audit.events(a)
    assert [(r.seq, r.kind) for r in rows] == [
        (1, "message.received"),
        (2, "tool.call"),
        (3, "turn.answered"),
    ]
    # Referenced, not copied: the message is an id and its content's hash.
    ref = rows[0].data["messages"][0] if rows[0].data else {}
    assert set(ref) == {"id", "sha256"} and "what's up" not in str(rows[0].data)


@pytest.mark.parametrize(
    ("sql", "session_seq", "global_seq", "reason"),
    [
        ('UPDATE audit_events SET data = \'{"tool":"x"}\' WHERE id = 2', 2, 2, "edited"),
        ("UPDATE audit_events SET actor = 'owner' WHERE id = 2", 2, 2, "edited"),
        ("DELETE FROM audit_events WHERE id = 2", 2, 2, "missing"),
        ("DELETE FROM audit_events WHERE id = 5", 3, 5, "missing"),
        ("UPDATE audit_events SET data = NULL, pruned = 1 WHERE id = 2", 2, 2, None),
    ],
)
async def test_tampering_is_named(
    store: Store, sql: str, session_seq: int, global_seq: int, reason: str | None
) -> None:
    audit, a, _ = await _fill(store)
    _sql(store, sql)
    session, whole = await audit.verify(a), await audit.verify()
    assert not session.ok and not whole.ok
    assert session.first_broken_seq == session_seq
    assert whole.first_broken_seq == global_seq
    assert session.reason == (reason or "pruned_unrecorded")
    assert whole.as_json()["firstBrokenSeq"] == global_seq


async def test_a_recomputed_digest_still_breaks_the_link(store: Store) -> None:
    from kernel.store.audit import digest_of, sha256

    audit, a, _ = await _fill(store)
    with closing(sqlite3.connect(store.path)) as conn:
        rid, sid, seq, at, kind, actor = conn.execute(
            "SELECT id, session_id, seq, at, kind, actor FROM audit_events WHERE id = 2"
        ).fetchone()
        forged = '{"ok":false,"tool":"memory_search"}'
        conn.execute(
            "UPDATE audit_events SET data = ?, data_sha256 = ?, digest = ? WHERE id = 2",
            (forged, sha256(forged), digest_of(rid, sid, seq, at, kind, actor, sha256(forged))),
        )
        conn.commit()
    verdict = await audit.verify(a)
    assert (verdict.ok, verdict.first_broken_seq, verdict.reason) == (False, 2, "link")


async def test_an_edited_message_breaks_its_reference(store: Store) -> None:
    audit, a, _ = await _fill(store)
    _sql(store, 'UPDATE messages SET content = \'[{"type":"text","text":"hi"}]\' WHERE id = 1')
    verdict = await audit.verify(a)
    assert (verdict.first_broken_seq, verdict.reason) == (1, "message_edited")


async def test_deleted_history_prunes_and_still_verifies(store: Store) -> None:
    audit, a, b = await _fill(store)
    assert await store.delete_sessions([a]) == 1
    assert (await audit.verify(a)).as_json() == {"ok": True, "checked": 3, "pruned": 3}
    whole = await audit.verify()
    assert whole.ok and whole.checked == 6 and whole.pruned == 3
    last = (await audit.events())[-1]
    assert last.kind == "audit.pruned" and last.data == {
        "rows": 3,
        "sessions": [a],
        "why": "session deleted",
        "upto": {str(a): 3},
    }
    assert all(r.data is None for r in await audit.events(a))
    await store.clear_messages(b)
    assert (await audit.verify()).ok and (await audit.verify(b)).pruned == 1


async def test_a_deleted_tail_is_caught_by_the_head(store: Store) -> None:
    audit, a, _ = await _fill(store)
    _sql(store, "DELETE FROM audit_events WHERE id = 5")
    verdict = await audit.verify()
    assert (verdict.first_broken_seq, verdict.reason) == (5, "missing")


async def test_the_anchor_outside_the_database_catches_a_wiped_record(
    store: Store, tmp_path: Path
) -> None:
    from kernel.audit.anchor import read_anchor

    anchor = tmp_path / "audit.anchor"
    audit = AuditLog(store, anchor=anchor, anchor_every=0)
    session = (await store.create_session("telegram")).id
    for n in range(3):
        await audit.record("tool.call", session_id=session, tool="t", n=n)
    await audit.close()
    assert read_anchor(anchor) == (3, (await audit.events())[-1].ghash)
    assert (await audit.verify()).ok
    # Every row and both heads deleted: the database alone would verify empty.
    _sql(store, "DELETE FROM audit_events")
    _sql(store, "DELETE FROM audit_heads")
    verdict = await audit.verify()
    assert (verdict.ok, verdict.first_broken_seq, verdict.reason) == (False, 1, "missing")
    assert (await AuditLog(store).verify()).ok  # without the anchor nothing tells


async def test_an_anchor_that_disagrees_is_named(store: Store, tmp_path: Path) -> None:
    anchor = tmp_path / "audit.anchor"
    audit = AuditLog(store, anchor=anchor, anchor_every=0)
    for n in range(2):
        await audit.record("config.changed", n=n)
    await audit.close()
    anchor.write_text('{"seq": 2, "hash": "' + "f" * 64 + '"}')
    verdict = await audit.verify()
    assert (verdict.first_broken_seq, verdict.reason) == (2, "anchor")
    anchor.write_text("not json")
    assert (await audit.verify()).reason == "anchor"
    # An anchor behind the chain (a crash before its write) is fine.
    anchor.write_text('{"seq": 1, "hash": "' + (await audit.events())[0].ghash + '"}')
    assert (await audit.verify()).ok


# ----- review R1: each of these verified whole before its fix -------------------------


async def test_rows_emptied_after_a_cleared_history_are_not_covered(store: Store) -> None:
    """An ``audit.pruned`` row covers what its session had when it was written, not
    what came after it; and a message of a row still in the record may not go."""
    audit, a, _ = await _fill(store)
    await store.clear_messages(a)
    [later] = await store.append_messages(a, [Message("user", [TextBlock("again")])])
    await audit.record("message.received", session_id=a, actor="owner", messages=[later])
    await audit.record("tool.call", session_id=a, actor="model", tool="t", ok=True)
    assert (await audit.verify(a)).ok and (await audit.verify()).ok
    _sql(store, "UPDATE audit_events SET data = NULL, pruned = 1 WHERE session_id = ?", a)
    for verdict in (await audit.verify(a), await audit.verify()):
        assert (verdict.ok, verdict.reason) == (False, "pruned_unrecorded")
    assert (await audit.verify(a)).first_broken_seq == 4


async def test_a_message_deleted_under_a_live_row_is_named(store: Store) -> None:
    audit, a, _ = await _fill(store)
    await store.clear_messages(a)
    [later] = await store.append_messages(a, [Message("user", [TextBlock("again")])])
    await audit.record("message.received", session_id=a, actor="owner", messages=[later])
    _sql(store, "DELETE FROM messages WHERE id = ?", later)
    verdict = await audit.verify(a)
    assert (verdict.first_broken_seq, verdict.reason) == (4, "message_missing")


async def test_a_sessions_end_cut_with_its_head_set_back_is_named(store: Store) -> None:
    audit, a, _ = await _fill(store)  # a: global rows 1, 2, 5; row 4 is session b's
    await audit.record("config.changed", sections=["x"])  # a later global row: id 6
    with closing(sqlite3.connect(store.path)) as conn:
        [(shash,)] = conn.execute("SELECT shash FROM audit_events WHERE id = 2")
        conn.execute("DELETE FROM audit_events WHERE id = 5")
        conn.execute(
            "UPDATE audit_heads SET seq = 2, hash = ? WHERE chain = ?", (shash, f"session:{a}")
        )
        conn.commit()
    verdict = await audit.verify(a)
    assert (verdict.ok, verdict.first_broken_seq, verdict.reason) == (False, 5, "elsewhere")


async def test_an_emptied_rows_kind_actor_and_time_stay_proven(store: Store) -> None:
    audit, a, _ = await _fill(store)
    await store.delete_sessions([a])
    _sql(store, "UPDATE audit_events SET kind = 'message.received', actor = 'owner' WHERE id = 2")
    verdict = await audit.verify(a)
    assert (verdict.first_broken_seq, verdict.reason) == (2, "edited")


async def test_a_column_of_the_wrong_type_is_a_break_not_a_crash(store: Store) -> None:
    audit, a, _ = await _fill(store)
    _sql(store, "UPDATE audit_events SET seq = 'two' WHERE id = 2")
    # The session's chain reads its rows by seq: the text 'two' sorts after the numbers,
    # so #2 is missing there; the global chain reads by id and finds the row changed.
    session, whole = await audit.verify(a), await audit.verify()
    assert (session.first_broken_seq, session.reason) == (2, "missing")
    assert (whole.first_broken_seq, whole.reason) == (2, "edited")
    assert len(await audit.events()) == 5  # listed, never an exception


async def test_the_anchor_is_not_moved_past_a_cut_record(store: Store, tmp_path: Path) -> None:
    anchor = tmp_path / "audit.anchor"
    audit = AuditLog(store, anchor=anchor, anchor_every=0)
    for n in range(5):
        await audit.record("config.changed", n=n)
    await audit.close()
    with closing(sqlite3.connect(store.path)) as conn:
        [(ghash,)] = conn.execute("SELECT ghash FROM audit_events WHERE id = 3")
        conn.execute("DELETE FROM audit_events WHERE id > 3")
        conn.execute("UPDATE audit_heads SET seq = 3, hash = ? WHERE chain = 'global'", (ghash,))
        conn.commit()
    audit = AuditLog(store, anchor=anchor, anchor_every=0)  # Kernel started again
    assert (await audit.verify()).reason == "missing"
    for n in range(2):  # ordinary events after the cut: ids 4 and 5 again
        await audit.record("config.changed", n=n)
    await audit.close()
    verdict = await audit.verify()
    assert (verdict.ok, verdict.reason) == (False, "anchor")


async def test_moving_the_anchor_is_one_hop_and_one_thread(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37: the anchor's check (the file read, the record's row at it) is one job
    on the database thread, then the file is written in a thread (its fsync is not the
    database's to wait for): where it was a thread to read the file, a hop to look its
    row up and a thread to write it."""
    import asyncio

    from kernel.audit.anchor import read_anchor, write_anchor

    anchor = tmp_path / "audit.anchor"
    first = AuditLog(store, anchor=anchor, anchor_every=3600)
    await first.record("config.changed", n=0)
    await first.close()
    assert read_anchor(anchor) == (1, (await first.events())[-1].ghash)
    audit = AuditLog(store, anchor=anchor, anchor_every=3600)  # Kernel started again
    await audit.record("config.changed", n=1)
    threads: list[object] = []
    to_thread = asyncio.to_thread

    def counted(fn: object, /, *args: object, **kwargs: object) -> object:
        threads.append(fn)
        return to_thread(fn, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncio, "to_thread", counted)
    hops = store._courier.hops
    await audit.close()
    assert (store._courier.hops - hops, threads) == (1, [write_anchor])
    assert read_anchor(anchor) == (2, (await audit.events())[-1].ghash)


async def test_the_anchor_takes_in_the_rows_written_in_its_own_hop(
    store: Store, tmp_path: Path
) -> None:
    """The anchor's move runs once the writes queued before it committed, and goes to
    the record's last row: a record that rode its hop (a tidy row's "sent", lingering)
    is anchored with it, not by a second move right after."""
    from kernel.audit.anchor import read_anchor

    anchor = tmp_path / "audit.anchor"
    audit = AuditLog(store, anchor=anchor, anchor_every=3600)
    await audit.record("config.changed", n=0)
    audit.note("config.changed", n=1, linger=3600)  # waits for a hop to ride
    hops = store._courier.hops
    await audit._flush()
    assert store._courier.hops - hops == 1
    assert read_anchor(anchor) == (2, (await audit.events())[-1].ghash)
    await audit.close()
    assert store._courier.hops - hops == 2  # the events' read; the anchor did not move


async def test_settling_takes_the_rows_still_waiting_for_company_along(store: Store) -> None:
    """A row noted with a long bound (a tidy outbox row's) is written when the record
    is settled (verify, close), not after its bound."""
    audit = AuditLog(store)
    audit.note("config.changed", n=0, linger=3600)
    settling = asyncio.ensure_future(audit.settled())
    await wait_until(settling.done, what="the record settled")
    assert [event.kind for event in await audit.events()] == ["config.changed"]
