"""Personas, projects and sub-agents (issue 18): ``personas/``, ``projects/`` and
``agents/`` beside config.toml, one ``<name>.md`` each (front matter + instructions).

Public API: :class:`Profile`, :class:`ProfileLibrary`, :class:`Profiles` (the three
libraries of one configuration), :data:`KINDS`, :data:`FOLDERS`, :func:`valid_name`,
:func:`parse_profile`, :func:`render_profile`, :func:`parse_tools`,
:func:`parse_reasoning`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernel.profiles.library import (
    FOLDERS,
    KINDS,
    Kind,
    Profile,
    ProfileLibrary,
    parse_profile,
    parse_reasoning,
    parse_tools,
    render_profile,
    valid_name,
)

__all__ = [
    "FOLDERS",
    "KINDS",
    "Kind",
    "Profile",
    "ProfileLibrary",
    "Profiles",
    "parse_profile",
    "parse_reasoning",
    "parse_tools",
    "render_profile",
    "valid_name",
]


@dataclass(frozen=True, slots=True)
class Profiles:
    """The three libraries beside one config.toml."""

    personas: ProfileLibrary
    projects: ProfileLibrary
    agents: ProfileLibrary

    @classmethod
    def beside(cls, base: Path) -> Profiles:
        return cls(
            ProfileLibrary(base / FOLDERS["persona"], "persona"),
            ProfileLibrary(base / FOLDERS["project"], "project"),
            ProfileLibrary(base / FOLDERS["agent"], "agent"),
        )

    def of(self, kind: Kind) -> ProfileLibrary:
        return {"persona": self.personas, "project": self.projects, "agent": self.agents}[kind]
