"""Upgrades that roll back (issue 40): a database at an older schema is copied into
data/backups before any migration runs; a migration that fails (injected here) puts the
database back to that copy, and Kernel refuses to start with one line naming it. A
database already at the current schema (every normal start) or a new one takes none."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from kernel.app import Kernel
from kernel.backup.reader import list_backups
from kernel.config import load_config
from kernel.core.errors import StartupError
from kernel.core.messages import Message, TextBlock
from kernel.store.db import Store
from kernel.store.migrations import MIGRATIONS, Migration, MigrationFailed
from tests.conftest import write_config

CURRENT = len(MIGRATIONS)


def _adds_notes(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("UPDATE sessions SET title = 'renamed by the upgrade'")


def _fails(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE sessions ADD COLUMN broken TEXT")
    raise sqlite3.OperationalError("injected failure")


UPGRADE = [*MIGRATIONS, Migration("notes", _adds_notes), Migration("broken", _fails)]


async def _current_database(path: Path) -> None:
    store = Store(path)
    await store.start()
    session = await store.create_session("telegram", title="kept")
    await store.append_messages(session.id, [Message("user", [TextBlock("hello")])])
    await store.close()


def _state(path: Path) -> tuple[int, list[str], list[str]]:
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        titles = [row[0] for row in conn.execute("SELECT title FROM sessions")]
        tables = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE name = 'notes'")
        ]
    return version, titles, tables


async def test_a_failing_migration_rolls_back_to_the_automatic_backup(tmp_path: Path) -> None:
    db = tmp_path / "data" / "kernel.db"
    await _current_database(db)

    store = Store(db, migrations=UPGRADE)
    with pytest.raises(MigrationFailed) as failed:
        await store.start()

    assert (failed.value.number, failed.value.name) == (CURRENT + 2, "broken")
    assert failed.value.old == CURRENT
    # Migration CURRENT + 1 had committed: the database is back from before it.
    assert _state(db) == (CURRENT, ["kept"], [])
    snapshot = failed.value.snapshot
    assert snapshot is not None and snapshot.parent == tmp_path / "data" / "backups"
    assert snapshot.name.startswith(f"pre-upgrade-v{CURRENT}-to-v{CURRENT + 2}-")
    assert _state(snapshot) == (CURRENT, ["kept"], [])
    assert [(item.path, item.kind) for item in list_backups(snapshot.parent)] == [
        (snapshot, "snapshot")
    ]
    # The code that works opens it as before.
    store = Store(db)
    await store.start()
    assert [row.title for row in await store.list_sessions()] == ["kept"]
    await store.close()


async def test_a_successful_upgrade_keeps_its_snapshot(tmp_path: Path) -> None:
    db = tmp_path / "data" / "kernel.db"
    await _current_database(db)

    store = Store(db, migrations=UPGRADE[:-1])
    await store.start()
    await store.close()

    assert _state(db) == (CURRENT + 1, ["renamed by the upgrade"], ["notes"])
    (snapshot,) = (tmp_path / "data" / "backups").iterdir()
    assert _state(snapshot) == (CURRENT, ["kept"], [])


async def test_a_normal_start_and_a_new_database_take_no_snapshot(tmp_path: Path) -> None:
    db = tmp_path / "data" / "kernel.db"
    await _current_database(db)  # new: migrated from nothing
    await _current_database(db)  # current: nothing to migrate

    assert not (tmp_path / "data" / "backups").exists()


async def test_kernel_refuses_to_start_with_one_line_naming_the_migration(
    tmp_path: Path,
) -> None:
    config = load_config(
        write_config(tmp_path, "http://127.0.0.1:9", "claude"), env={}, require_telegram=False
    )
    await _current_database(config.db_path)
    kernel = Kernel(config)
    kernel.store = Store(config.db_path, migrations=UPGRADE)  # the upgrade's code

    with pytest.raises(StartupError) as refused:
        await kernel.wait_for_storage(asyncio.Event())

    words = str(refused.value)
    assert "\n" not in words
    assert f"迁移 {CURRENT + 2}（broken）失败" in words and f"v{CURRENT}" in words
    assert "pre-upgrade-" in words
    assert _state(config.db_path) == (CURRENT, ["kept"], [])
