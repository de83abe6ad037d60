"""Settings: the ``settings`` key/value table (and the health probe's row in it)."""

from __future__ import annotations

import sqlite3

from kernel.store.database import Database


class SettingTables(Database):
    """The Store's settings methods."""

    async def check_writable(self) -> None:
        """A real write (and its commit) to prove the database accepts writes now."""
        now = self._now()

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES ('health_probe', ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at",
                (now, now),
            )

        await self._write("write probe", op)

    async def get_setting(self, key: str) -> str | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        return await self._read("get setting", op)

    async def set_setting(self, key: str, value: str) -> None:
        now = self._now()

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE"
                " SET value = excluded.value, updated_at = excluded.updated_at",
                (key, value, now),
            )

        await self._write("set setting", op)

    async def delete_setting(self, key: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM settings WHERE key = ?", (key,))

        await self._write("delete setting", op)
