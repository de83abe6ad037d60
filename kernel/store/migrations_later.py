"""Schema steps 16 onwards: the audit trail and what came after it. The runner, the
ordered list and the earlier steps are in :mod:`kernel.store.migrations`."""

from __future__ import annotations

import sqlite3


def m016_audit(conn: sqlite3.Connection) -> None:
    """The audit trail (issue 23, seed 001's trajectory) and the artifacts a turn made.

    ``audit_events``: append-only; ``id`` is the global sequence (1, 2, 3 … with no gap),
    ``seq`` the sequence inside its session (NULL for events of no session). ``digest``
    is the SHA-256 of the row's own fields and ``data_sha256`` (its data's hash, kept when
    the data is emptied), ``shash`` and ``ghash`` link it to the
    previous row of its session's chain and of the global chain; ``audit_heads`` holds
    each chain's last sequence and hash, so a deleted tail shows. A row whose session was
    deleted keeps its hashes with ``data`` emptied and ``pruned`` = 1, covered by a later
    ``audit.pruned`` row (kernel/store/audit.py)."""
    conn.execute(
        """
        CREATE TABLE audit_events (
            id INTEGER PRIMARY KEY,
            session_id INTEGER,
            seq INTEGER,
            at TEXT NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            data TEXT,
            data_sha256 TEXT NOT NULL,
            digest TEXT NOT NULL,
            shash TEXT,
            ghash TEXT NOT NULL,
            pruned INTEGER NOT NULL DEFAULT 0
        )
        """
    )
    conn.execute(
        "CREATE UNIQUE INDEX audit_events_session ON audit_events(session_id, seq)"
        " WHERE session_id IS NOT NULL"
    )
    conn.execute(
        "CREATE TABLE audit_heads (chain TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
        " hash TEXT NOT NULL)"
    )
    conn.execute(
        """
        CREATE TABLE artifacts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            path TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT,
            created_at TEXT NOT NULL,
            removed_at TEXT
        )
        """
    )
    conn.execute("CREATE INDEX artifacts_session ON artifacts(session_id, id)")
    conn.execute("CREATE INDEX artifacts_path ON artifacts(path)")


def m017_inbox_session(conn: sqlite3.Connection) -> None:
    """The session an owner's message was answered in (issue 34): 🔁 on a turn a restart
    cut off runs it in that session again, not in the fresh one the restart began."""
    conn.execute("ALTER TABLE inbox ADD COLUMN session_id INTEGER")


