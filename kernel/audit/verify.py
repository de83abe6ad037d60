"""Verification of one audit chain (a session's or the global one): pure, no I/O.

A chain is whole when its rows are numbered 1, 2, 3 … with no gap, each row's data
matches its ``data_sha256`` and its digest its fields, each link is SHA-256(previous
link + digest), the last row is the head ``audit_heads`` records (and, for the global
chain, reaches the anchor kept outside the database), every emptied row is covered by a
later, intact ``audit.pruned`` row that emptied its session up to it, every message a
row references still holds the content it had, and (for a session's chain) the global
numbering has no gap. The first row where any of this fails is named with the reason;
the reasons are codes a reader turns into words (``audit.broken.<reason>``).

With the audit key (kernel/audit/key.py) the rows from the key's first row on are
checked with HMAC-SHA256 under it (the older ones with SHA-256), the row where the key
began must be its ``audit.keyed`` row and be there (a record cut or wiped before it:
``short``; written anew after a wipe: ``reset``), and the anchor must be there and
sealed with the key (``anchor_missing``, ``anchor_unsealed``). Without the key file, a
record sealed from some row on cannot be proven from there (``key_missing``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernel.audit.anchor import Anchor, is_sealed
from kernel.audit.key import AuditKey
from kernel.store.audit import (
    GENESIS,
    KEYED,
    AuditRow,
    Chain,
    Prune,
    digest_of,
    link,
    sha256,
)

# The reasons verification can give, each with its English detail (the API's words).
REASONS = {
    "missing": "a row is missing: it was deleted",
    "edited": "the row was changed after it was written",
    "link": "the row does not follow the one before it (removed, replaced or reordered)",
    "pruned_unrecorded": "the row was emptied without a record that its history was deleted",
    "message_edited": "a message the row refers to was changed after it was stored",
    "message_missing": "a message the row refers to is gone, with no record of its deletion",
    "head": "the chain's recorded end does not match its last row",
    "anchor": "the chain does not reach or match the anchor kept outside the database"
    " (data/audit.anchor)",
    "elsewhere": "a row of the whole record is missing (its global number is given):"
    " verify the whole record",
    "anchor_missing": "the anchor kept outside the database (data/audit.anchor) is gone:"
    " it was deleted, or the record was wiped with it",
    "anchor_unsealed": "the anchor (data/audit.anchor) is not sealed with the audit key:"
    " it was replaced or reset",
    "short": "the record ends before the row its key file says was written with the key:"
    " it was cut or wiped",
    "reset": "the row was written after the record was wiped and started again (the key"
    " file is older than this record)",
    "key_missing": "the record is sealed from this row on, but its key file is not there"
    " (audit.key beside config.toml, or the kernel-audit-key credential): nothing from"
    " here on can be proven; verify where the key is, or give --key",
    "key_replaced": "this row began a key that is no longer the key file's: the key file"
    " was replaced, and the rows sealed with the old key cannot be proven",
}


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    checked: int  # rows checked
    pruned: int = 0  # rows emptied because their history was deleted
    first_broken_seq: int | None = None
    reason: str | None = None  # a key of REASONS

    def as_json(self) -> dict[str, Any]:
        if self.ok:
            return {"ok": True, "checked": self.checked, "pruned": self.pruned}
        return {
            "ok": False,
            "firstBrokenSeq": self.first_broken_seq,
            "first_broken_seq": self.first_broken_seq,
            "reason": self.reason,
            "detail": REASONS.get(self.reason or "", ""),
            "checked": self.checked,
            "pruned": self.pruned,
        }


def intact(row: AuditRow, key: bytes | None = None) -> bool:
    """The row's fields and data match its digest (an emptied row: its fields)."""
    if row.malformed:
        return False
    if not row.pruned and (row.raw_data is None or sha256(row.raw_data) != row.data_sha256):
        return False
    fresh = digest_of(
        row.id, row.session_id, row.seq, row.at, row.kind, row.actor, row.data_sha256, key
    )
    return fresh == row.digest


class _Keys:
    """Which key each row was sealed with: none before the key began, the key after."""

    def __init__(self, chain: Chain, key: AuditKey | None) -> None:
        self.key = key
        self.start = key.start if key is not None and key.start is not None else chain.keyed_at

    def sealed(self, row_id: int) -> bool:
        return self.start is not None and row_id >= self.start

    def of(self, row_id: int) -> bytes | None:
        return self.key.key if self.key is not None and self.sealed(row_id) else None


