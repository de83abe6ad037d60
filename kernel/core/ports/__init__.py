"""Ports: the narrow interfaces adapters receive from the composition root
(kernel/app.py builds them), written with core types only. An interface that must name
a domain type (a store, the agent) is a frozen dataclass or Protocol in the package that
consumes it (``kernel.plugins``' deps, ``kernel.commands.parts``), still built in app.py.

Public API: :class:`Service`.
"""

from __future__ import annotations

from typing import Protocol


class Service(Protocol):
    """A part started and stopped as one block (``async with``): the in-process core
    ``kernel chat`` and ``kernel tui`` run."""

    async def __aenter__(self) -> object: ...

    async def __aexit__(self, *exc: object) -> None: ...
