"""Where a memory belongs (issue 18): everywhere (``"global"``), to one project
(``"project:<name>"``) or to one persona (``"persona:<name>"``).

A chat sees the global memories plus those of its project and its persona
(:func:`visible`); a new memory goes to the chat's project when one is active
(:func:`default`). The names follow the profile names (``personas/<name>.md``), checked
here again because memory and profiles are separate layers.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from kernel.core.i18n import t

GLOBAL: Final = "global"
PROJECT: Final = "project"
PERSONA: Final = "persona"

Kind = Literal["global", "project", "persona"]
KINDS: tuple[Kind, ...] = (GLOBAL, PROJECT, PERSONA)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def project(name: str) -> str:
    """The scope of project ``name``. Raises ValueError for a name no project can have."""
    return _scoped(PROJECT, name)


def persona(name: str) -> str:
    """The scope of persona ``name``. Raises ValueError for a name no persona can have."""
    return _scoped(PERSONA, name)


def _scoped(kind: str, name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"invalid {kind} name for a memory scope")
    return f"{kind}:{name}"


def visible(project_name: str = "", persona_name: str = "") -> tuple[str, ...]:
    """The scopes a chat with this project and persona ("" none) sees: global first."""
    scopes = [GLOBAL]
    if project_name:
        scopes.append(project(project_name))
    if persona_name:
        scopes.append(persona(persona_name))
    return tuple(scopes)


def default(project_name: str = "") -> str:
    """Where a chat's new memory goes: its project's scope, else global."""
    return project(project_name) if project_name else GLOBAL


def split(scope: str) -> tuple[Kind, str]:
    """(kind, name) of a scope ("" name for global). Raises ValueError when ``scope``
    is not one of the three shapes."""
    if scope == GLOBAL:
        return GLOBAL, ""
    kind, sep, name = scope.partition(":")
    if sep and kind == PROJECT and _NAME.fullmatch(name):
        return PROJECT, name
    if sep and kind == PERSONA and _NAME.fullmatch(name):
        return PERSONA, name
    raise ValueError("memory scope must be global, project:<name> or persona:<name>")


def check_scope(scope: str) -> str:
    """``scope`` itself when valid; raises ValueError otherwise."""
    split(scope)
    return scope


def word(scope: str) -> str:
    """The scope in the owner's language ("global", "project kernel")."""
    kind, name = split(scope)
    return t(f"memory.scope.{kind}", name=name)
