"""Session listing lines (the one label a session is known by), the words for its last
activity, sessions' ``#n`` (their own ids) and ``#n`` references into the last /memory
listing of a conversation."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from kernel.agent.titles import MAX_TITLE
from kernel.commands.reply import Button
from kernel.core.delivery import TOPIC_META
from kernel.core.errors import SessionError
from kernel.core.i18n import t
from kernel.core.messages import Message
from kernel.core.oneline import one_line
from kernel.profiles import valid_name

if TYPE_CHECKING:
    from kernel.store.db import SessionRow

_REF = re.compile(r"^#?(\d+)$")
_SEPARATORS = re.compile(r"[/,，、\s]+")


PREVIEW = 30  # characters of a first message shown for an untitled session
RECAP_WIDTH = 100  # characters of a line of /resume's recap
HISTORY = "hist:"  # a /history page button: hist:[all:][project:NAME:]<page>
HISTORY_PATTERN = r"^hist:(all:)?(project:[A-Za-z0-9][A-Za-z0-9_-]*:)?\d{1,6}$"
DELETE = "del:"  # a deletion's confirmation: del:<id>[,<id>…], or del:no
DELETE_NO = "del:no"
DELETE_PATTERN = r"^del:(no|\d{1,18}(,\d{1,18})*)$"
CONFIRM = "yes"  # "/del_history #n yes": deleted without asking (no buttons there)


class LocalClock(Protocol):
    def local_time(self, when: datetime) -> datetime: ...


def activity_words(when: datetime, now: datetime) -> str:
    """When a session was last active, in the owner's words: "今天 14:02", "昨天", "周二",
    "6月3日", "2024-06-03" ("today 14:02", "yesterday", "Tue", "Jun 3"). Both times are
    in the owner's zone (``general.timezone``)."""
    days = (now.date() - when.date()).days
    if days <= 0:  # a clock a little behind the store's counts as today
        return t("when.today", time=when.strftime("%H:%M"))
    if days == 1:
        return t("when.yesterday")
    if days < 7:
        return t("when.weekdays").split()[when.weekday()]
    if when.year == now.year:
        return t("when.date", month=t("when.months").split()[when.month - 1], day=when.day)
    return when.strftime("%Y-%m-%d")


def session_name(row: SessionRow, first_words: str) -> str:
    """Its title, or before one exists the start of its first message (quoted)."""
    if row.title and row.title.strip():
        return one_line(row.title, MAX_TITLE)
    if first_words.strip():
        return f"“{one_line(first_words, PREVIEW)}”"
    return t("session.untitled")


def named(session_id: int, name: str) -> str:
    """``#12「name」`` (``#12 “name”``): a session as a sentence names it."""
    return t("session.named", n=session_id, name=name.strip("“”"))


def session_label(row: SessionRow, first_words: str, now: datetime, clock: LocalClock) -> str:
    """How the owner tells a session apart (the /history line after its number, the
    picker's button): its title, or before one exists the start of its first message
    (``first_words``, see ``Store.first_words``); its last activity; its message count;
    its project. Plain text, one line. ``now`` is local (``Agent.local_now``)."""
    name = session_name(row, first_words)
    when = activity_words(clock.local_time(row.updated_at), now)
    count = row.message_count
    words = t("session.count_one") if count == 1 else t("session.count", n=count)
    label = f"{name} · {when} · {words}"
    project = row.meta.get("project")
    return f"{label} [{project}]" if isinstance(project, str) and project else label


def format_history(
    rows: list[SessionRow],
    first_words: dict[int, str],
    now: datetime,
    clock: LocalClock,
    *,
    current: int | None,
    header: str,
) -> str:
    """``#<id> <label>`` lines under ``header``, the current session marked; ``#<id>``
    is the session's own number: it never changes, so an old list stays right."""
    lines = [header]
    for row in rows:
        mark = t("session.current_mark") if row.id == current else ""
        if row.meta.get(TOPIC_META):  # it has a Telegram topic (/resume opens it)
            mark = t("session.topic_mark") + mark
        label = session_label(row, first_words.get(row.id, ""), now, clock)
        lines.append(f"#{row.id} {label}{mark}")
    return "\n".join(lines)


def session_ids(text: str) -> list[int]:
    """``#3/#7`` (also ``3 7``, ``#3,#7``) → [3, 7]: sessions by their own numbers;
    SessionError naming the first that is not a number."""
    ids: list[int] = []
    for part in filter(None, _SEPARATORS.split(text)):
        match = _REF.match(part)
        if match is None or len(match.group(1)) > 18 or int(match.group(1)) < 1:
            raise SessionError(t("session.bad_ref", ref=part))
        ids.append(int(match.group(1)))
    return ids


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """``/history [all] [project:NAME] [page]``."""

    every: bool = False  # every channel's sessions, not only this chat's
    project: str | None = None
    page: int = 1

    def words(self, page: int) -> list[str]:
        every = ["all"] if self.every else []
        return every + ([f"project:{self.project}"] if self.project else []) + [str(page)]


def history_query(arg: str) -> HistoryQuery:
    words = arg.split()
    page = 1
    if words and words[-1].isascii() and words[-1].isdigit() and len(words[-1]) <= 6:
        page = max(1, int(words.pop()))
    every = bool(words) and words[0].lower() == "all"
    project = project_filter(" ".join(words[1:] if every else words))
    return HistoryQuery(every, project, page)


def history_arg(data: str) -> str:
    """A page button's data (``hist:all:project:x:2``) → the /history argument."""
    words = data.removeprefix(HISTORY).split(":")
    if words[0] == "all":
        return " ".join(["all", ":".join(words[1:-1]), words[-1]])
    return " ".join([":".join(words[:-1]), words[-1]])


def page_buttons(query: HistoryQuery, page: int, pages: int) -> tuple[Button, ...]:
    """◀ ▶ under a /history page (none on a single page, nor when the data would not
    fit a button: a very long project name)."""
    buttons = []
    for label, to in (("◀", page - 1), ("▶", page + 1)):
        if 1 <= to <= pages:
            words = query.words(to)
            data = HISTORY + ":".join(words)
            if len(data.encode()) > 64:
                return ()
            buttons.append(Button(label, data, "/history " + " ".join(words)))
    return tuple(buttons)


def recap(messages: list[Message]) -> str:
    """Where the session was left: the owner's last message and the answer, each cut
    to two lines ("" for a session without messages)."""
    asked = next((m.text for m in messages if m.role == "user" and m.text.strip()), "")
    answer = next((m.text for m in reversed(messages) if m.role == "assistant" and m.text), "")
    if not asked.strip():
        return ""
    said = _two_lines(answer) if answer.strip() else t("session.recap_no_answer")
    return "\n" + t("session.recap", asked=_two_lines(asked), answer=said)


def _two_lines(text: str, width: int = RECAP_WIDTH) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    kept = [one_line(line, width) for line in lines[:2]]
    if len(lines) > 2 and not kept[-1].endswith("…"):
        kept[-1] += " …"
    return "\n".join(kept)


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
