"""The SQLite store: CRUD, message rounds, memories, threading and cancel safety."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast

import pytest

from kernel.core.errors import StoreError
from kernel.core.messages import (
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from kernel.store.db import Store


class FakeClock:
    """Advances one second per reading, so every write has a distinct timestamp."""

    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=UTC)
        self.step = timedelta(seconds=1)

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    s = Store(tmp_path / "kernel.db", clock=clock)
    await s.start()
    yield s
    await s.close()


def user(text: str) -> Message:
    return Message("user", [TextBlock(text)])


def assistant(text: str) -> Message:
    return Message("assistant", [TextBlock(text)])


def tool_call(call_id: str) -> list[Message]:
    return [
        Message("assistant", [ToolUseBlock(call_id, "search", {"q": call_id})]),
        Message("user", [ToolResultBlock(call_id, f"result {call_id}")]),
    ]


def tool_round(n: int) -> list[Message]:
    """A round with two tool calls: user, (tool_use, tool_result) x2, assistant."""
    return [
        user(f"question {n}"),
        *tool_call(f"call-{n}-a"),
        *tool_call(f"call-{n}-b"),
        assistant(f"answer {n}"),
    ]


async def raw_count(store: Store, sql: str, *params: Any) -> int:
    return await store._run("test", lambda conn: int(conn.execute(sql, params).fetchone()[0]))


class Gate:
    """Blocks the db thread the first time a statement starting with ``prefix`` runs."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, statement: str) -> None:
        if not self.entered.is_set() and statement.lstrip().startswith(self.prefix):
            self.entered.set()
            self.release.wait(10)

    async def install(self, store: Store) -> None:
        await store._run("test", lambda conn: conn.set_trace_callback(self))

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 10), "db thread never reached the gate"


# ---------------------------------------------------------------------- sessions


async def test_create_and_get_session(store: Store) -> None:
    row = await store.create_session("telegram", title="Hi", meta={"chat_id": 7})
    assert row.id > 0
    assert (row.channel, row.title, row.meta, row.message_count) == (
        "telegram",
        "Hi",
        {"chat_id": 7},
        0,
    )
    assert row.created_at == row.updated_at
    assert row.created_at.tzinfo is not None and row.created_at.utcoffset() == timedelta(0)
    assert await store.get_session(row.id) == row
    assert await store.get_session(row.id + 100) is None

    bare = await store.create_session("cli")
    assert (bare.title, bare.meta) == (None, {})


async def test_list_sessions_orders_by_activity(store: Store) -> None:
    a = await store.create_session("cli", title="a")
    b = await store.create_session("cli", title="b")
    c = await store.create_session("cli", title="c")
    assert [s.id for s in await store.list_sessions()] == [c.id, b.id, a.id]

    await store.append_messages(a.id, [user("back to a")])
    listed = await store.list_sessions()
    assert [s.id for s in listed] == [a.id, c.id, b.id]
    assert listed[0].message_count == 1
    assert listed[0].updated_at > a.updated_at

    assert [s.id for s in await store.list_sessions(limit=1, offset=1)] == [c.id]
    assert await store.list_sessions(limit=5, offset=3) == []
    with pytest.raises(ValueError):
        await store.list_sessions(limit=-1)


async def test_list_sessions_ties_break_by_newest_id(store: Store, clock: FakeClock) -> None:
    clock.step = timedelta(0)
    ids = [(await store.create_session("cli")).id for _ in range(3)]
    assert [s.id for s in await store.list_sessions()] == ids[::-1]


async def test_set_title_and_update_meta(store: Store) -> None:
    s = await store.create_session("cli", meta={"a": 1, "b": 2})
    await store.set_title(s.id, "Renamed")
    await store.update_meta(s.id, {"c": [1, "x"]})
    row = await store.get_session(s.id)
    assert row is not None
    assert (row.title, row.meta) == ("Renamed", {"c": [1, "x"]})
    await store.set_title(s.id, None)
    row = await store.get_session(s.id)
    assert row is not None and row.title is None

    with pytest.raises(StoreError, match="not found"):
        await store.set_title(9999, "x")
    with pytest.raises(StoreError, match="not found"):
        await store.update_meta(9999, {})
    with pytest.raises(StoreError, match="JSON"):
        await store.update_meta(s.id, {"bad": object()})


