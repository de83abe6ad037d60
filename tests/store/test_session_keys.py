"""Sessions named by (channel, user_id, external_id): migration 4 and the store calls."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from kernel.core.errors import StoreError
from kernel.core.messages import Message, TextBlock
from kernel.store.db import Store
from kernel.store.migrations import MIGRATIONS, migrate

TS = "2024-05-01T12:00:00+00:00"


def before_session_keys() -> int:
    return next(i for i, m in enumerate(MIGRATIONS) if m.name == "session_keys")


async def test_existing_sessions_get_keys_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "kernel.db"
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        migrate(conn, MIGRATIONS[: before_session_keys()])
        for sid, channel in ((1, "telegram"), (2, "console")):
            conn.execute(
                "INSERT INTO sessions (id, channel, title, meta, created_at, updated_at)"
                " VALUES (?, ?, 'old', ?, ?, ?)",
                (sid, channel, json.dumps({"n": sid}), TS, TS),
            )
    store = Store(path)
    await store.start()
    try:
        rows = {r.id: r for r in await store.list_sessions()}
        assert (rows[1].channel, rows[1].user_id, rows[1].external_id) == (
            "telegram",
            "",
            "session-1",
        )
        assert rows[2].external_id == "session-2" and rows[2].meta == {"n": 2}
        found, created = await store.open_session("telegram", "", "session-1", create=False)
        assert found is not None and found.id == 1 and not created
    finally:
        await store.close()


async def test_open_session_finds_or_creates_by_key(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        row, created = await store.open_session("console", "u1", "s1", title="T", meta={"a": 1})
        assert created and row is not None
        assert (row.channel, row.user_id, row.external_id, row.title) == (
            "console",
            "u1",
            "s1",
            "T",
        )
        again, created = await store.open_session("console", "u1", "s1", meta={"ignored": 1})
        assert not created and again is not None and again.id == row.id and again.meta == {"a": 1}
        other, created = await store.open_session("console", "u2", "s1")
        assert created and other is not None and other.id != row.id
        assert await store.open_session("qq", "u1", "s1", create=False) == (None, False)
        plain = await store.create_session("telegram", user_id="42")
        assert plain.external_id == f"session-{plain.id}" and plain.user_id == "42"
        with pytest.raises(StoreError):
            await store.create_session("console", user_id="u1", external_id="s1")
    finally:
        await store.close()


async def test_filters_counts_and_clearing(tmp_path: Path) -> None:
    store = Store(tmp_path / "kernel.db")
    await store.start()
    try:
        a = await store.create_session("console", user_id="alice")
        await store.create_session("console", user_id="bob")
        await store.create_session("qq", user_id="alice")
        assert await store.count_sessions() == 3
        assert await store.count_sessions(user_id="alice") == 2
        listed = await store.list_sessions(channel="console", user_id="alice")
        assert [r.id for r in listed] == [a.id]
        await store.append_messages(
            a.id, [Message("user", [TextBlock("q")]), Message("assistant", [TextBlock("a")])]
        )
        assert await store.clear_messages(a.id) == 2
        assert await store.load_messages(a.id) == []
        row = await store.get_session(a.id)
        assert row is not None and row.message_count == 0
        await store.check_writable()
        assert await store.get_setting("health_probe") is not None
    finally:
        await store.close()


async def test_sessions_filtered_by_project_skip_unreadable_meta(tmp_path: Path) -> None:
    path = tmp_path / "kernel.db"
    store = Store(path)
    await store.start()
    try:
        site = await store.create_session("console", meta={"project": "site"})
        await store.create_session("console", meta={"project": "notes"})
        await store.create_session("console", meta={"project": 5})
        plain = await store.create_session("console")
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("UPDATE sessions SET meta = 'not json' WHERE id = ?", (plain.id,))
        assert [r.id for r in await store.list_sessions(project="site")] == [site.id]
        assert await store.count_sessions(project="site") == 1
        assert await store.list_sessions(project="5") == []
        assert await store.list_sessions(project="x' OR 1=1 --") == []
        assert len(await store.list_sessions()) == 4
    finally:
        await store.close()
