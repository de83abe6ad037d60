"""``kernel audit list|verify``: the audit trail read straight from the database file.

A proof should not depend on the process it audits: these verbs open ``kernel.db``
read-only (``mode=ro``, ``query_only``), never through the sidecar, never migrating or
writing. They work while Kernel runs (WAL: a reader sees the last committed state) and
while it is stopped (then the file is opened immutable: not even the -wal and -shm
files a reader of a live database shares are created). Only config.toml's [general] is
read (the data directory, the time zone, the language); ``--db`` names the file instead.
``verify`` also reads the audit key (kernel/audit/key.py: the kernel-audit-key credential,
else audit.key beside config.toml; ``--key`` names it): without it a sealed record
cannot be proven, which is a finding.

Exit codes: 0 done (``verify``: the chain is whole), 1 ``verify`` found the chain broken
(the first broken sequence and the reason are printed), 2 the database cannot be read
(in words, with the fix) or bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar
from zoneinfo import ZoneInfo

from kernel.audit.anchor import ANCHOR_FILE, load_anchor
from kernel.audit.key import AuditKey, BadKey, key_path, read_key
from kernel.audit.verify import verify_chain
from kernel.audit.words import describe, local_time, verdict_words, words
from kernel.client.verbs import print_json, table
from kernel.config.loader import general_of, locate_config
from kernel.core.errors import ConfigError
from kernel.core.i18n import t
from kernel.store.audit import MAX_LIMIT, read_chain, read_events, read_only
from kernel.store.migrations import get_version

AUDIT_SCHEMA = 16  # the migration that made the audit tables
EXIT_BROKEN = 1
EXIT_UNREADABLE = 2
_SESSION = re.compile(r"^(?:chat-)?(\d{1,18})$")
T = TypeVar("T")


class Unreadable(Exception):
    """The database cannot be read as an audit trail: the words say why and the fix."""


def session_number(value: str) -> int:
    match = _SESSION.match(value.strip())
    if match is None:
        raise argparse.ArgumentTypeError(t("client.audit_bad_session", got=value[:40]))
    return int(match.group(1))


def event_count(value: str) -> int:
    if not (value.isascii() and value.isdigit() and 1 <= int(value) <= MAX_LIMIT):
        raise argparse.ArgumentTypeError(t("client.audit_bad_count", got=value[:40], max=MAX_LIMIT))
    return int(value)


def register(sub: Any) -> None:
    """``kernel audit list|verify`` among ``kernel``'s subcommands."""
    audit = sub.add_parser(
        "audit", help="the audit trail: list events, verify its chains (reads kernel.db)"
    )
    verbs = audit.add_subparsers(dest="verb", required=True)
    listing = _verb(verbs, "list", list_events, "the last events (a session's, or all), in words")
    listing.add_argument(
        "-n", dest="count", type=event_count, default=20, help=f"how many (1-{MAX_LIMIT}, 20)"
    )
    checking = _verb(
        verbs, "verify", verify, "verify a session's chain (or the global one): exit 1 if broken"
    )
    checking.add_argument(
        "--key", type=Path, help="the audit key file (default: beside config.toml)"
    )


def _verb(verbs: Any, name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = verbs.add_parser(name, help=help_text)
    p.add_argument("--session", type=session_number, help="a session: N or chat-N (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--db", type=Path, help="the database file (default: from config.toml)")
    p.set_defaults(audit=handler)
    return p


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    handler: Callable[[argparse.Namespace, IO[str]], int] = args.audit
    try:
        return handler(args, out)
    except (Unreadable, ConfigError) as exc:
        print(f"kernel: {exc}", file=err)
        return EXIT_UNREADABLE


def _where(args: argparse.Namespace) -> tuple[Path, ZoneInfo]:
    """The database and the owner's time zone; with ``--db`` a config.toml that cannot
    be read does not stop the proof (times are then shown in UTC)."""
    try:
        general = general_of()
    except ConfigError:
        if args.db is None:
            raise
        return args.db, ZoneInfo("UTC")
    path = args.db if args.db is not None else general.data_dir / "kernel.db"
    return path, ZoneInfo(general.timezone)


def read(path: Path, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn`` on a read-only connection, in one read transaction (one snapshot)."""
    if not path.is_file():
        raise Unreadable(t("client.audit_no_db", path=path))
    # No write-ahead log beside it: Kernel is stopped (its close checkpoints and removes
    # it), so the file is read as it is, immutable, which creates no -wal/-shm files.
    # Else Kernel runs (or crashed): a read-only reader of the log sees its last commit.
    wal = path.with_name(path.name + "-wal")

    def checked(conn: sqlite3.Connection) -> T:
        version = get_version(conn)
        if version < AUDIT_SCHEMA:
            raise Unreadable(t("client.audit_too_old", path=path, version=version))
        return fn(conn)

    try:
        return read_only(path, checked, immutable=not wal.exists())
    except sqlite3.Error as exc:
        detail = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
        raise Unreadable(t("client.audit_unreadable", path=path, detail=detail)) from None


def list_events(args: argparse.Namespace, out: IO[str]) -> int:
    path, tz = _where(args)
    rows = read(path, lambda conn: read_events(conn, args.session, args.count))
    if args.json:
        items = [row.as_json() | {"text": describe(row, tz)} for row in rows]
        return print_json({"session_id": args.session, "items": items}, out)
    if not rows:
        out.write(t("audit.none") + "\n")
        return 0
    table(
        ["#", "AT", "ACTOR", "EVENT"],
        [
            [
                row.seq if args.session is not None and row.seq is not None else row.id,
                local_time(row.at, tz),
                row.actor,
                words(row),
            ]
            for row in rows
        ],
        out,
    )
    return 0


def _key(args: argparse.Namespace) -> AuditKey | None:
    """The audit key: ``--key``, else where Kernel keeps it (config.toml's folder or the
    systemd credential); None when there is no such file (verify says what that means)."""
    path = args.key
    if path is None:
        try:
            path = key_path(locate_config(os.environ).parent)
        except ConfigError:
            return None  # --db without a readable config.toml: no key known
    try:
        return read_key(path)
    except BadKey as exc:
        raise Unreadable(t("audit.key_bad", path=path, detail=str(exc))) from None


def verify(args: argparse.Namespace, out: IO[str]) -> int:
    path, _ = _where(args)
    key = _key(args)
    if key is None and args.db is not None:  # --db: nothing said the record is unkeyed
        print(f"kernel: {t('client.audit_no_key')}", file=sys.stderr)
    # The global chain's end Kernel keeps beside the database (kernel/audit/anchor.py),
    # read before the snapshot: a Kernel recording meanwhile only moves the chain ahead.
    anchor = load_anchor(path.parent / ANCHOR_FILE) if args.session is None else None
    chain = read(path, lambda conn: read_chain(conn, args.session))
    verdict = verify_chain(chain, anchor, key=key)
    if args.json:
        print_json(verdict.as_json() | {"session_id": args.session}, out)
    else:
        out.write(verdict_words(verdict) + "\n")
    return 0 if verdict.ok else EXIT_BROKEN
