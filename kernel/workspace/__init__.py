"""The owner's workspace folder (``general.default_workspace``) as the sidecar serves it.

Public API: :class:`Workspace` (read, list, write, delete under one lock),
:class:`Entry`, :class:`OpenFile`, :func:`parts_of` and ``Parts`` (the text check of a
relative path); ``kernel.workspace.archive.Archives`` (zip export and import);
``kernel.workspace.artifacts.ArtifactFiles`` (an artifact's file in the data directory,
opened under the same rules).
``paths.py`` holds the path checks (text and on disk) the others build on.
"""

from kernel.workspace.files import Entry, OpenFile, Workspace
from kernel.workspace.paths import Parts, parts_of

__all__ = ["Entry", "OpenFile", "Parts", "Workspace", "parts_of"]
