"""What a command answers, before any channel renders it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kernel.core.turns import Turn


@dataclass(frozen=True)
class Choice:
    """An option a channel may offer as a button; ``command`` is the text it stands for.

    ``current``: the option in force now (a channel marks it). ``key``: what the option
    is when its command's words can come to mean another one (``/resume #2`` names a
    place in a listing; its key names the session); by default the command itself.
    """

    label: str
    command: str
    current: bool = False
    key: str = ""

    @property
    def identity(self) -> str:
        return self.key or self.command

    @property
    def argument(self) -> str:
        """What follows the command's name: ``/model x`` → ``x``."""
        return self.command.partition(" ")[2]


@dataclass(frozen=True)
class Reply:
    """Catalogue text for the owner; ``error`` marks a refusal (a channel may style it).

    ``text`` may be empty when only ``follow_up`` has something to say: slow work (a
    title from the titles model) that the channel runs where it keeps background work,
    then renders its reply like any other. ``turn``: a turn the command started
    (/retry), which the channel shows as it shows the turn of a message.
    """

    text: str = ""
    error: bool = False
    choices: tuple[Choice, ...] = ()
    follow_up: Callable[[], Awaitable[Reply]] | None = field(default=None, compare=False)
    turn: Turn | None = field(default=None, compare=False)
