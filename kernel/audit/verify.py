"""Verification of one audit chain (a session's or the global one): pure, no I/O.

A chain is whole when its rows are numbered 1, 2, 3 … with no gap, each row's data
matches its ``data_sha256`` and its digest its fields, each link is SHA-256(previous
link + digest), the last row is the head ``audit_heads`` records (and, for the global
chain, reaches the anchor kept outside the database), every emptied row is covered by a
later, intact ``audit.pruned`` row that emptied its session up to it, every message a
row references still holds the content it had, and (for a session's chain) the global
numbering has no gap. The first row where any of this fails is named with the reason;
the reasons are codes a reader turns into words (``audit.broken.<reason>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernel.store.audit import GENESIS, AuditRow, Chain, Prune, digest_of, link, sha256

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


def intact(row: AuditRow) -> bool:
    """The row's fields and data match its digest (an emptied row: its fields)."""
    if row.malformed:
        return False
    if not row.pruned and (row.raw_data is None or sha256(row.raw_data) != row.data_sha256):
        return False
    fresh = digest_of(row.id, row.session_id, row.seq, row.at, row.kind, row.actor, row.data_sha256)
    return fresh == row.digest


def verify_chain(chain: Chain, anchor: tuple[int, str] | None = None) -> Verdict:
    """``anchor``: the global chain's (seq, hash) kept outside the database
    (kernel/audit/anchor.py), checked for the global chain only."""
    session = chain.session_id is not None
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
        if not intact(row):
            return broken(number, "edited")
        if row.pruned:
            if not _covered(row, chain.prunes):
                return broken(number, "pruned_unrecorded")
            pruned += 1
        else:
            problem = _message_problem(row, chain)
            if problem is not None:
                return broken(number, problem)
        stored = row.shash if session else row.ghash
        if stored != link(previous, row.digest):
            return broken(number, "link")
        previous = stored
        expected += 1
    last = expected - 1
    if anchor is not None and not session:
        seq, value = anchor
        if seq > last:
            return broken(last + 1, "missing")
        if seq < 1 and last:
            return broken(1, "anchor")
        if seq >= 1 and chain.rows[seq - 1].ghash != value:
            return broken(seq, "anchor")
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


def _covered(row: AuditRow, prunes: list[Prune]) -> bool:
    """An emptied row is accounted for by an intact ``audit.pruned`` row written after
    it that emptied its session at least up to it."""
    if row.session_id is None or row.seq is None:
        return False
    for prune in prunes:
        if prune.row.id <= row.id or prune.upto.get(row.session_id, 0) < row.seq:
            continue
        if intact(prune.row) and prune.row.ghash == link(prune.previous, prune.row.digest):
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