async def test_delete_sessions_cascades_to_messages(store: Store) -> None:
    s1 = await store.create_session("cli")
    s2 = await store.create_session("cli")
    await store.append_messages(s1.id, tool_round(1))
    await store.append_messages(s2.id, [user("keep me")])

    assert await store.delete_sessions([s1.id, s1.id, 9999]) == 1
    assert await store.get_session(s1.id) is None
    assert await raw_count(store, "SELECT COUNT(*) FROM messages WHERE session_id = ?", s1.id) == 0
    assert await store.load_messages(s2.id) == [user("keep me")]
    assert await store.delete_sessions([]) == 0


# ---------------------------------------------------------------------- messages


async def test_messages_round_trip_every_block_type(store: Store) -> None:
    s = await store.create_session("telegram")
    messages = [
        Message("user", [TextBlock("Что на фото? 🐈"), ImageBlock("image/png", "iVBORw0KGgo=")]),
        Message(
            "assistant",
            [
                TextBlock("Let me look."),
                ToolUseBlock("tu_1", "lookup", {"q": "cat", "opts": {"n": 2, "tags": ["a", None]}}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultBlock("tu_1", "a cat", is_error=False),
                ToolResultBlock("tu_2", "failed", is_error=True),
            ],
        ),
        Message("assistant", [TextBlock("It is a cat.")]),
        Message("assistant", []),
    ]
    ids = await store.append_messages(s.id, messages)
    assert len(ids) == len(messages) and ids == sorted(ids)
    assert await store.load_messages(s.id) == messages

    row = await store.get_session(s.id)
    assert row is not None and row.message_count == len(messages)
    assert row.updated_at > s.updated_at
    assert await store.count_rounds(s.id) == 1  # the tool-result message starts no round
    assert await store.append_messages(s.id, []) == []


async def test_append_to_missing_session_fails(store: Store) -> None:
    with pytest.raises(StoreError, match="session 42 not found"):
        await store.append_messages(42, [user("hello")])
    assert await raw_count(store, "SELECT COUNT(*) FROM messages") == 0


async def test_append_is_one_transaction(store: Store) -> None:
    s = await store.create_session("cli")
    bad = Message(cast(Role, "system"), [TextBlock("secret password 1234")])
    with pytest.raises(StoreError) as info:
        await store.append_messages(s.id, [user("first"), bad])
    assert "secret" not in str(info.value)
    assert await store.load_messages(s.id) == []
    row = await store.get_session(s.id)
    assert row is not None and row.updated_at == s.updated_at


async def test_unreadable_content_raises_store_error(store: Store) -> None:
    s = await store.create_session("cli")
    await store.append_messages(s.id, [user("ok")])
    await store._run("test", lambda conn: conn.execute("UPDATE messages SET content = '[{'"))
    with pytest.raises(StoreError, match="unreadable"):
        await store.load_messages(s.id)


async def test_rounds_truncation_keeps_whole_rounds(store: Store) -> None:
    s = await store.create_session("cli")
    r1 = [user("hi"), assistant("hello")]
    r2 = tool_round(2)
    r3 = [user("thanks"), *tool_call("call-3"), assistant("bye")]
    for batch in (r1, r2[:3], r2[3:], r3):  # a round may arrive in several appends
        await store.append_messages(s.id, batch)

    assert await store.count_rounds(s.id) == 3
    assert await store.load_messages(s.id, rounds=1) == r3
    assert await store.load_messages(s.id, rounds=2) == r2 + r3
    assert await store.load_messages(s.id, rounds=3) == r1 + r2 + r3
    assert await store.load_messages(s.id, rounds=50) == r1 + r2 + r3
    assert await store.load_messages(s.id) == r1 + r2 + r3
    assert await store.load_messages(s.id, rounds=0) == []
    with pytest.raises(ValueError):
        await store.load_messages(s.id, rounds=-1)

    for n in (1, 2):
        loaded = await store.load_messages(s.id, rounds=n)
        assert loaded[0].is_user_input
        used = {b.id for m in loaded for b in m.tool_uses}
        answered = {b.tool_use_id for m in loaded for b in m.tool_results}
        assert used == answered


async def test_rounds_with_leading_non_round_messages(store: Store) -> None:
    s = await store.create_session("cli")
    greeting = assistant("I am Kernel.")
    await store.append_messages(s.id, [greeting, user("hi"), assistant("hey")])
    assert await store.count_rounds(s.id) == 1
    assert await store.load_messages(s.id, rounds=1) == [user("hi"), assistant("hey")]
    assert await store.load_messages(s.id, rounds=2) == [greeting, user("hi"), assistant("hey")]


async def test_failed_messages_are_history_but_never_loaded(store: Store) -> None:
    s = await store.create_session("cli")
    other = await store.create_session("cli")
    r1 = [user("hi"), assistant("hello")]
    await store.append_messages(s.id, r1)
    refused = await store.append_messages(s.id, [user("refused"), *tool_call("call-9")])
    r3 = [user("next"), assistant("fine")]
    await store.append_messages(s.id, r3)
    [elsewhere] = await store.append_messages(other.id, [user("other chat")])

    # Only this session's messages are marked, each once however often it is named.
    assert await store.mark_failed(s.id, [*refused, refused[0], elsewhere]) == len(refused)
    assert await store.mark_failed(s.id, []) == 0

    assert await store.load_messages(s.id) == r1 + r3
    assert await store.count_rounds(s.id) == 2  # the refused round does not count
    assert await store.load_messages(s.id, rounds=1) == r3
    assert await store.load_messages(s.id, rounds=2) == r1 + r3
    assert await store.load_messages(other.id) == [user("other chat")]
    transcript = await store.load_transcript(s.id)
    assert [x.message for x in transcript] == [*r1, user("refused"), *tool_call("call-9"), *r3]
    assert [x.failed for x in transcript] == [False, False, True, True, True, False, False]
    assert [x.message for x in await store.load_transcript(s.id, rounds=2)][0] == user("refused")
    session = await store.get_session(s.id)
    assert session is not None and session.message_count == 7  # history keeps them all


async def test_rounds_scale_to_long_history(store: Store) -> None:
    s = await store.create_session("cli")
    other = await store.create_session("cli")
    for start in range(0, 500, 100):
        batch = [m for n in range(start, start + 100) for m in tool_round(n)]
        await store.append_messages(s.id, batch)
        await store.append_messages(other.id, [user("noise")])

    assert await store.count_rounds(s.id) == 500
    last_three = await store.load_messages(s.id, rounds=3)
    assert last_three == tool_round(497) + tool_round(498) + tool_round(499)
    assert len(await store.load_messages(s.id)) == 500 * 6

    def plan(conn: sqlite3.Connection) -> str:
        rows = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM messages WHERE session_id = ?"
            " AND starts_round = 1 AND failed = 0 ORDER BY id DESC LIMIT 1 OFFSET ?",
            (s.id, 2),
        ).fetchall()
        return " | ".join(str(r[-1]) for r in rows)

    query_plan = await store._run("test", plan)
    assert "messages_round_starts" in query_plan
    assert "TEMP B-TREE" not in query_plan  # no sort: the index already orders by id