def m018_v1_responses(conn: sqlite3.Connection) -> None:
    """The responses ``/v1/responses`` stored (issue 35): the response as answered and
    its context (the input items of its chain, then its output items) as JSON, so a
    request naming it in ``previous_response_id`` continues it (kernel/store/responses.py)."""
    conn.execute(
        """
        CREATE TABLE v1_responses (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            response TEXT NOT NULL,
            context TEXT NOT NULL,
            size INTEGER NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX v1_responses_created ON v1_responses(created_at)")


def m019_agent_tasks(conn: sqlite3.Connection) -> None:
    """Background tasks (issue 38): a sub-agent or a CLI delegation run beside its chat;
    ``spec`` the tool call it runs and the chat's context (JSON), ``reported_at`` /
    ``offered_at`` set in the same transaction as the outbox row that tells the owner
    (kernel/store/tasks.py)."""
    conn.execute(
        """
        CREATE TABLE agent_tasks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL CHECK (kind IN ('agent', 'cli')),
            session_id INTEGER,
            conversation TEXT NOT NULL DEFAULT '',
            title TEXT NOT NULL,
            spec TEXT NOT NULL DEFAULT '{}',
            status TEXT NOT NULL CHECK (status IN (
                'queued', 'running', 'done', 'failed', 'stopped', 'interrupted'
            )),
            progress TEXT NOT NULL DEFAULT '',
            result TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            started_at TEXT,
            ended_at TEXT,
            reported_at TEXT,
            offered_at TEXT
        )
        """
    )
    conn.execute("CREATE INDEX agent_tasks_session ON agent_tasks(session_id, id)")
    conn.execute("CREATE INDEX agent_tasks_status ON agent_tasks(status)")


def m020_branches(conn: sqlite3.Connection) -> None:
    """A session's branches walked (issue 38, seed 002 ``siblingNav``): ``branches`` names
    each cut branch's fork (the message it continues after; 0: the start), how it came
    to be and when; ``sessions.branch`` is the number the live history had as a branch
    before a switch made it live (0: never switched). A branch cut before gets the last
    message before it that was not in a branch cut earlier (kernel/store/branches.py)."""
    conn.execute(
        """
        CREATE TABLE branches (
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            branch INTEGER NOT NULL,
            fork INTEGER NOT NULL,
            how TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (session_id, branch)
        )
        """
    )
    conn.execute("ALTER TABLE sessions ADD COLUMN branch INTEGER NOT NULL DEFAULT 0")
    conn.execute(
        """
        INSERT INTO branches (session_id, branch, fork, how, at)
        SELECT c.session_id, c.cut, COALESCE((
            SELECT MAX(p.id) FROM messages p WHERE p.session_id = c.session_id
            AND p.id < c.first AND (p.cut = 0 OR p.cut > c.cut)), 0), 'cut', c.at
        FROM (SELECT session_id, cut, MIN(id) AS first, MAX(created_at) AS at
              FROM messages WHERE cut > 0 GROUP BY session_id, cut) c
        """
    )


def m021_session_modes(conn: sqlite3.Connection) -> None:
    """A session's mode (issue 38): ``act`` (every tool), ``plan`` or ``read_only`` (the
    tools that write or act held back); a session from before is in ``act``."""
    conn.execute(
        "ALTER TABLE sessions ADD COLUMN mode TEXT NOT NULL DEFAULT 'act'"
        " CHECK (mode IN ('act', 'plan', 'read_only'))"
    )


def m022_memory_vectors(conn: sqlite3.Connection) -> None:
    """Memories' vectors (issue 39): one per memory, of the embedding model ``model``
    (name@dimensions): ``vector`` float32 little-endian, ``bits`` its signs packed (a
    first cut that needs no extension, read from its covering index). A plain table, so
    the database opens and migrates without sqlite-vec; a memory deleted or given new
    text loses its vector (the triggers), and the backfill embeds it again."""
    conn.execute(
        """
        CREATE TABLE memory_vectors (
            memory_id INTEGER PRIMARY KEY,
            model TEXT NOT NULL,
            bits BLOB NOT NULL,
            vector BLOB NOT NULL
        )
        """
    )
    # The first cut reads only this index (a few bytes a memory), never the vectors.
    conn.execute("CREATE INDEX memory_vectors_bits ON memory_vectors(model, memory_id, bits)")
    conn.execute(
        "CREATE TRIGGER memory_vectors_gone AFTER DELETE ON memories BEGIN"
        " DELETE FROM memory_vectors WHERE memory_id = OLD.id; END"
    )
    conn.execute(
        "CREATE TRIGGER memory_vectors_stale AFTER UPDATE OF text ON memories"
        " WHEN NEW.text IS NOT OLD.text BEGIN"
        " DELETE FROM memory_vectors WHERE memory_id = OLD.id; END"
    )


def m023_memory_versions(conn: sqlite3.Connection) -> None:
    """A memory's earlier versions (issue 39): a fact edited or superseded keeps its one
    row in ``memories`` (its id, its ``#n``) with the current text; each text it had
    before is a row here with its category and scope then, when that text began
    (``saved_at``), when it was replaced and how (``edited``: the owner's edit;
    ``superseded``: a newer fact that contradicts it; ``restated``: the same fact in
    other words). Recall reads ``memories`` only, so it never offers an old version."""
    conn.execute(
        """
        CREATE TABLE memory_versions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            category TEXT,
            scope TEXT NOT NULL,
            saved_at TEXT NOT NULL,
            replaced_at TEXT NOT NULL,
            how TEXT NOT NULL CHECK (how IN ('edited', 'superseded', 'restated'))
        )
        """
    )
    conn.execute("CREATE INDEX memory_versions_memory ON memory_versions(memory_id, id)")
