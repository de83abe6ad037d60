"""How the handling of an owner's message ended, for its inbox row.

The inbound handlers (``inbound.py``, the busy desk ``busy.py``) return an
:data:`Outcome`; they never settle a row themselves. The mailroom (``mailroom.py``), which
owns the inbox, applies it: closes the row, queues the notice that settles it, holds it
for the owner's choice, or runs the work still to do as the chat's busy task and applies
what that work returns in turn.

``error``: the handling ended by this exception (a cancellation, a failure); it is
raised again once the row is settled, so the task ends exactly as it would have.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.store.mailbox import InboxState

if TYPE_CHECKING:
    from kernel.core.turns import Turn


@dataclass(frozen=True)
class Close:
    """The row is settled ``state``; with ``notice`` (🔁 under it when ``again``), the
    notice is queued and settles the row in the same transaction."""

    state: InboxState
    notice: str | None = None
    again: bool = False
    error: BaseException | None = None


@dataclass(frozen=True)
class Keep:
    """The row is left as it is: settled with its reply already, or open because a stop
    cut it off or the store refused its reply (the next start tells the owner, with 🔁)."""

    error: BaseException | None = None


@dataclass(frozen=True)
class Hold:
    """The chat is busy: the row waits for the owner's choice, counted by the busy
    notice (``held.py``)."""


@dataclass(frozen=True)
class Later:
    """Work that goes on beside the update queue (a download read, a turn shown, a
    message waiting for a stopped turn): run as the chat's busy task, its outcome
    applied when it ends. ``turn``: the turn it shows, whose session the row records."""

    work: Coroutine[Any, Any, Outcome]
    name: str
    for_owner: bool = False
    turn: Turn | None = None


Outcome = Close | Keep | Hold | Later

ANSWERED = Close("answered")


def told(text: str, state: InboxState = "failed", *, again: bool = False) -> Close:
    """A notice ends the message's handling (a refusal before any turn)."""
    return Close(state, text, again)


def cut(error: BaseException, state: InboxState | None) -> Close | Keep:
    """The handling ended by ``error``: the row settled ``state``, or left open (None)."""
    return Keep(error) if state is None else Close(state, error=error)
