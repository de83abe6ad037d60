"""The audit's anchor outside the database: ``data/audit.anchor``, the global chain's
last sequence and hash as a small JSON file (0600), rewritten atomically at most once a
second while events are recorded and at stop.

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
from dataclasses import dataclass
from pathlib import Path

from kernel.core.fileio import write_atomic
from kernel.store.audit import seal

log = logging.getLogger(__name__)

ANCHOR_FILE = "audit.anchor"


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
    """Blocking: run it in a thread. ``key``: the audit key (the anchor is sealed)."""
    fields: dict[str, object] = {"seq": seq, "hash": value}
    if key is not None:
        fields["mac"] = anchor_mac(key, seq, value)
    body = json.dumps(fields, separators=(",", ":")) + "\n"
    write_atomic(path, body.encode("ascii"))


def load_anchor(path: Path) -> Anchor | None:
    """The anchor, or None when there is none. An unreadable or malformed anchor counts
    as ``Anchor(0, "")`` — present but empty — so verification says ``anchor`` rather
    than ignoring it. Blocking."""
    try:
        text = path.read_text(encoding="ascii")
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