def verify_chain(
    chain: Chain,
    anchor: Anchor | tuple[int, str] | None = None,
    *,
    key: AuditKey | None = None,
    anchored: bool = True,
) -> Verdict:
    """``anchor``: the global chain's end kept outside the database
    (kernel/audit/anchor.py), checked for the global chain only; ``key``: the audit key
    (kernel/audit/key.py), None when there is no key file; ``anchored``: whether the
    record keeps an anchor (with a key it must then be there, sealed)."""
    if isinstance(anchor, tuple):
        anchor = Anchor(*anchor)
    session = chain.session_id is not None
    keys = _Keys(chain, key)
    previous = GENESIS
    expected = 1
    pruned = 0

    def broken(at: int, reason: str) -> Verdict:
        return Verdict(False, expected - 1, pruned, at, reason)

    for row in chain.rows:
        number = row.seq if session else row.id
        if row.malformed:
            return broken(expected, "edited")
        if number != expected:
            return broken(expected, "missing")
        problem = _sealing_problem(row, keys, session)
        if problem is not None:
            return broken(number, problem)
        if row.pruned:
            if not _covered(row, chain.prunes, keys):
                return broken(number, "pruned_unrecorded")
            pruned += 1
        else:
            problem = _message_problem(row, chain)
            if problem is not None:
                return broken(number, problem)
        stored = row.shash if session else row.ghash
        if stored != link(previous, row.digest, keys.of(row.id)):
            return broken(number, "link")
        previous = stored
        expected += 1
    last = expected - 1
    if not session:
        problem_at = _end_problem(chain, anchor, key, anchored, last)
        if problem_at is not None:
            return broken(problem_at[0], problem_at[1])
    if chain.head is None:
        if last:
            return broken(last, "head")
    else:
        head_seq, head_hash = chain.head
        if head_seq > last:
            return broken(last + 1, "missing")
        if head_seq != last or head_hash != previous:
            return broken(max(last, 1), "head")
    if session and chain.global_gap is not None:  # its own end cut, its head set back
        return broken(chain.global_gap, "elsewhere")
    return Verdict(True, last, pruned)


def _sealing_problem(row: AuditRow, keys: _Keys, session: bool) -> str | None:
    """Whether the row matches its digest under the key it must have been sealed with;
    where the key began, the row must be the key's ``audit.keyed`` row."""
    if keys.sealed(row.id) and keys.key is None:
        return "key_missing"
    if row.kind == KEYED and row.session_id is None and not keys.sealed(row.id):
        return "key_replaced"
    if not intact(row, keys.of(row.id)):
        if keys.key is not None and not keys.sealed(row.id) and intact(row, keys.key.key):
            return "reset"  # sealed with the key, yet older than the key: written anew
        return "edited"
    start = keys.key.start if keys.key is not None else None
    if not session and row.id == start and row.kind != KEYED:
        return "reset"  # the key's first row is another: the record was started anew
    return None


def _end_problem(
    chain: Chain, anchor: Anchor | None, key: AuditKey | None, anchored: bool, last: int
) -> tuple[int, str] | None:
    """The global chain's end against the key file (how far it went at least) and the
    anchor (how far it went when last written)."""
    if key is not None and key.start is not None and last < key.start:
        return (last + 1, "short")
    if key is not None and anchored:
        if anchor is None:
            return (max(last, 1), "anchor_missing")
        if not is_sealed(anchor, key.key):
            return (max(min(anchor.seq, last), 1), "anchor_unsealed")
    if anchor is None:
        return None
    if anchor.seq > last:
        return (last + 1, "missing")
    if anchor.seq < 1 and last:
        return (1, "anchor")
    if anchor.seq >= 1 and chain.rows[anchor.seq - 1].ghash != anchor.hash:
        return (anchor.seq, "anchor")
    return None


def _covered(row: AuditRow, prunes: list[Prune], keys: _Keys) -> bool:
    """An emptied row is accounted for by an intact ``audit.pruned`` row written after
    it that emptied its session at least up to it."""
    if row.session_id is None or row.seq is None:
        return False
    for prune in prunes:
        if prune.row.id <= row.id or prune.upto.get(row.session_id, 0) < row.seq:
            continue
        key = keys.of(prune.row.id)
        if keys.sealed(prune.row.id) and key is None:
            continue
        if intact(prune.row, key) and prune.row.ghash == link(
            prune.previous, prune.row.digest, key
        ):
            return True
    return False


def _message_problem(row: AuditRow, chain: Chain) -> str | None:
    """A message referenced by a row still in the record must still be there as it was:
    a history deleted the legitimate way empties the rows that referenced it."""
    for ref in (row.data or {}).get("messages") or []:
        if not isinstance(ref, dict):
            continue
        mid, want = ref.get("id"), ref.get("sha256")
        if not isinstance(mid, int) or not isinstance(want, str):
            continue
        found = chain.messages.get(mid)
        if found is None:
            return "message_missing"
        if found[1] != want:
            return "message_edited"
    return None
