"""``/audit [n]`` and ``/audit all [n]``: the last events of this chat's session (or of
every chain) in plain words, then whether that chain verifies (issue 23)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.audit.words import describe, verdict_words
from kernel.commands.reply import Reply
from kernel.core.i18n import t

if TYPE_CHECKING:
    from kernel.agent.agent import Agent

DEFAULT_EVENTS = 10
MAX_EVENTS = 50
ALL = ("all", "全部")


def parse(arg: str) -> tuple[bool, int] | None:
    """``""``, ``"20"``, ``"all"``, ``"all 20"`` → (global, n); None when not one of those."""
    words = arg.split()
    every = bool(words) and words[0].lower() in ALL
    if every:
        words = words[1:]
    if not words:
        return every, DEFAULT_EVENTS
    if len(words) > 1:
        return None
    raw = words[0]
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3):
        return None
    n = int(raw)
    return (every, n) if 1 <= n <= MAX_EVENTS else None


async def audit_command(agent: Agent, conversation: str, arg: str) -> Reply:
    parsed = parse(arg)
    if parsed is None:
        return Reply(t("audit.bad_arg", got=arg[:40], max=MAX_EVENTS), error=True)
    every, n = parsed
    log = agent.audit
    session: int | None = None
    if not every:
        session = agent.sessions.current_session(conversation)
        if session is None:
            return Reply(t("audit.no_session"))
    rows = await log.events(session, limit=n)
    verdict = await log.verify(session)
    header = t("audit.header_all", n=len(rows)) if every else t("audit.header", n=len(rows))
    lines = [header] if rows else [t("audit.none")]
    for row in rows:
        number = row.id if every or row.seq is None else row.seq
        lines.append(f"#{number} {describe(row, agent.tz)}")
    lines.append(verdict_words(verdict))
    return Reply("\n".join(lines))
