"""The audit key: the HMAC-SHA256 key the audit chain is sealed with, kept OUTSIDE the
data directory, so whoever can write ``data/`` (the database, the anchor) but cannot read
the key cannot recompute a single digest: a forged, edited, reordered or dropped row is
found by ``kernel audit verify``.

Where it is: ``$CREDENTIALS_DIRECTORY/kernel-audit-key`` when that file exists (a
systemd credential, deploy/kernel.service: ``LoadCredential=``), else ``audit.key``
beside config.toml. Kernel makes the second at its first start (32 random bytes, 0600,
created whole and exclusively: written to a temporary file, then hard-linked to its
name, which fails if the name exists) and never writes it again; nothing logs the key.

What it holds, one JSON line: ``{"v": 1, "key": "<64 hex>", "from": F}``. ``from`` is the
global id of the first row sealed with the key; rows before it were chained with plain
SHA-256 by an older Kernel and are verified that way. It lives in the key file, not in
the database, because whoever could move it there could declare every row "older" and
recompute them all without the key. Kernel writes the file in the same transaction as
row F, an ``audit.keyed`` row: the file's existence says row F was written, so a record
wiped (with its anchor) and started again is found too (``short``, ``reset``).

A key file without ``from`` (one an administrator made, e.g. deploy/setup.sh for the
credential, which the service cannot write) is used from the first ``audit.keyed`` row
Kernel writes with it; the sealed anchor then guards the boundary, but a record wiped
with its anchor and started again cannot be told from a new one (README, "What did it
do?").
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernel.core.fileio import create_whole
from kernel.store.audit import KEYED, AuditRow, append_in, global_head, keyed_at

KEY_FILE = "audit.key"
CREDENTIAL = "kernel-audit-key"  # the name under $CREDENTIALS_DIRECTORY
KEY_BYTES = 32
MAX_KEY_FILE = 4096


class BadKey(Exception):
    """The key file is there but cannot be read or is not a key (no key text in it)."""


@dataclass(frozen=True, slots=True)
class AuditKey:
    key: bytes = field(repr=False)  # never printed, never logged
    start: int | None  # the first global id sealed with it (None: its audit.keyed row)
    path: Path


@dataclass(frozen=True, slots=True)
class Opened:
    """What start-up found: the key, the ``audit.keyed`` row written now (if any), the
    record's end before it, the first ``audit.keyed`` row before it, whether made now."""

    key: AuditKey
    row: AuditRow | None
    head: int
    keyed_before: int | None
    made: bool


def key_path(config_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    """The systemd credential when it is there, else ``audit.key`` beside config.toml."""
    env = os.environ if env is None else env
    creds = env.get("CREDENTIALS_DIRECTORY")
    if creds:
        credential = Path(creds) / CREDENTIAL
        if credential.is_file():
            return credential
    return config_dir / KEY_FILE


def read_key(path: Path) -> AuditKey | None:
    """The key in ``path``, or None when there is no such file; BadKey when it cannot
    be read or holds no key (the reason in English, without the file's content)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_KEY_FILE + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadKey(os.strerror(exc.errno) if exc.errno else type(exc).__name__) from None
    try:
        data = json.loads(raw.decode("ascii"))
        key = bytes.fromhex(data["key"])
        start = data.get("from")
    except (ValueError, TypeError, KeyError, AttributeError):
        raise BadKey("not a key file") from None
    if len(key) < KEY_BYTES or len(raw) > MAX_KEY_FILE:
        raise BadKey("not a key file")
    if start is not None and (not isinstance(start, int) or isinstance(start, bool) or start < 1):
        raise BadKey("not a key file")
    return AuditKey(key, start, path)


def create_key(path: Path, start: int) -> AuditKey:
    """Make a new key file at ``path`` (0600), whole or not at all; FileExistsError when
    one is there already. Blocking."""
    key = secrets.token_bytes(KEY_BYTES)
    body = json.dumps({"v": 1, "key": key.hex(), "from": start}, separators=(",", ":"))
    create_whole(path, body.encode("ascii") + b"\n")
    return AuditKey(key, start, path)


def open_key(conn: sqlite3.Connection, path: Path, found: AuditKey | None, at: str) -> Opened:
    """In the database's write transaction: make the key when there is none (with its
    ``audit.keyed`` row, in the same transaction), or begin a key made elsewhere (its
    first ``audit.keyed`` row). A key file made here is removed if the row fails."""
    head, _ = global_head(conn)
    before = keyed_at(conn)
    made = found is None
    key = found if found is not None else create_key(path, head + 1)
    row = None
    if made or (key.start is None and before is None):
        try:
            row = append_in(
                conn,
                at,
                KEYED,
                session_id=None,
                actor="kernel",
                data={"from": head + 1},
                key=key.key,
            )
        except BaseException:
            if made:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
    return Opened(key, row, head, before, made)