# ---------------------------------------------------------------------- settings


async def test_settings(store: Store) -> None:
    assert await store.get_setting("model") is None
    await store.set_setting("model", "claude")
    assert await store.get_setting("model") == "claude"
    await store.set_setting("model", "gpt")
    assert await store.get_setting("model") == "gpt"
    await store.set_setting("lang", "")
    assert await store.get_setting("lang") == ""
    await store.delete_setting("model")
    await store.delete_setting("never-set")
    assert await store.get_setting("model") is None
    assert await store.get_setting("lang") == ""


# ---------------------------------------------------------------------- memories


async def test_memories_add_dedupe_list_delete(store: Store) -> None:
    tea, created = await store.add_memory("  likes green tea\n", "user")
    assert created and (tea.text, tea.category) == ("likes green tea", "user")
    assert tea.created_at.tzinfo is not None
    # the same fact, whitespace and case aside, is not stored twice
    assert await store.add_memory("Likes   GREEN tea", "feedback") == (tea, False)
    repo, _ = await store.add_memory("repo lives in ~/src/kernel", "project")
    plain, _ = await store.add_memory("no category")
    assert plain.category is None

    assert [m.id for m in await store.list_memories()] == [plain.id, repo.id, tea.id]
    assert [m.id for m in await store.list_memories(limit=1)] == [plain.id]
    assert await store.count_memories() == 3

    assert await store.delete_memories([tea.id, plain.id, 12345]) == 2
    assert await store.list_memories() == [repo]
    assert await store.delete_memories([]) == 0

    with pytest.raises(ValueError):
        await store.add_memory("   ")
    with pytest.raises(ValueError):
        await store.add_memory("x", "gossip")


