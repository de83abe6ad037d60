"""What the audit trail keeps of a SelfOps change (issue 23): ``selfops.preview`` and
``selfops.apply`` rows with the change's id, target, the owner's own workspace paths or
configuration key names it touches, whether it is sensitive (and the sensitive names),
and each target's SHA-256 before and after (those the preview's ``diff_summary`` shows;
settings are hashed as masked). Never a file's content nor a setting's value. A refused
apply is recorded too, its refusal's code as the ``outcome``."""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from kernel.audit import AuditLog
from kernel.selfops.pending import Pending, digest

_CHANGE_ID = re.compile(r"[0-9a-f]{32}")  # what preview hands out (uuid4().hex)


def _path(path: str) -> str:
    """A target's name as the audit keeps it: a path outside config.toml's folder (a
    runtime.toml kept elsewhere) by its file name only."""
    return PurePath(path).name if PurePath(path).is_absolute() else path


def facts_of(pending: Pending) -> dict[str, Any]:
    return {
        "target": pending.target,
        "paths": [_path(doc.path) for doc in pending.docs],
        "keys": list(pending.keys) or None,
        "sensitive": pending.requires_sensitive,
        "sensitive_fields": list(pending.sensitive) or None,
        "hashes": [
            {
                "path": _path(doc.path),
                "before_sha256": doc.base_hash or None,
                "after_sha256": digest(doc.after),
            }
            for doc in pending.docs
        ],
    }


async def record(
    audit: AuditLog | None,
    kind: str,
    actor: str,
    change_id: str,
    pending: Pending | None,
    outcome: str,
) -> None:
    """One row; ``change_id`` as given is kept only when it has the shape of an id."""
    if audit is None:
        return
    facts = facts_of(pending) if pending is not None else {}
    change = change_id if _CHANGE_ID.fullmatch(change_id) else None
    await audit.record(kind, actor=actor, change=change, outcome=outcome, **facts)
