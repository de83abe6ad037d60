"""Session listing lines and ``#n`` references into the last listing of a conversation."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from kernel.core.errors import SessionError
from kernel.core.i18n import t
from kernel.profiles import valid_name

if TYPE_CHECKING:
    from kernel.store.db import SessionRow

_REF = re.compile(r"^#?(\d+)$")
_SEPARATORS = re.compile(r"[/,，、\s]+")


class LocalClock(Protocol):
    def local_time(self, when: datetime) -> datetime: ...


def format_history(rows: list[SessionRow], clock: LocalClock) -> str:
    """``#<n> YYYY-MM-DD <title> [project]`` lines, newest first, dates in the configured
    zone."""
    lines = [t("session.list_header")]
    lines += [session_label(n, row, clock) for n, row in enumerate(rows, start=1)]
    return "\n".join(lines)


def session_label(n: int, row: SessionRow, clock: LocalClock) -> str:
    """How a session is named in a listing: its /history line and its /resume button."""
    date = clock.local_time(row.updated_at).strftime("%Y-%m-%d")
    project = row.meta.get("project")
    tag = f" [{project}]" if isinstance(project, str) and project else ""
    return f"#{n} {date} {row.title or t('session.untitled')}{tag}"


def project_filter(arg: str) -> str | None:
    """``project:NAME`` (or ``project NAME``) → NAME; "" → None; else SessionError."""
    text = arg.strip()
    if not text:
        return None
    key, _, name = text.replace(":", " ", 1).partition(" ")
    name = name.strip()
    if key.lower() != "project" or not valid_name(name):
        raise SessionError(t("session.history_usage"))
    return name


def parse_refs(text: str, listed: int, bad_ref: str = "session.bad_ref") -> list[int]:
    """``#1/#3`` (also ``#1 #3``, ``#1,#3``) → [1, 3]; each must be within the last
    listing of ``listed`` rows. ``bad_ref`` names the catalogue text of the refusal."""
    refs: list[int] = []
    for part in filter(None, _SEPARATORS.split(text)):
        match = _REF.match(part)
        n = int(match.group(1)) if match else 0
        if not 1 <= n <= listed:
            raise SessionError(t(bad_ref, ref=part))
        refs.append(n)
    return refs