async def test_like_search_ranks_by_terms_then_newest(store: Store) -> None:
    tea, _ = await store.add_memory("likes green tea")
    coffee, _ = await store.add_memory("drinks coffee at 9")
    both, _ = await store.add_memory("tea and coffee lover")
    unrelated, _ = await store.add_memory("has a dog")
    newer_tea, _ = await store.add_memory("TEA ceremony fan")

    found = await store.search_memories_like(["coffee", "tea"])
    assert [m.id for m in found] == [both.id, newer_tea.id, coffee.id, tea.id]
    assert unrelated.id not in {m.id for m in found}
    assert [m.id for m in await store.search_memories_like(["tea", "TEA"], limit=2)] == [
        newer_tea.id,
        both.id,
    ]
    assert await store.search_memories_like([]) == []
    assert await store.search_memories_like([""]) == []
    assert await store.search_memories_like(["nothing-matches"]) == []


async def test_like_search_escapes_like_wildcards(store: Store) -> None:
    pct, _ = await store.add_memory("is 100% sure")
    await store.add_memory("has 1000 books")
    under, _ = await store.add_memory("file a_b.txt")
    await store.add_memory("file axb.txt")
    slash, _ = await store.add_memory(r"path C:\temp")
    await store.add_memory("path C:temp")

    assert await store.search_memories_like(["100%"]) == [pct]
    assert await store.search_memories_like(["a_b"]) == [under]
    assert await store.search_memories_like([r"C:\temp"]) == [slash]
    assert await store.search_memories_like(["%"]) == [pct]


async def test_like_search_within_the_newest(store: Store) -> None:
    old, _ = await store.add_memory("old tea note")
    new, _ = await store.add_memory("new tea note")
    await store.add_memory("unrelated")
    assert await store.search_memories_like(["tea"]) == [new, old]
    assert await store.search_memories_like(["tea"], newest=2) == [new]
    assert await store.search_memories_like(["tea"], newest=0) == []


async def test_fts_index_follows_adds_and_deletes(store: Store) -> None:
    assert store.fts5_available and not store.memory_index_pending
    tea, _ = await store.add_memory("Likes green tea", tokens="likes green tea")
    cat, _ = await store.add_memory("cat is Miso", tokens="cat is miso")
    assert await store.search_memories_fts('"tea"') == [tea]
    assert await store.search_memories_fts('"miso" OR "tea"', limit=1) in ([cat], [tea])
    assert await store.delete_memories([tea.id]) == 1
    assert await store.search_memories_fts('"tea"') == []
    assert await store.search_memories_fts('"miso"') == [cat]

    # added without tokens: waits in the backlog until indexed
    late, _ = await store.add_memory("late riser")
    assert store.memory_index_pending
    assert await store.memory_backlog() == [(late.id, "late riser")]
    assert await store.search_memories_fts('"late"') == []
    assert await store.index_memories([(late.id, "late riser"), (99999, "ghost")]) == 1
    assert not store.memory_index_pending and await store.memory_backlog() == []
    assert await store.search_memories_fts('"riser"') == [late]
    # indexing twice does not put the row in the index twice
    assert await store.index_memories([(late.id, "late riser")]) == 0
    assert await store.delete_memories([late.id]) == 1
    assert await store.search_memories_fts('"riser"') == []


