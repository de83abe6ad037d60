"""A previewed change waiting to be applied, and how its preview reads: the targets'
text before and after, the hashes that tie an apply to the preview, and the preview's
JSON (a unified diff with secrets masked, a summary per target, the checks)."""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kernel.selfops.sensitive import mask_lines
from kernel.workspace.files import Parts

TTL = timedelta(minutes=5)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stable(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(slots=True)
class Doc:
    """A target's text before and after (``before`` None: the file is new)."""

    path: str
    before: str | None
    after: str
    parts: Parts = ()

    @property
    def base_hash(self) -> str:
        return digest(self.before) if self.before is not None else ""


@dataclass(slots=True)
class Pending:
    id: str
    target: str
    expires: datetime
    allow_sensitive: bool
    requires_sensitive: bool
    docs: list[Doc]
    confirm_hash: str = ""
    providers: dict[str, Any] | None = None  # the new [providers] of runtime.toml
    active: tuple[str, str] | None = None
    base_hash: str = ""  # of the state the preview was made from
    sensitive: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # the settings' dotted names it changes
    given: set[str] = field(default_factory=set)  # the strings its operations carry
    privileged: list[str] = field(default_factory=list)  # fields the privilege rule guards
    # SOUL.md's tool sections the change removes (their rules fall back to Kernel's)
    rules_removed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the owner should know first


def seal(pending: Pending) -> dict[str, Any]:
    """The confirm hash and the preview's JSON (diffs): in a worker thread."""
    pending.confirm_hash = digest(
        stable(
            {
                "id": pending.id,
                "target": pending.target,
                "base": pending.base_hash,
                "after": [digest(d.after) for d in pending.docs],
                "allow_sensitive": pending.allow_sensitive,
                "requires_sensitive_allow": pending.requires_sensitive,
            }
        )
    )
    return preview_json(pending)


def preview_json(p: Pending) -> dict[str, Any]:
    summary = []
    chunks = []
    for doc in p.docs:
        before = doc.before if doc.before is not None else ""
        diff = unified(doc.path, before, doc.after, new=doc.before is None)
        added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
        removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
        chunks.extend(diff)
        summary.append(
            {
                "target": p.target,
                "path": doc.path,
                "changed": before != doc.after or doc.before is None,
                "created": doc.before is None,
                "before_hash": doc.base_hash,
                "after_hash": digest(doc.after),
                "added_lines": added,
                "removed_lines": removed,
            }
        )
    changed = any(s["changed"] for s in summary)
    risk = "high" if p.requires_sensitive else "medium" if changed else "low"
    return {
        "mutation_id": p.id,
        "target": p.target,
        "confirm_hash": p.confirm_hash,
        "expires_at": p.expires.isoformat(timespec="seconds"),
        "ttl_seconds": int(TTL.total_seconds()),
        "checks": {
            "path_whitelist_passed": True,
            "structure_valid": True,
            "risk_level": risk,
            "sensitive_fields": list(p.sensitive),
            "privileged_fields": list(p.privileged),
            "denied_paths": [],
            "tool_rules_removed": list(p.rules_removed),
            "warnings": list(p.warnings),
        },
        "diff_summary": summary,
        "unified_diff": "\n".join(chunks),
        "requires_sensitive_allow": p.requires_sensitive,
        "allow_sensitive": p.allow_sensitive,
    }


def unified(path: str, before: str, after: str, *, new: bool) -> list[str]:
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            mask_lines(before).splitlines(keepends=True),
            mask_lines(after).splitlines(keepends=True),
            fromfile="/dev/null" if new else f"a/{path}",
            tofile=f"b/{path}",
        )
    ]
