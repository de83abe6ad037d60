"""A previewed SelfOps change waiting for its apply: :class:`Pending` (its target, the
texts before and after, what it touches), as kernel/selfops/mutations.py makes it and
kernel/selfops/recording.py writes it to the audit."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kernel.workspace.files import Parts


def content_hash(text: str) -> str:
    """The SHA-256 of a text, as previews and the audit name a target's content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(slots=True)
class _Doc:
    """A target's text before and after (``before`` None: the file is new)."""

    path: str
    before: str | None
    after: str
    parts: Parts = ()

    @property
    def base_hash(self) -> str:
        return content_hash(self.before) if self.before is not None else ""


@dataclass(slots=True)
class Pending:
    id: str
    target: str
    expires: datetime
    allow_sensitive: bool
    requires_sensitive: bool
    docs: list[_Doc]
    confirm_hash: str = ""
    providers: dict[str, Any] | None = None  # the new [providers] of runtime.toml
    active: tuple[str, str] | None = None
    base_hash: str = ""  # of the state the preview was made from
    sensitive: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # the settings' dotted names it changes
    given: set[str] = field(default_factory=set)  # the strings its operations carry
    privileged: list[str] = field(default_factory=list)  # fields the privilege rule guards
