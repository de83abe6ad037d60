"""The audit's anchor outside the database: ``data/audit.anchor``, the global chain's
last sequence and hash as a small JSON file (0600), rewritten atomically at most once a
second while events are recorded and at stop.

Inside one SQLite file, whoever deletes every row and the heads leaves a chain that
verifies empty. The anchor is the record of how far the chain went: verification refuses
a chain shorter than the anchor (``missing``) or one whose row at the anchor's sequence
has another hash (``anchor``). It may lag the database by a second (a crash before the
write), never lead it, so an anchor behind the chain's end is fine.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kernel.core.fileio import write_atomic

log = logging.getLogger(__name__)

ANCHOR_FILE = "audit.anchor"


def write_anchor(path: Path, seq: int, value: str) -> None:
    """Blocking: run it in a thread."""
    body = json.dumps({"seq": seq, "hash": value}, separators=(",", ":")) + "\n"
    write_atomic(path, body.encode("ascii"))


def read_anchor(path: Path) -> tuple[int, str] | None:
    """(seq, hash), or None when there is no anchor yet. An unreadable or malformed
    anchor counts as (0, "") — present but empty — so verification says ``anchor``
    rather than ignoring it. Blocking."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return (0, "")
    try:
        data = json.loads(text)
        seq, value = data["seq"], data["hash"]
    except (ValueError, TypeError, KeyError):
        return (0, "")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(value, str):
        return (0, "")
    return (seq, value)
