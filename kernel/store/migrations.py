"""Named, ordered schema migrations; schema version N = the first N applied.

The version lives in ``PRAGMA user_version``. Each migration and its version bump
commit together in one transaction, so a failure leaves the previous version intact.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernel.core.errors import StoreError
from kernel.store.migrations_later import (
    m016_audit,
    m017_inbox_session,
    m018_v1_responses,
    m019_agent_tasks,
    m020_branches,
    m021_session_modes,
    m022_memory_vectors,
    m023_memory_versions,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Migration:
    name: str
    # Runs statements one at a time with conn.execute: executescript would commit
    # the surrounding transaction implicitly.
    apply: Callable[[sqlite3.Connection], None]


def m001_initial(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            channel TEXT NOT NULL,
            title TEXT,
            meta TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX sessions_updated_at ON sessions(updated_at)")
    conn.execute(
        """
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            content TEXT NOT NULL, -- JSON list of blocks
            starts_round INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX messages_session ON messages(session_id, id)")
    conn.execute(
        "CREATE INDEX messages_round_starts ON messages(session_id, id) WHERE starts_round = 1"
    )
    conn.execute(
        """
        CREATE TABLE settings (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )
        """
    )


def m002_memories(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE memories (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            text TEXT NOT NULL,
            category TEXT CHECK (
                category IS NULL OR category IN ('user', 'feedback', 'project', 'reference')
            ),
            created_at TEXT NOT NULL
        )
        """
    )


# Tokens are jieba ``cut_for_search`` output joined by spaces (Kernel's side); FTS5 then
# splits on those spaces, folds case and diacritics, and stems English (porter).
# Contentless: the text lives in ``memories`` only.
MEMORIES_FTS_SQL = (
    "CREATE VIRTUAL TABLE memories_fts USING fts5("
    "tokens, content='', tokenize='porter unicode61 remove_diacritics 2')"
)


def memory_key(text: str) -> str:
    """What two memories must share to count as the same fact: text with whitespace
    collapsed, case folded."""
    return " ".join(text.split()).casefold()


def fts5_supported(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite has the FTS5 module (probed with a throwaway temp table)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.kernel_fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp.kernel_fts5_probe")
    return True


def m003_memories_fts(conn: sqlite3.Connection) -> None:
    # key: the dedupe key, indexed so adding stays cheap at 100K memories.
    # tokens: exactly what was put into memories_fts for this row. A contentless
    # table can only delete a row given the same tokens, and re-cutting at delete
    # time could differ (another jieba dictionary); NULL = not indexed yet.
    # The existing rows are indexed by Kernel on the first memory operation, since
    # jieba must not load at start-up (see kernel/memory/memories.py).
    conn.create_function("kernel_memory_key", 1, memory_key, deterministic=True)
    conn.execute("ALTER TABLE memories ADD COLUMN key TEXT")
    conn.execute("ALTER TABLE memories ADD COLUMN tokens TEXT")
    conn.execute("UPDATE memories SET key = kernel_memory_key(text)")
    conn.execute("CREATE INDEX memories_key ON memories(key)")
    conn.execute("CREATE INDEX memories_unindexed ON memories(id) WHERE tokens IS NULL")
    if fts5_supported(conn):
        conn.execute(MEMORIES_FTS_SQL)
    else:  # created by Store.start once an SQLite with FTS5 opens this database
        log.warning("SQLite has no FTS5: memory search falls back to LIKE")


def m004_session_keys(conn: sqlite3.Connection) -> None:
    """Who a session belongs to, in a channel's own terms: ``user_id`` and the client's
    ``external_id`` (the sidecar's ``session_id``). Existing rows get ``session-<id>``."""
    conn.execute("ALTER TABLE sessions ADD COLUMN user_id TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE sessions ADD COLUMN external_id TEXT")
    conn.execute("UPDATE sessions SET external_id = 'session-' || id")
    conn.execute("CREATE UNIQUE INDEX sessions_key ON sessions(channel, user_id, external_id)")


def m005_cron_jobs(conn: sqlite3.Connection) -> None:
    """Scheduled jobs: the definition (``spec`` JSON: schedule, task, delivery, limits)
    and the scheduler's state, which survives restarts so missed runs can be found."""
    conn.execute(
        """
        CREATE TABLE cron_jobs (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            enabled INTEGER NOT NULL DEFAULT 1,
            spec TEXT NOT NULL DEFAULT '{}',
            created_by TEXT NOT NULL DEFAULT 'api',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            paused INTEGER NOT NULL DEFAULT 0,
            next_run_at TEXT,
            last_run_at TEXT,
            last_status TEXT,
            last_result TEXT,
            last_error TEXT,
            last_execution TEXT,
            run_count INTEGER NOT NULL DEFAULT 0
        )
        """
    )
    conn.execute("CREATE INDEX cron_jobs_created_by ON cron_jobs(created_by)")


def m006_channel_records(conn: sqlite3.Connection) -> None:
    """What channels must remember across a restart: the inbound event ids already
    handled (a signed QQ event replayed within its signature window runs no second
    turn), and the webhook deliveries that finally failed (shown in the channel's
    state; never the text sent)."""
    conn.execute(
        """
        CREATE TABLE inbound_events (
            channel TEXT NOT NULL,
            event_id TEXT NOT NULL,
            seen_at TEXT NOT NULL,
            PRIMARY KEY (channel, event_id)
        )
        """
    )
    conn.execute("CREATE INDEX inbound_events_seen_at ON inbound_events(seen_at)")
    conn.execute(
        """
        CREATE TABLE webhook_failures (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            delivery_id TEXT NOT NULL,
            at TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            error TEXT NOT NULL,
            origin TEXT NOT NULL,
            session_id TEXT NOT NULL
        )
        """
    )


def m007_mailbox(conn: sqlite3.Connection) -> None:
    """The owner's updates taken in (``inbox``) and everything Kernel means to send
    (``outbox``): what lets a crash, a kill or an outage lose no message (issue 15).
    ``kernel/store/mailbox.py`` holds the SQL and the states' meaning."""
    conn.execute(
        """
        CREATE TABLE inbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            channel TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            update_id INTEGER,
            message_id INTEGER,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}',
            state TEXT NOT NULL CHECK (state IN (
                'waiting', 'open', 'answered', 'failed', 'cancelled', 'dropped',
                'interrupted'
            )),
            placeholder_id INTEGER,
            received_at TEXT NOT NULL,
            closed_at TEXT,
            UNIQUE (channel, update_id)
        )
        """
    )
    conn.execute(
        "CREATE INDEX inbox_unsettled ON inbox(channel, state) WHERE state IN ('waiting', 'open')"
    )
    conn.execute("CREATE INDEX inbox_closed_at ON inbox(closed_at)")
    conn.execute(
        """
        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            channel TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('send', 'edit', 'delete')),
            body TEXT NOT NULL,
            state TEXT NOT NULL CHECK (
                state IN ('pending', 'sending', 'sent', 'expired', 'failed')
            ),
            ambiguous INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            created_at TEXT NOT NULL,
            done_at TEXT,
            message_id INTEGER,
            error TEXT,
            inbox_id INTEGER REFERENCES inbox(id) ON DELETE SET NULL
        )
        """
    )
    conn.execute(
        "CREATE INDEX outbox_unsent ON outbox(channel, chat_id, id)"
        " WHERE state IN ('pending', 'sending')"
    )
    conn.execute("CREATE INDEX outbox_done_at ON outbox(done_at)")


def m008_failed_messages(conn: sqlite3.Connection) -> None:
    """``failed`` = 1: a message the provider refused for its content (and what its turn
    produced). Kept as history (``/chats`` shows it), never sent to a model again."""
    conn.execute("ALTER TABLE messages ADD COLUMN failed INTEGER NOT NULL DEFAULT 0")


def m009_usage(conn: sqlite3.Connection) -> None:
    """The usage ledger (issue 16): one row per model call (and per speech call whose
    provider reported usage). ``cost`` NULL: the price is unknown, never guessed.
    ``session_id`` is kept without a foreign key: spend outlives a deleted chat."""
    conn.execute(
        """
        CREATE TABLE usage (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            purpose TEXT NOT NULL,
            session_id INTEGER,
            channel TEXT NOT NULL DEFAULT '',
            job_id TEXT NOT NULL DEFAULT '',
            turn_id TEXT NOT NULL DEFAULT '',
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            retries INTEGER NOT NULL DEFAULT 0,
            cost REAL,
            seconds REAL
        )
        """
    )
    conn.execute("CREATE INDEX usage_at ON usage(at)")
    conn.execute("CREATE INDEX usage_job ON usage(job_id, at) WHERE job_id != ''")


def m010_usage_bounds(conn: sqlite3.Connection) -> None:
    """``cost_bound``: when ``cost`` is unknown, the most the call can have cost, when
    that is known (what a budget counts). ``usage_known`` 0: the provider reported no
    usage (the counts are not zeros, they are unknown), or the call was cancelled or cut
    off before it did."""
    conn.execute("ALTER TABLE usage ADD COLUMN cost_bound REAL")
    conn.execute("ALTER TABLE usage ADD COLUMN usage_known INTEGER NOT NULL DEFAULT 1")


def m011_routing_decisions(conn: sqlite3.Connection) -> None:
    """The decisions log (issue 17): one row per model call of a turn — why that model
    (the rule, the session's override, the owner's choice), the candidates, each attempt
    and its outcome (failovers), the time taken, tokens and cost. JSON columns hold the
    lists. No foreign key: the log outlives a deleted chat, like the usage ledger."""
    conn.execute(
        """
        CREATE TABLE routing_decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            session_id INTEGER,
            turn_id TEXT NOT NULL DEFAULT '',
            step INTEGER NOT NULL DEFAULT 0,
            channel TEXT NOT NULL DEFAULT '',
            job_id TEXT NOT NULL DEFAULT '',
            why TEXT NOT NULL,
            rule TEXT NOT NULL DEFAULT '',
            sticky INTEGER NOT NULL DEFAULT 0,
            candidates TEXT NOT NULL DEFAULT '[]',
            skipped TEXT NOT NULL DEFAULT '[]',
            chosen TEXT NOT NULL DEFAULT '',
            reasoning TEXT NOT NULL DEFAULT '',
            attempts TEXT NOT NULL DEFAULT '[]',
            latency_ms INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL
        )
        """
    )
    conn.execute("CREATE INDEX routing_decisions_session ON routing_decisions(session_id, id)")
    conn.execute("CREATE INDEX routing_decisions_at ON routing_decisions(at)")


def m012_memory_scopes(conn: sqlite3.Connection) -> None:
    """Where each memory belongs (issue 18): ``global``, ``project:<name>`` or
    ``persona:<name>`` (kernel/memory/scopes.py). The memories before it are global."""
    conn.execute(
        "ALTER TABLE memories ADD COLUMN scope TEXT NOT NULL DEFAULT 'global' CHECK ("
        "scope = 'global' OR scope GLOB 'project:?*' OR scope GLOB 'persona:?*')"
    )
    # A chat's memories newest first: one range of this index per visible scope.
    conn.execute("CREATE INDEX memories_scope ON memories(scope, id)")


def m013_delegation_approvals(conn: sqlite3.Connection) -> None:
    """Every answer to a coding CLI's permission prompt (issue 19): which delegation,
    the tool and its input (JSON, capped), the rule "allow for this task" used or added,
    allow or deny, who decided (owner, task_rule, timeout, cancelled, undelivered,
    nobody) and when it was asked and answered. No foreign key: the record outlives a
    deleted chat, like the usage ledger."""
    conn.execute(
        """
        CREATE TABLE delegation_approvals (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            delegation_id TEXT NOT NULL,
            conversation TEXT NOT NULL DEFAULT '',
            session_id INTEGER,
            cli TEXT NOT NULL DEFAULT '',
            tool TEXT NOT NULL,
            input TEXT NOT NULL DEFAULT '{}',
            rule TEXT NOT NULL DEFAULT '',
            decision TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
            decided_by TEXT NOT NULL,
            asked_at TEXT NOT NULL,
            answered_at TEXT NOT NULL
        )
        """
    )
    conn.execute(
        "CREATE INDEX delegation_approvals_delegation ON delegation_approvals(delegation_id, id)"
    )


def m014_cut_messages(conn: sqlite3.Connection) -> None:
    """``cut`` > 0: a message taken out of what the model sees by /undo, /rewind or
    /retry (issue 20), kept as history; the number groups one cut (a branch), so a
    session's branches are its distinct non-zero ``cut`` values. 0: in the conversation."""
    conn.execute("ALTER TABLE messages ADD COLUMN cut INTEGER NOT NULL DEFAULT 0")


def m015_cron_runs(conn: sqlite3.Connection) -> None:
    """Each job's recent runs (issue 21): when, the outcome (succeeded, failed, skipped,
    missed, interrupted), why and what it answered; the newest ones kept per job
    (kernel/store/cron.py). No foreign key: deleting a job deletes its runs itself."""
    conn.execute(
        """
        CREATE TABLE cron_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL,
            at TEXT NOT NULL,
            outcome TEXT NOT NULL,
            reason TEXT,
            result TEXT
        )
        """
    )
    conn.execute("CREATE INDEX cron_runs_job ON cron_runs(job_id, id)")


MIGRATIONS: list[Migration] = [
    Migration("initial", m001_initial),
    Migration("memories", m002_memories),
    Migration("memories_fts", m003_memories_fts),
    Migration("session_keys", m004_session_keys),
    Migration("cron_jobs", m005_cron_jobs),
    Migration("channel_records", m006_channel_records),
    Migration("mailbox", m007_mailbox),
    Migration("failed_messages", m008_failed_messages),
    Migration("usage", m009_usage),
    Migration("usage_bounds", m010_usage_bounds),
    Migration("routing_decisions", m011_routing_decisions),
    Migration("memory_scopes", m012_memory_scopes),
    Migration("delegation_approvals", m013_delegation_approvals),
    Migration("cut_messages", m014_cut_messages),
    Migration("cron_runs", m015_cron_runs),
    Migration("audit", m016_audit),
    Migration("inbox_session", m017_inbox_session),
    Migration("v1_responses", m018_v1_responses),
    Migration("agent_tasks", m019_agent_tasks),
    Migration("branches", m020_branches),
    Migration("session_modes", m021_session_modes),
    Migration("memory_vectors", m022_memory_vectors),
    Migration("memory_versions", m023_memory_versions),
]


class MigrationFailed(StoreError):
    """A migration failed (its transaction rolled back). ``snapshot``: the copy taken
    before the upgrade, which the database was put back to (kernel/store/db.py), if any."""

    def __init__(self, number: int, name: str, detail: str) -> None:
        super().__init__(f"migration {number} ({name}) failed: {detail}")
        self.number, self.name, self.detail = number, name, detail
        self.old: int | None = None  # the schema it was rolled back to
        self.snapshot: Path | None = None


def get_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def check_not_newer(version: int, known: int) -> None:
    if version > known:
        raise StoreError(
            f"database schema v{version} is newer than this Kernel (v{known}); upgrade Kernel"
        )


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply the pending migrations in order; returns the resulting schema version.

    ``conn`` must be in autocommit mode (``isolation_level=None``) and outside a transaction.
    """
    known = len(migrations)
    check_not_newer(get_version(conn), known)
    for number, migration in enumerate(migrations, start=1):
        if get_version(conn) >= number:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            current = get_version(conn)
            check_not_newer(current, known)
            if current >= number:
                conn.execute("COMMIT")
                continue
            migration.apply(conn)
            conn.execute(f"PRAGMA user_version = {number:d}")
            conn.execute("COMMIT")
        except BaseException as exc:
            _rollback(conn)
            if isinstance(exc, StoreError) or not isinstance(exc, Exception):
                raise
            code = getattr(exc, "sqlite_errorname", type(exc).__name__)
            raise MigrationFailed(number, migration.name, code) from exc
        log.info("applied schema migration %d (%s)", number, migration.name)
    return get_version(conn)


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            log.warning("rollback after failed migration also failed")
