"""Tool names for MCP tools: ``mcp_{server}__{tool}`` within provider limits.

Providers accept ``^[a-zA-Z0-9_-]{1,64}$``. Names must also be stable (the model sees
them in its history) and never collide. Collisions across servers are made impossible
by construction: each server gets a distinct prefix part with no ``__`` in it and no
leading or trailing ``_``, so the first ``__`` after ``mcp_`` always ends the server
part, and truncation only ever shortens the tool part. Within one server, sanitising
or truncating can still make two tool names equal; a name that needed no change wins,
and the others (in sorted order of the server's own names) get a suffix derived from a
hash of their real name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Iterable, Iterator

NAME_LIMIT = 64
SERVER_PART_LIMIT = 24  # leaves at least 34 characters of a 64-character name to the tool

_SERVER_UNSAFE = re.compile(r"[^a-zA-Z0-9-]+")  # "_" included: runs collapse to one "_"
_TOOL_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def short_hash(text: str, length: int = 6) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def server_parts(names: Iterable[str]) -> dict[str, str]:
    """A distinct, safe name part for each server, first come (in config order) first served."""
    parts: dict[str, str] = {}
    for name in names:
        parts[name] = server_part(name, set(parts.values()))
    return parts


def server_part(name: str, used: Collection[str]) -> str:
    """The name part of one more server (added while Kernel runs), distinct from ``used``."""
    return next(c for c in _server_candidates(name) if c not in used)


def _server_candidates(name: str) -> Iterator[str]:
    base = _SERVER_UNSAFE.sub("_", name).strip("_") or "server"
    if len(base) <= SERVER_PART_LIMIT:
        yield base
    n = 0
    while True:
        tag = short_hash(name) + (str(n) if n else "")
        yield f"{base[: SERVER_PART_LIMIT - len(tag) - 1].rstrip('_')}_{tag}"
        n += 1


def tool_name_candidates(server_part: str, tool: str) -> Iterator[str]:
    """The plain name, then hash-suffixed variants (endless; the caller stops)."""
    plain = f"mcp_{server_part}__{_TOOL_UNSAFE.sub('_', tool)}"
    yield plain[:NAME_LIMIT]
    n = 0
    while True:
        tag = "_" + short_hash(tool) + (str(n) if n else "")
        yield plain[: NAME_LIMIT - len(tag)] + tag
        n += 1


def assign_names(
    server_part: str,
    tools: Iterable[str],
    kept: dict[str, str],
    taken: Callable[[str], bool],
) -> dict[str, str]:
    """Registered names for ``tools`` (raw name → tool name).

    ``kept`` holds names this server's tools had before (they keep them, so a tool's
    name survives reconnects and list changes); ``taken`` says whether a name is
    already used by anything else.
    """
    out: dict[str, str] = {}
    used: set[str] = set()

    # Tools with names kept from before come first, then names that need no change.
    def order(tool: str) -> tuple[bool, bool, str]:
        changed = bool(_TOOL_UNSAFE.search(tool)) or len(f"mcp_{server_part}__{tool}") > NAME_LIMIT
        return tool not in kept, changed, tool

    for tool in sorted(tools, key=order):
        previous = kept.get(tool)
        if previous is not None and previous not in used and not taken(previous):
            name = previous
        else:
            candidates = tool_name_candidates(server_part, tool)
            name = next(c for c in candidates if c not in used and not taken(c))
        used.add(name)
        out[tool] = name
    return out
