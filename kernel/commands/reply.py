"""What a command answers, before any channel renders it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kernel.core.turns import Turn


@dataclass(frozen=True)
class Choice:
    """An option a channel may offer as a button; ``command`` is the text it stands for
    (it always means the same option: ``/resume #2`` names session 2, not a place in a
    list). ``current``: the option in force now (a channel marks it)."""

    label: str
    command: str
    current: bool = False

    @property
    def argument(self) -> str:
        """What follows the command's name: ``/model x`` → ``x``."""
        return self.command.partition(" ")[2]


@dataclass(frozen=True)
class Button:
    """An inline button under the reply: ``data`` is what a press sends back (Telegram's
    callback data, at most 64 bytes); ``command`` the text that does the same where
    there are no buttons (the console shows it), "" when there is nothing to type."""

    label: str
    data: str
    command: str = ""


@dataclass(frozen=True)
class Reply:
    """Catalogue text for the owner; ``error`` marks a refusal (a channel may style it).

    ``text`` may be empty when only ``follow_up`` has something to say: slow work (a
    title from the titles model) that the channel runs where it keeps background work,
    then renders its reply like any other. ``turn``: a turn the command started
    (/retry), which the channel shows as it shows the turn of a message. ``buttons``:
    one row of inline buttons (/history's pages, a deletion's confirmation).
    """

    text: str = ""
    error: bool = False
    choices: tuple[Choice, ...] = ()
    buttons: tuple[Button, ...] = ()
    follow_up: Callable[[], Awaitable[Reply]] | None = field(default=None, compare=False)
    turn: Turn | None = field(default=None, compare=False)
