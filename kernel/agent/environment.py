"""The ``environment_context`` layer (seed 000, issue 38): a system layer saying where
and when the assistant works, behind ``[features] environment_context`` (off by
default: most chats need none of it, and every request would carry it).

It says the working folder (the chat's project folder, else
``general.default_workspace``), the operating system, the shell's name and the local
date. Nothing secret: no environment variable's value but the shell program's bare
name, and a folder under the owner's home is written from ``~`` (the user name stays
out). The date is a day, not a time, so the layer changes once a day and the cached
prefix with it; the time of day rides in the turn's own message as before.
"""

from __future__ import annotations

import os
import platform
import re
from datetime import date
from pathlib import Path

from kernel.agent.context import Layer
from kernel.core.i18n import t

NAME = "environment_context"
_PROGRAM = re.compile(r"[A-Za-z0-9_.+-]{1,32}")


def shell_name() -> str:
    """The shell's program name (``bash``, ``zsh``, ``powershell``): never a path."""
    variable = "COMSPEC" if os.name == "nt" else "SHELL"
    name = Path(os.environ.get(variable, "")).name
    if name.lower().endswith(".exe"):
        name = name[:-4]
    if _PROGRAM.fullmatch(name):
        return name
    return "cmd" if os.name == "nt" else "sh"


def shown_folder(folder: Path) -> str:
    """``folder`` as the model reads it: under the home folder, from ``~``."""
    try:
        home = Path.home()
    except RuntimeError:  # no home to speak of
        return str(folder)
    try:
        inside = folder.relative_to(home)
    except ValueError:
        return str(folder)
    return "~" if not inside.parts else f"~/{inside.as_posix()}"


def environment_layer(folder: Path, today: date) -> Layer:
    system = f"{platform.system() or 'unknown'} {platform.machine()}".strip()
    text = t(
        "prompt.environment",
        folder=shown_folder(folder),
        os=system,
        shell=shell_name(),
        date=today.isoformat(),
    )
    return Layer(NAME, text, "environment")
