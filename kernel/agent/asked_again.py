"""A question asked again after its turn failed goes to the model once (issue 34).

A turn that fails (the model overloaded, a crash, a network fault) keeps the owner's
message in the history, so that what was asked is not lost. When the owner then asks
the same thing again — 🔁 on the error notice, or typing it anew — the new turn would
append it a second time, and the model would receive the question twice, glued into one
message. Before such a turn stores its message, the failed exchange it repeats is cut
(kept as a branch, like /retry's cut, with its ``history.cut`` record).

Public API: :func:`unanswered_repeat`, :func:`repeat_in`.
"""

from __future__ import annotations

from kernel.agent.slimming import media_dropped, owner_text
from kernel.store.db import Store
from kernel.store.sessions import StoredMessage


async def unanswered_repeat(store: Store, session_id: int, text: str) -> int | None:
    """The id of the owner's message starting the session's last exchange when that
    exchange has no answer (no assistant text: its turn failed before one) and the
    message says exactly ``text``; None otherwise."""
    if not text.strip():
        return None
    return repeat_in(await store.load_transcript(session_id, rounds=1), text)


def repeat_in(transcript: list[StoredMessage], text: str) -> int | None:
    """:func:`unanswered_repeat` of the session's last round as history keeps it (its
    transcript, failed and cut messages flagged)."""
    if not text.strip():
        return None
    live = [s for s in transcript if not s.cut and not s.failed]
    starts = [index for index, s in enumerate(live) if s.starts_round]
    if not starts:
        return None
    exchange = live[starts[-1] :]
    start = exchange[0].message
    if start.role != "user" or media_dropped(start):
        return None
    if any(s.message.role == "assistant" and not s.message.tool_uses for s in exchange):
        return None  # answered, or a partial answer kept: a new question, not a repeat
    return exchange[0].id if owner_text(start).strip() == text.strip() else None
