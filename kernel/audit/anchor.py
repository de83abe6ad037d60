"""The audit's anchor outside the database: ``data/audit.anchor``, the global chain's
last sequence and hash as a small JSON file (0600), rewritten in place (one synced
sector, :func:`write_anchor`) at most once a second while events are recorded and at
stop: checked in one job on the database thread (:func:`anchor_target`), then written
in a thread (the sync is not the database's to wait for).

Inside one SQLite file, whoever deletes every row and the heads leaves a chain that
verifies empty. The anchor is the record of how far the chain went: verification refuses
a chain shorter than the anchor (``missing``) or one whose row at the anchor's sequence
has another hash (``anchor``). It may lag the database by a second (a crash before the
write), never lead it, so an anchor behind the chain's end is fine.

With the audit key (kernel/audit/key.py) the anchor also carries ``mac``, HMAC-SHA256 of
its sequence and hash under the key: nobody without the key can write an anchor for a
cut record. A keyed record must have a sealed anchor: Kernel writes the first one with
the key's first row and never makes a new one after that (a missing or unsealed anchor
stays a finding of ``kernel audit verify``: ``anchor_missing``, ``anchor_unsealed``).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path

from kernel.core.fileio import write_atomic
from kernel.store.audit import ghash_of, last_row, seal

log = logging.getLogger(__name__)

ANCHOR_FILE = "audit.anchor"
RECORD = 256  # bytes of an anchor as written: its JSON (under 180) padded, inside one sector


@dataclass(frozen=True, slots=True)
class Anchor:
    seq: int
    hash: str
    mac: str | None = None  # under the audit key; None: an anchor of an unkeyed record


def anchor_mac(key: bytes, seq: int, value: str) -> str:
    return seal(f"anchor:{seq}:{value}", key)


def is_sealed(anchor: Anchor, key: bytes) -> bool:
    """The anchor's ``mac`` was made with ``key`` for its sequence and hash."""
    if anchor.mac is None:
        return False
    return hmac.compare_digest(anchor.mac, anchor_mac(key, anchor.seq, anchor.hash))


def write_anchor(path: Path, seq: int, value: str, key: bytes | None = None) -> None:
    """Blocking: run it in a thread. ``key``: the audit key (the anchor is sealed).

    The anchor is one record of ``RECORD`` bytes (its JSON padded with spaces), rewritten
    in place and synced (``pwrite``, ``fdatasync``): half the CPU, in the service, of a
    new file made, synced and renamed over it once a second (233 against 496 µs, issue
    37). The write lies inside the file's first disk sector, which disks write whole: a
    power cut leaves the old record or the new one. (A disk that tore it would leave an
    unreadable anchor: ``kernel audit verify`` says so, as it does for a damaged one.)
    Where it cannot be rewritten (no anchor yet, one of another size, or not a plain
    file of Kernel's own alone: a link, another owner, other permissions), the record is
    made anew atomically, as every write was before."""
    fields: dict[str, object] = {"seq": seq, "hash": value}
    if key is not None:
        fields["mac"] = anchor_mac(key, seq, value)
    body = json.dumps(fields, separators=(",", ":")).encode("ascii")
    record = body.ljust(RECORD - 1) + b"\n"
    if len(record) != RECORD or not _rewrite(path, record):
        write_atomic(path, record)


def _rewrite(path: Path, record: bytes) -> bool:
    """``record`` written over the anchor in place; False when it is not a file that may
    be (it is then made anew)."""
    nofollow, euid = getattr(os, "O_NOFOLLOW", 0), getattr(os, "geteuid", None)
    if not nofollow or euid is None:  # no way to refuse a link here: made anew
        return False
    try:
        fd = os.open(path, os.O_WRONLY | nofollow | os.O_CLOEXEC)
    except OSError:  # none yet, a symbolic link, not ours to write
        return False
    try:
        found = os.fstat(fd)
        if not (
            stat.S_ISREG(found.st_mode)
            and found.st_nlink == 1  # a hard link would carry the write elsewhere
            and found.st_uid == euid()
            and stat.S_IMODE(found.st_mode) == 0o600
            and found.st_size == len(record)
        ):
            return False
        if os.pwrite(fd, record, 0) != len(record):
            return False
        os.fdatasync(fd)
        return True
    finally:
        os.close(fd)


def anchor_target(
    conn: sqlite3.Connection, path: Path, key: bytes | None, anew: bool
) -> tuple[str, int, str]:
    """On the database thread, outside any transaction, after every write queued before
    it committed (one hop with the anchor's read, not a thread and then a hop): where
    the anchor moves, the record's last row, never ahead of the database, and only from
    a record that still reaches it. ("", its id, its link) to write (id 0: no row yet);
    else (why it stays, 0, ""): a record cut short (or changed) at the anchor's row
    keeps the old anchor, so verify goes on naming the break instead of the next event
    hiding it (review R1); a sealed record (``key``) never gets an anchor anew (a
    deleted or reset one, a cut record behind it, stays for verify to name: issue 33)
    unless ``anew`` (the key's first row)."""
    known = load_anchor(path)
    sealed = known is not None and key is not None and is_sealed(known, key)
    if key is not None and not anew and not sealed:
        return "is missing or not sealed", 0, ""
    if known is not None:
        found = ghash_of(conn, known.seq) if known.seq >= 1 else None
        if found != known.hash:
            return "no longer reached by the record", 0, ""
    last = last_row(conn)
    return ("", *last) if last is not None else ("", 0, "")


def load_anchor(path: Path) -> Anchor | None:
    """The anchor, or None when there is none. An unreadable or malformed anchor counts
    as ``Anchor(0, "")`` — present but empty — so verification says ``anchor`` rather
    than ignoring it. Blocking."""
    try:
        text = _read_settled(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return Anchor(0, "")
    try:
        data = json.loads(text)
        seq, value, mac = data["seq"], data["hash"], data.get("mac")
    except (ValueError, TypeError, KeyError, AttributeError):
        return Anchor(0, "")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(value, str):
        return Anchor(0, "")
    return Anchor(seq, value, mac if _is_mac(mac) else None)


def _read_settled(path: Path) -> str:
    """The anchor's text, read until two reads agree (at most three tries): a read
    beside an in-place rewrite (``kernel audit verify`` while Kernel runs) could see
    part of each; two the same cannot both be."""
    text = path.read_text(encoding="ascii")
    for _ in range(2):
        again = path.read_text(encoding="ascii")
        if again == text:
            break
        text = again
    return text


def _is_mac(value: object) -> bool:
    """An HMAC-SHA256 as :func:`anchor_mac` writes it: 64 lowercase hex characters (any
    other ``mac`` is no seal, and ``hmac.compare_digest`` refuses non-ASCII text)."""
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def read_anchor(path: Path) -> tuple[int, str] | None:
    """(seq, hash) of :func:`load_anchor`, or None when there is no anchor. Blocking."""
    found = load_anchor(path)
    return None if found is None else (found.seq, found.hash)
