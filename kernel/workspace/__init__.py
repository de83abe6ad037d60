"""The owner's workspace folder (``general.default_workspace``) as the sidecar serves it."""

from kernel.workspace.files import Entry, OpenFile, Workspace, parts_of

__all__ = ["Entry", "OpenFile", "Workspace", "parts_of"]