async def test_fts_turned_off_refuses_fts_search(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db", fts5=False)
    await store.start()
    try:
        assert not store.fts5_available
        row, _ = await store.add_memory("likes tea", tokens="likes tea")
        assert await store.memory_backlog() == [(row.id, "likes tea")]  # not indexed
        with pytest.raises(StoreError, match="FTS5"):
            await store.search_memories_fts('"tea"')
        assert await store.index_memories([(row.id, "likes tea")]) == 0
    finally:
        await store.close()


# ---------------------------------------------------------------------- threading


async def test_sql_runs_on_the_db_thread(store: Store) -> None:
    threads: set[tuple[int, str]] = set()

    def trace(_statement: str) -> None:
        current = threading.current_thread()
        threads.add((current.ident or 0, current.name))

    await store._run("test", lambda conn: conn.set_trace_callback(trace))
    s = await store.create_session("cli")
    await store.append_messages(s.id, tool_round(1))
    await store.load_messages(s.id, rounds=1)
    await store.list_sessions()
    await store.set_setting("k", "v")
    await store.add_memory("fact", tokens="fact")
    await store.search_memories_fts('"fact"')
    await store.search_memories_like(["fact"])
    await store.delete_sessions([s.id])

    assert len(threads) == 1
    ((ident, name),) = threads
    assert ident != threading.get_ident()
    assert name.startswith("kernel-db")


async def test_loop_runs_while_db_thread_is_busy(store: Store) -> None:
    s = await store.create_session("cli")
    gate = Gate("INSERT INTO messages")
    await gate.install(store)
    append = asyncio.create_task(store.append_messages(s.id, tool_round(1)))
    try:
        await gate.wait_entered()
        # The db thread is stuck inside the transaction; the loop still serves others.
        ticks = 0
        for _ in range(10):
            await asyncio.sleep(0)
            ticks += 1
        assert ticks == 10
        assert not append.done()
    finally:
        gate.release.set()
    assert len(await append) == 6


# ---------------------------------------------------------------------- cancel safety


def check_integrity(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


async def test_cancel_while_running_still_commits_atomically(store: Store) -> None:
    s = await store.create_session("cli")
    batch = [m for n in range(20) for m in tool_round(n)]
    gate = Gate("INSERT INTO messages")
    await gate.install(store)
    task = asyncio.create_task(store.append_messages(s.id, batch))
    try:
        await gate.wait_entered()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Mid-transaction: another connection sees none of the batch yet.
        with closing(sqlite3.connect(store.path)) as other:
            assert other.execute("SELECT COUNT(*) FROM messages").fetchone() == (0,)
    finally:
        gate.release.set()

    assert await store.load_messages(s.id) == batch
    check_integrity(store.path)
    await store.append_messages(s.id, [user("still usable")])
    assert await store.count_rounds(s.id) == 21


async def test_cancel_while_running_a_failing_write_rolls_back(store: Store) -> None:
    s = await store.create_session("cli")
    bad = Message(cast(Role, "system"), [TextBlock("x")])
    gate = Gate("INSERT INTO messages")
    await gate.install(store)
    task = asyncio.create_task(store.append_messages(s.id, [*tool_round(1), bad]))
    try:
        await gate.wait_entered()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        gate.release.set()

    assert await store.load_messages(s.id) == []
    assert not await store._run("test", lambda conn: conn.in_transaction)
    check_integrity(store.path)
    assert len(await store.append_messages(s.id, tool_round(2))) == 6


async def test_cancel_while_queued_never_runs(store: Store) -> None:
    s = await store.create_session("cli")
    release = threading.Event()
    blocker = asyncio.create_task(store._run("block", lambda conn: release.wait(10)))
    task = asyncio.create_task(store.append_messages(s.id, tool_round(1)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert await blocker

    assert await store.load_messages(s.id) == []
    check_integrity(store.path)
    assert len(await store.append_messages(s.id, tool_round(1))) == 6


# ---------------------------------------------------------------------- lifecycle


async def test_close_is_idempotent_and_later_calls_fail(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db")
    with pytest.raises(StoreError, match="not started"):
        await store.get_setting("k")
    await store.start()
    await store.start()  # no-op
    await store.set_setting("k", "v")

    await asyncio.gather(store.close(), store.close())
    await store.close()
    assert not (tmp_path / "kernel.db-wal").exists()  # checkpointed and removed
    with pytest.raises(StoreError, match="closed"):
        await store.get_setting("k")
    with pytest.raises(StoreError, match="closed"):
        await store.create_session("cli")
    with pytest.raises(StoreError, match="closed"):
        await store.start()

    reopened = Store(tmp_path / "kernel.db")
    await reopened.start()
    assert await reopened.get_setting("k") == "v"
    await reopened.close()


async def test_close_waits_for_queued_work(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    s = await store.create_session("cli")
    pending = asyncio.create_task(store.append_messages(s.id, tool_round(1)))
    await asyncio.sleep(0)
    await store.close()
    assert len(await pending) == 6

    reopened = Store(tmp_path / "kernel.db")
    await reopened.start()
    assert await reopened.count_rounds(s.id) == 1
    await reopened.close()


async def test_close_without_start(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.close()
    await store.close()
    assert not (tmp_path / "kernel.db").exists()


async def test_clock_must_be_timezone_aware(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db", clock=lambda: datetime(2024, 1, 1))  # noqa: DTZ001
    await store.start()
    try:
        with pytest.raises(ValueError, match="timezone-aware"):
            await store.create_session("cli")
    finally:
        await store.close()


async def test_timestamps_are_utc_iso_strings(tmp_path: Path) -> None:
    local = datetime(2024, 6, 1, 15, 30, 45, 123456, tzinfo=timezone(timedelta(hours=3)))
    store = Store(tmp_path / "kernel.db", clock=lambda: local)
    await store.start()
    try:
        s = await store.create_session("cli")
        raw = await store._run(
            "test",
            lambda conn: conn.execute("SELECT created_at FROM sessions").fetchone()[0],
        )
        assert raw == "2024-06-01T12:30:45+00:00"
        assert s.created_at == local.replace(microsecond=0)
    finally:
        await store.close()
